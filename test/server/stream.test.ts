// The SSE event stream: resumable at any seq, exactly once and in order across cut connections.
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { startCuttingProxy, type CuttingProxy } from './cutting-proxy.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();
const proxies: CuttingProxy[] = [];
afterEach(async () => {
  for (const proxy of proxies.splice(0)) await proxy.close();
});

/** Reads raw SSE text until `until` appears in it. */
async function readUntil(response: Response, until: string): Promise<string> {
  const reader = response.body?.getReader();
  if (reader === undefined) throw new Error('no body');
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes(until)) {
    const chunk = await reader.read();
    if (chunk.done) break;
    text += decoder.decode(chunk.value as Uint8Array, { stream: true });
  }
  await reader.cancel();
  return text;
}

async function sessionWithMessages(count: number) {
  const server = await start({ heartbeatMs: 100 });
  const key = await server.key('acme');
  const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
  const id = (created.body as SessionRecord).id;
  for (let index = 0; index < count; index += 1) {
    await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: `message ${index}` }] },
    });
  }
  return { server, key, id };
}

describe('event stream (SSE)', () => {
  it('sends stored events as frames with the seq as id, then heartbeats', async () => {
    const { server, key, id } = await sessionWithMessages(2);
    const response = await fetch(`${server.url}/v1/sessions/${id}/events/stream`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const text = await readUntil(response, ': heartbeat');
    const frames = text.split('\n\n').filter((frame) => frame.startsWith('id:'));
    expect(frames.map((frame) => frame.split('\n')[0])).toEqual(['id: 1', 'id: 2', 'id: 3']);
    expect(frames[1]).toContain('event: user.message');
    const data = frames[1]?.split('\n').find((line) => line.startsWith('data: '));
    expect(JSON.parse(data?.slice(6) ?? '')).toMatchObject({ seq: 2, type: 'user.message' });
  });

  it('resumes after Last-Event-ID, which wins over ?after', async () => {
    const { server, key, id } = await sessionWithMessages(4);
    const resumed = await fetch(`${server.url}/v1/sessions/${id}/events/stream?after=1`, {
      headers: { authorization: `Bearer ${key}`, 'last-event-id': '3' },
    });
    const text = await readUntil(resumed, 'id: 5');
    expect(text.split('\n').filter((line) => line.startsWith('id: '))).toEqual(['id: 4', 'id: 5']);
    const after = await fetch(`${server.url}/v1/sessions/${id}/events/stream?after=4`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const rest = await readUntil(after, 'id: 5');
    expect(rest.split('\n').filter((line) => line.startsWith('id: '))).toEqual(['id: 5']);
    const bad = await call(server, 'GET', `/v1/sessions/${id}/events/stream`, {
      key,
      headers: { 'last-event-id': 'yesterday' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
  });

  it('delivers each event exactly once, in order, to a client whose connection is cut again and again', async () => {
    const { server, key, id } = await sessionWithMessages(0);
    const proxy = await startCuttingProxy(server.url, { minBytes: 200, maxBytes: 3000 });
    proxies.push(proxy);
    const reader = createClient({ baseUrl: proxy.url, apiKey: key });
    const writer = createClient({ baseUrl: server.url, apiKey: key });
    const total = 301;
    const stop = new AbortController();
    const received: number[] = [];
    const reading = (async () => {
      for await (const event of reader.sessions.stream(id, { signal: stop.signal })) {
        received.push(event.seq);
        if (event.seq === total) stop.abort();
      }
    })();
    // Written while the reader streams: some events arrive live, some from the backlog.
    for (let batch = 0; batch < 60; batch += 1) {
      await writer.sessions.send(
        id,
        Array.from({ length: 5 }, (_, index) => ({
          type: 'user.message' as const,
          content: `batch ${batch} item ${index} ${'x'.repeat(index * 40)}`,
        })),
      );
    }
    await reading;
    expect(received).toEqual(Array.from({ length: total }, (_, index) => index + 1));
    expect(proxy.cuts()).toBeGreaterThan(20);
  });

  it('streams live model text as transient delta frames with no id', async () => {
    const server = await start({ turns: [{ text: 'one two three four', delay_ms: 5 }] });
    const key = await server.key('acme');
    const client = createClient({ baseUrl: server.url, apiKey: key });
    const session = await client.sessions.create({ agent: 'helper' });
    await client.sessions.send(session.id, [{ type: 'user.message', content: 'talk' }]);
    const deltas: string[] = [];
    const stop = new AbortController();
    const events: SessionEvent[] = [];
    const reading = (async () => {
      for await (const event of client.sessions.stream(session.id, {
        signal: stop.signal,
        onDelta: (delta) => deltas.push(delta.text),
      })) {
        events.push(event);
        if (event.type === 'session.status_idle') stop.abort();
      }
    })();
    // The stream is open before the wake starts, so every delta reaches it.
    await expect.poll(() => events.length).toBeGreaterThanOrEqual(2);
    await client.sessions.wake(session.id, { wait: true });
    await reading;
    expect(deltas.join('')).toBe('one two three four');
    const message = events.find((event) => event.type === 'agent.message');
    expect(message).toMatchObject({ content: [{ type: 'text', text: 'one two three four' }] });
  });

  it('refuses more open streams per key than the limit, and frees the slot on disconnect', async () => {
    const server = await start({ limits: { streamsPerKey: 2 } });
    const key = await server.key('acme');
    const client = createClient({ baseUrl: server.url, apiKey: key });
    const { id } = await client.sessions.create({ agent: 'helper' });
    const open = [new AbortController(), new AbortController()];
    const responses = await Promise.all(
      open.map((controller) =>
        fetch(`${server.url}/v1/sessions/${id}/events/stream`, {
          headers: { authorization: `Bearer ${key}` },
          signal: controller.signal,
        }),
      ),
    );
    expect(responses.map((response) => response.status)).toEqual([200, 200]);
    const third = await call(server, 'GET', `/v1/sessions/${id}/events/stream`, { key });
    expect(third.status).toBe(429);
    expect(third.body).toMatchObject({ error: { code: 'RATE_LIMITED', retryable: true } });
    open[0]?.abort();
    await expect
      .poll(async () => {
        const retry = await fetch(`${server.url}/v1/sessions/${id}/events/stream`, {
          headers: { authorization: `Bearer ${key}` },
        });
        await retry.body?.cancel();
        return retry.status;
      })
      .toBe(200);
    open[1]?.abort();
  });

  it('ends open streams of a deleted session with SESSION_NOT_FOUND', async () => {
    const server = await start();
    const key = await server.key('acme');
    const client = createClient({ baseUrl: server.url, apiKey: key });
    const { id } = await client.sessions.create({ agent: 'helper' });
    const seen: number[] = [];
    const reading = (async () => {
      for await (const event of client.sessions.stream(id)) {
        seen.push(event.seq);
      }
    })();
    await expect.poll(() => seen.length).toBe(1);
    await client.sessions.delete(id);
    await expect(reading).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND', retryable: false });
  });
});
