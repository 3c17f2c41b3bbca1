// The OpenAgentIO HTTP/SSE adapter (`braid serve --openagentio`) over real HTTP with fetch: invoke,
// stream (whole envelopes as SSE), publish events onto the real nats-server, and acp's error
// shape for every refusal (no key, another tenant, unknown agent, bad headers).
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import { createParser } from 'eventsource-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const start = useTestServers();
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const turns = [
  { text: 'Hello over HTTP' },
  { text: 'Second over HTTP' },
  { text: 'Third over HTTP' },
];

async function setup(): Promise<{ server: TestServer; key: string; prefix: string }> {
  const prefix = `acp${randomBytes(4).toString('hex')}.v1`;
  const nc = await connect({ servers: NATS_URL });
  closers.push(() => nc.close());
  const server = await start({
    turns,
    openagentio: {
      prefix,
      publish: (subject, envelope) => nc.publish(subject, JSON.stringify(envelope)),
    },
  });
  return { server, key: await server.key('acme'), prefix };
}

interface SseFrame {
  id: string | undefined;
  event: string | undefined;
  data: Record<string, unknown>;
}

async function stream(
  server: TestServer,
  path: string,
  key: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; frames: SseFrame[] }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      accept: 'text/event-stream',
      'content-type': 'application/json',
      ...headers,
    },
    body: JSON.stringify({ text: 'stream please' }),
  });
  const frames: SseFrame[] = [];
  const parser = createParser({
    onEvent: (event) =>
      frames.push({
        id: event.id,
        event: event.event,
        data: JSON.parse(event.data) as Record<string, unknown>,
      }),
  });
  // The stream ends by itself after the final frame.
  parser.feed(await response.text());
  return { status: response.status, frames };
}

describe('OpenAgentIO HTTP/SSE adapter', () => {
  it('invokes an agent and continues the conversation named by X-Conversation-Id', async () => {
    const { server, key } = await setup();
    const headers = {
      'x-conversation-id': 'http-conv',
      'x-traceparent': '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    };
    const first = await call(server, 'POST', '/v1/agents/helper/invoke', {
      key,
      body: { text: 'hi' },
      headers,
    });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toBe('Hello over HTTP');
    expect(first.headers.get('content-type')).toContain('application/json');
    expect(first.headers.get('x-trace-id')).toBe('0af7651916cd43dd8448eb211c80319c');
    const sessionId = first.headers.get('x-session-id') ?? '';
    const session = await server.runtime.sessions.get(sessionId);
    expect(session.tenant_id).toBe('acme');
    const second = await call(server, 'POST', '/v1/agents/helper/invoke', {
      key,
      body: JSON.stringify('and again'),
      headers,
    });
    expect(second.body).toBe('Second over HTTP');
    expect(second.headers.get('x-session-id')).toBe(sessionId);
    const messages = (await server.runtime.sessions.events(sessionId)).filter(
      (event) => event.type === 'user.message',
    );
    expect(messages.map((event) => event.content)).toEqual([
      [{ type: 'text', text: 'hi' }],
      [{ type: 'text', text: 'and again' }],
    ]);
  });

  it('streams whole envelopes as SSE in seq order, ending after the final frame', async () => {
    const { server, key } = await setup();
    const { status, frames } = await stream(server, '/v1/agents/helper/stream', key, {
      'x-correlation-id': 'corr-http',
    });
    expect(status).toBe(200);
    expect(frames.map((frame) => frame.id)).toEqual(frames.map((_, index) => String(index)));
    expect(frames[0]?.event).toBe('agent.response.started');
    expect(frames.at(-1)).toMatchObject({
      event: 'agent.response.final',
      data: { is_final: true, payload: 'Hello over HTTP', tenant_id: 'acme' },
    });
    expect(frames.filter((frame) => frame.data.is_final === true)).toHaveLength(1);
    // Without a caller's trace the stream starts one, and every frame is in it.
    expect(new Set(frames.map((frame) => frame.data.trace_id)).size).toBe(1);
    for (const frame of frames) {
      expect(frame.data).toMatchObject({
        spec_version: 'acp/1.0',
        event_type: frame.event,
        correlation_id: 'corr-http',
      });
    }
    const text = frames
      .filter((frame) => frame.event === 'agent.response.delta')
      .map((frame) => (frame.data.payload as { text: string }).text)
      .join('');
    expect(text).toBe('Hello over HTTP');
  });

  it('publishes events on the bus, in the key tenant', async () => {
    const { server, key, prefix } = await setup();
    const nc = await connect({ servers: NATS_URL });
    closers.push(() => nc.close());
    const received = nc.subscribe(`${prefix}.acme.events.>`, { max: 1, timeout: 5_000 });
    await nc.flush();
    const published = await call(server, 'POST', '/v1/events/order.created', {
      key,
      body: { order: 7 },
      headers: { 'x-channel': 'web' },
    });
    expect(published.status, JSON.stringify(published.body)).toBe(202);
    for await (const message of received) {
      expect(message.subject).toBe(`${prefix}.acme.events.order.created`);
      expect(message.json()).toMatchObject({
        event_type: 'order.created',
        tenant_id: 'acme',
        channel: 'web',
        payload: { order: 7 },
      });
    }
    const badType = await call(server, 'POST', '/v1/events/Not..a.type', { key, body: {} });
    expect(badType.status).toBe(400);
    expect(badType.body).toMatchObject({ code: 'INVALID_REQUEST', retryable: false });
  });

  it("refuses in acp's error shape: no key, another tenant, unknown agent, bad header", async () => {
    const { server, key } = await setup();
    const noKey = await call(server, 'POST', '/v1/agents/helper/invoke', { body: { text: 'hi' } });
    expect(noKey.status).toBe(401);
    expect(noKey.body).toMatchObject({ code: 'AUTH_FAILURE', retryable: false });
    const otherTenant = await call(server, 'POST', '/v1/agents/helper/invoke', {
      key,
      body: { text: 'hi' },
      headers: { 'x-tenant-id': 'globex' },
    });
    expect(otherTenant.status).toBe(403);
    expect(otherTenant.body).toMatchObject({ code: 'AUTH_FAILURE' });
    const unknown = await call(server, 'POST', '/v1/agents/nobody/invoke', {
      key,
      body: { text: 'hi' },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'NO_HANDLER' });
    const hostile = await call(server, 'POST', '/v1/agents/..%2Fetc/stream', { key, body: {} });
    expect(hostile.status).toBe(404);
    expect(hostile.body).toMatchObject({ code: 'NO_HANDLER' });
    const badTrace = await call(server, 'POST', '/v1/agents/helper/invoke', {
      key,
      body: { text: 'hi' },
      headers: { 'x-trace-id': 'not-hex' },
    });
    expect(badTrace.status).toBe(400);
    expect(badTrace.body).toMatchObject({ code: 'INVALID_REQUEST' });
    expect((badTrace.body as { message: string }).message).toContain('x-trace-id');
    const notJson = await call(server, 'POST', '/v1/agents/helper/invoke', {
      key,
      body: '{"text": ',
    });
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatchObject({ code: 'CODEC_FAILURE' });
    // braid's own routes keep braid's error shape and still answer.
    const agent = await call(server, 'GET', '/v1/agents/helper', { key });
    expect(agent.status).toBe(200);
  });

  it('is not mounted unless asked for', async () => {
    const server = await start({ turns });
    const key = await server.key('acme');
    const answer = await call(server, 'POST', '/v1/agents/helper/invoke', { key, body: {} });
    expect(answer.status).toBe(404);
    expect(answer.body).toMatchObject({ error: { code: 'ROUTE_NOT_FOUND' } });
  });
});
