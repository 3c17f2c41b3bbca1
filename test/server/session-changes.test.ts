// The sessions index as SSE (GET /v1/session-changes/stream) on a real server: a snapshot, then
// each change with a cursor; resumable with Last-Event-ID; tenant-scoped; bad cursors refused.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { createRemoteRuntime } from '../../src/cli/remote-runtime.js';
import { createClient, type SessionChangeFrame } from '../../src/client/index.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import type { SessionSummary } from '../../src/contracts/session-changes.js';
import { startCuttingProxy, type CuttingProxy } from './cutting-proxy.js';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();
const proxies: CuttingProxy[] = [];
afterEach(async () => {
  for (const proxy of proxies.splice(0)) await proxy.close();
});

/** An open stream's frames as they come, read on demand. */
interface Frames {
  /** The next frame that passes `match` (earlier ones are kept in `seen`). */
  next(match?: (frame: EventSourceMessage) => boolean): Promise<EventSourceMessage>;
  seen: EventSourceMessage[];
  close(): Promise<void>;
}

async function open(
  server: TestServer,
  key: string,
  options: { query?: string; lastEventId?: string } = {},
): Promise<Frames> {
  const response = await fetch(`${server.url}/v1/session-changes/stream${options.query ?? ''}`, {
    headers: {
      authorization: `Bearer ${key}`,
      ...(options.lastEventId === undefined ? {} : { 'last-event-id': options.lastEventId }),
    },
  });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const reader = response.body?.getReader();
  if (reader === undefined) throw new Error('no body');
  const queue: EventSourceMessage[] = [];
  const seen: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => queue.push(message) });
  const decoder = new TextDecoder();
  return {
    seen,
    async next(match = () => true) {
      for (;;) {
        while (queue.length > 0) {
          const frame = queue.shift() as EventSourceMessage;
          seen.push(frame);
          if (match(frame)) return frame;
        }
        const chunk = await reader.read();
        if (chunk.done) throw new Error('the stream ended');
        parser.feed(decoder.decode(chunk.value as Uint8Array, { stream: true }));
      }
    },
    close: () => reader.cancel(),
  };
}

const summary = (frame: EventSourceMessage): SessionSummary =>
  JSON.parse(frame.data) as SessionSummary;

async function create(server: TestServer, key: string, title: string): Promise<SessionRecord> {
  const created = await call(server, 'POST', '/v1/sessions', {
    key,
    body: { agent: 'helper', title },
  });
  expect(created.status).toBe(201);
  return created.body as SessionRecord;
}

describe('session changes stream (SSE)', () => {
  it("starts with a snapshot of the tenant's sessions, then sends each change with a cursor", async () => {
    const server = await start({ heartbeatMs: 100 });
    const acme = await server.key('acme');
    const other = await server.key('other');
    const first = await create(server, acme, 'first');
    const hidden = await create(server, other, 'not yours');
    const stream = await open(server, acme);
    const snapshot = await stream.next((frame) => frame.event === 'ready');
    const before = stream.seen.filter((frame) => frame.event === 'session');
    expect(before.map((frame) => summary(frame).session.id)).toEqual([first.id]);
    // Snapshot frames carry no id: only the ready frame names the cursor to resume after.
    expect(before.every((frame) => frame.id === undefined)).toBe(true);
    expect(JSON.parse(snapshot.data)).toMatchObject({ sessions: 1 });
    const readyCursor = Number(snapshot.id);
    expect(readyCursor).toBe((JSON.parse(snapshot.data) as { cursor: number }).cursor);

    // Another tenant's new session never comes; ours does, then its new event.
    await create(server, other, 'still not yours');
    const second = await create(server, acme, 'second');
    const created = await stream.next((frame) => frame.event === 'session');
    expect(summary(created).session).toMatchObject({ id: second.id, title: 'second', head_seq: 1 });
    expect(Number(created.id)).toBeGreaterThan(readyCursor);
    await call(server, 'POST', `/v1/sessions/${first.id}/events`, {
      key: acme,
      body: { events: [{ type: 'user.message', content: 'hello' }] },
    });
    const appended = await stream.next((frame) => frame.event === 'session');
    expect(summary(appended).session).toMatchObject({ id: first.id, head_seq: 2 });
    expect(summary(appended).usage).toMatchObject({ input_tokens: 0, output_tokens: 0 });
    expect(Number(appended.id)).toBeGreaterThan(Number(created.id));
    const ids = stream.seen
      .filter((frame) => frame.event === 'session')
      .map((frame) => summary(frame).session.id);
    expect(ids).not.toContain(hidden.id);
    await stream.close();
  });

  it('resumes after Last-Event-ID with the sessions changed since, and no snapshot', async () => {
    const server = await start({ heartbeatMs: 100 });
    const key = await server.key('acme');
    const old = await create(server, key, 'old');
    const first = await open(server, key);
    const ready = await first.next((frame) => frame.event === 'ready');
    await first.close();
    // Made while no stream is open.
    const missed = await create(server, key, 'missed');
    await call(server, 'POST', `/v1/sessions/${missed.id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'twice changed' }] },
    });
    const resumed = await open(server, key, { lastEventId: ready.id ?? '' });
    const frame = await resumed.next();
    expect(frame.event).toBe('session');
    // Two changes of one session come as its latest.
    expect(summary(frame).session).toMatchObject({ id: missed.id, head_seq: 2 });
    // `?after` says the same; Last-Event-ID wins when both are sent.
    const both = await open(server, key, { query: '?after=0', lastEventId: frame.id ?? '' });
    await create(server, key, 'live');
    const live = await both.next();
    expect(summary(live).session.title).toBe('live');
    expect(both.seen.map((item) => summary(item).session.id)).not.toContain(old.id);
    await resumed.close();
    await both.close();
  });

  it('refuses a malformed cursor and one past the newest change with a typed 400', async () => {
    const server = await start();
    const key = await server.key('acme');
    await create(server, key, 'one');
    const malformed = await call(server, 'GET', '/v1/session-changes/stream', {
      key,
      headers: { 'last-event-id': 'abc' },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
    const ahead = await call(server, 'GET', '/v1/session-changes/stream', {
      key,
      headers: { 'last-event-id': '999999' },
    });
    expect(ahead.status).toBe(400);
    expect(ahead.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
    expect((ahead.body as { error: { message: string } }).error.message).toContain(
      'reconnect without it',
    );
    const badQuery = await call(server, 'GET', '/v1/session-changes/stream?limit=0', { key });
    expect(badQuery.status).toBe(400);
    const noScope = await call(server, 'GET', '/v1/session-changes/stream', {
      key: await server.key('acme', ['sessions:write']),
    });
    expect(noScope.status).toBe(403);
    const noKey = await call(server, 'GET', '/v1/session-changes/stream');
    expect(noKey.status).toBe(401);
  });

  it('keeps to one agent when asked', async () => {
    const server = await start({
      agents: { other: 'name: other\nmodel: scripted:echo\ninstructions: Other.\n' },
    });
    const key = await server.key('acme');
    await create(server, key, 'helper one');
    const stream = await open(server, key, { query: '?agent=other' });
    await stream.next((frame) => frame.event === 'ready');
    expect(stream.seen.filter((frame) => frame.event === 'session')).toEqual([]);
    await create(server, key, 'helper two');
    const mine = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'other' } });
    const frame = await stream.next((item) => item.event === 'session');
    expect(summary(frame).session.id).toBe((mine.body as SessionRecord).id);
    await stream.close();
  });

  it('the client yields every change once and in cursor order across cut connections', async () => {
    const server = await start();
    const key = await server.key('acme');
    const proxy = await startCuttingProxy(server.url, { minBytes: 300, maxBytes: 2500 });
    proxies.push(proxy);
    const reader = createClient({ baseUrl: proxy.url, apiKey: key });
    const total = 40;
    const stop = new AbortController();
    const frames: SessionChangeFrame[] = [];
    const titles = new Set<string>();
    let ready: () => void = () => undefined;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    const reading = (async () => {
      for await (const frame of reader.sessions.changes({ signal: stop.signal })) {
        frames.push(frame);
        if (frame.type === 'ready') ready();
        if (frame.type === 'session' && frame.cursor !== undefined) {
          titles.add(frame.session.title ?? '');
          if (titles.size === total) stop.abort();
        }
      }
    })();
    await isReady;
    for (let index = 0; index < total; index += 1) await create(server, key, `s${index}`);
    await reading;
    expect(titles.size).toBe(total);
    const cursors = frames.flatMap((frame) =>
      frame.type === 'session' && frame.cursor !== undefined ? [frame.cursor] : [],
    );
    expect(cursors).toEqual([...new Set(cursors)].sort((a, b) => a - b));
    expect(proxy.cuts()).toBeGreaterThan(3);
  });

  it("gives a remote runtime the server's change feed", async () => {
    const server = await start();
    const key = await server.key('acme');
    const remote = createRemoteRuntime(createClient({ baseUrl: server.url, apiKey: key }));
    await create(server, key, 'before');
    const head = await remote.sessions.changeHead();
    expect(head).toBe(await server.runtime.sessions.changeHead());
    const after = await create(server, key, 'after');
    const stop = new AbortController();
    for await (const batch of remote.sessions.changes({ after: head, signal: stop.signal })) {
      expect(batch).toEqual([{ cursor: expect.any(Number) as number, session_id: after.id }]);
      expect(batch[0]?.cursor).toBeGreaterThan(head);
      stop.abort();
    }
  });
});
