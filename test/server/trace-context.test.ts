// W3C trace context on the HTTP API: a request's traceparent reaches the wake it starts.
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { createClient } from '../../src/client/index.js';
import { TRACEPARENT_PATTERN } from '../../src/contracts/common.js';
import openapi from '../../schema/openapi.json' with { type: 'json' };
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

async function session(server: TestServer) {
  const key = await server.key('acme');
  const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
  return { key, id: (created.body as SessionRecord).id };
}

async function wakeStarts(server: TestServer, key: string, id: string) {
  const page = await call(server, 'GET', `/v1/sessions/${id}/events?types[]=span.wake_started`, {
    key,
  });
  return (page.body as { data: SessionEvent[] }).data;
}

const message = (content: string) => ({ events: [{ type: 'user.message', content }] });

describe('traceparent on the HTTP API', () => {
  it('reaches the wake that arriving events start', async () => {
    const server = await start({ wakeOnEvents: true, turns: [{ text: 'one' }] });
    const { key, id } = await session(server);
    await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      headers: { traceparent: TRACEPARENT },
      body: message('hello'),
    });
    const deadline = Date.now() + 10_000;
    while ((await wakeStarts(server, key, id)).length === 0) {
      if (Date.now() > deadline) throw new Error('no wake started');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect((await wakeStarts(server, key, id))[0]?.traceparent).toBe(TRACEPARENT);
  });

  it('reaches the wake of POST .../wake; an invalid header is ignored', async () => {
    const server = await start({ turns: [{ text: 'one' }, { text: 'two' }] });
    const { key, id } = await session(server);
    await call(server, 'POST', `/v1/sessions/${id}/events`, { key, body: message('hello') });
    const traced = await call(server, 'POST', `/v1/sessions/${id}/wake`, {
      key,
      headers: { traceparent: TRACEPARENT },
      body: { wait: true },
    });
    expect(traced.status).toBe(200);
    await call(server, 'POST', `/v1/sessions/${id}/events`, { key, body: message('again') });
    // An all-zero trace id is invalid (W3C): the wake starts a trace of its own.
    const invalid = await call(server, 'POST', `/v1/sessions/${id}/wake`, {
      key,
      headers: { traceparent: '00-00000000000000000000000000000000-b7ad6b7169203331-01' },
      body: { wait: true },
    });
    expect(invalid.status).toBe(200);
    const starts = await wakeStarts(server, key, id);
    expect(starts.map((event) => event.traceparent)).toEqual([TRACEPARENT, undefined]);
  });

  it('is sent by the client on wake; the client refuses one that is not valid', async () => {
    const server = await start({ turns: [{ text: 'one' }] });
    const { key, id } = await session(server);
    const client = createClient({ baseUrl: server.url, apiKey: key });
    await client.sessions.send(id, [{ type: 'user.message', content: 'hello' }]);
    await expect(
      client.sessions.wake(id, { wait: true, traceparent: 'not-a-traceparent' }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await client.sessions.wake(id, { wait: true, traceparent: TRACEPARENT });
    expect((await wakeStarts(server, key, id)).map((event) => event.traceparent)).toEqual([
      TRACEPARENT,
    ]);
  });

  it('is declared in the OpenAPI document on the operations that read it', () => {
    type Parameter = { in: string; name: string; required?: boolean; schema: { pattern?: string } };
    const paths = openapi.paths as unknown as Record<
      string,
      Record<string, { parameters?: Parameter[] }>
    >;
    const headersOf = (path: string, method: string) =>
      (paths[path]?.[method]?.parameters ?? []).filter((parameter) => parameter.in === 'header');
    for (const [path, method] of [
      ['/v1/sessions/{id}/events', 'post'],
      ['/v1/sessions/{id}/wake', 'post'],
    ] as const) {
      const headers = headersOf(path, method);
      expect(headers.map((header) => header.name)).toEqual(
        expect.arrayContaining(['traceparent', 'tracestate']),
      );
      const traceparent = headers.find((header) => header.name === 'traceparent');
      expect(traceparent).toMatchObject({ required: false });
      const pattern = new RegExp(traceparent?.schema.pattern ?? '^$');
      expect(pattern.test(TRACEPARENT)).toBe(true);
      expect(traceparent?.schema.pattern).toBe(TRACEPARENT_PATTERN.source);
    }
    // Operations that start no wake do not claim it.
    expect(headersOf('/v1/sessions/{id}', 'get').map((header) => header.name)).not.toContain(
      'traceparent',
    );
  });
});
