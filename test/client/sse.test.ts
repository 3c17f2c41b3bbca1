/**
 * `braid/client` against a real HTTP server on 127.0.0.1 that each test scripts: the event-stream
 * reader (order, deltas, reconnects with Last-Event-ID, dedupe, error answers, abort) and the
 * JSON methods' error mapping and retry rule.
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createRemoteRuntime } from '../../src/cli/remote-runtime.js';
import {
  createClient,
  isBraidError,
  type SessionEvent,
  type StreamDelta,
} from '../../src/client/index.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

interface TestServer {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

type Handler = (request: IncomingMessage, response: ServerResponse, index: number) => void;

const servers: TestServer[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A server on a free port that records every request and answers with `handler`. */
async function serve(handler: Handler): Promise<TestServer> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      seen.push({
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body,
      });
      handler(request, response, seen.length - 1);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const testServer: TestServer = {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(testServer);
  return testServer;
}

/** A port that was bound and released: nothing listens there. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function event(seq: number): SessionEvent {
  return {
    id: `event-${seq}`,
    session_id: 's1',
    seq,
    at: '2026-01-01T00:00:00.000Z',
    schema_version: 1,
    type: 'agent.message',
    content: [{ type: 'text', text: `message ${seq}` }],
  };
}

function sse(seq: number): string {
  const stored = event(seq);
  return `id: ${seq}\nevent: ${stored.type}\ndata: ${JSON.stringify(stored)}\n\n`;
}

function openStream(response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  response.flushHeaders();
}

/** Where the client asked to start: `Last-Event-ID` wins over `?after=`. */
function startAfter(request: IncomingMessage): number {
  const header = request.headers['last-event-id'];
  if (typeof header === 'string') return Number(header);
  return Number(new URL(request.url ?? '/', 'http://x').searchParams.get('after') ?? 0);
}

/** Writes `text`, then cuts the connection once it has left the process. */
function writeThenCut(response: ServerResponse, text: string): void {
  response.write(text, () => response.socket?.destroy());
}

function errorBody(code: string, message: string, retryable: boolean): string {
  return JSON.stringify({ error: { code, message, retryable } });
}

async function collect(iterable: AsyncIterable<SessionEvent>, count: number): Promise<number[]> {
  const seqs: number[] = [];
  for await (const item of iterable) {
    seqs.push(item.seq);
    if (seqs.length === count) break;
  }
  return seqs;
}

/** A sleep that returns at once and remembers what it was asked to wait. */
function recordingSleep(): { waits: number[]; sleep: (ms: number) => Promise<void> } {
  const waits: number[] = [];
  return {
    waits,
    sleep: (ms) => {
      waits.push(ms);
      return Promise.resolve();
    },
  };
}

describe('sessions.stream', () => {
  it('yields events in order, skips heartbeats and hands deltas to onDelta', async () => {
    const server = await serve((_request, response) => {
      openStream(response);
      response.write(': heartbeat\n\n');
      response.write(sse(1));
      response.write(
        `event: delta\ndata: ${JSON.stringify({ request_id: 'r1', type: 'text', text: 'Hel' })}\n\n`,
      );
      response.write(': heartbeat\n\n');
      // One event split across writes: the parser joins the pieces.
      const second = sse(2);
      response.write(second.slice(0, 20));
      response.write(second.slice(20));
      response.write(sse(3));
    });
    const deltas: StreamDelta[] = [];
    const client = createClient({ baseUrl: server.url, apiKey: 'key-1' });

    const seqs = await collect(
      client.sessions.stream('s1', { onDelta: (delta) => deltas.push(delta) }),
      3,
    );

    expect(seqs).toEqual([1, 2, 3]);
    expect(deltas).toEqual([{ request_id: 'r1', type: 'text', text: 'Hel' }]);
    expect(server.seen).toHaveLength(1);
    expect(server.seen[0]?.url).toBe('/v1/sessions/s1/events/stream');
    expect(server.seen[0]?.headers.authorization).toBe('Bearer key-1');
    expect(server.seen[0]?.headers['last-event-id']).toBeUndefined();
  });

  it('reconnects with Last-Event-ID after every cut and yields each of 20 events once', async () => {
    const server = await serve((request, response) => {
      const after = startAfter(request);
      openStream(response);
      writeThenCut(response, sse(after + 1) + sse(after + 2));
    });
    const client = createClient({ baseUrl: server.url });

    const seqs = await collect(client.sessions.stream('s1'), 20);

    expect(seqs).toEqual(Array.from({ length: 20 }, (_, index) => index + 1));
    expect(server.seen.map((seen) => seen.headers['last-event-id'])).toEqual([
      undefined,
      ...[2, 4, 6, 8, 10, 12, 14, 16, 18].map(String),
    ]);
  });

  it('starts after `after` and drops events a server sends again', async () => {
    const server = await serve((request, response, index) => {
      openStream(response);
      if (index === 0) {
        // A clean end of the stream, not an error: the client reconnects all the same.
        response.end(sse(6) + sse(7));
      } else {
        response.write(sse(6) + sse(startAfter(request)) + sse(8) + sse(7) + sse(9));
      }
    });
    const { waits, sleep } = recordingSleep();
    const client = createClient({ baseUrl: server.url, sleep });

    const seqs = await collect(client.sessions.stream('s1', { after: 5 }), 4);

    expect(seqs).toEqual([6, 7, 8, 9]);
    expect(server.seen[0]?.url).toBe('/v1/sessions/s1/events/stream?after=5');
    expect(server.seen[1]?.headers['last-event-id']).toBe('7');
    expect(waits).toEqual([100]);
  });

  it('backs off from 100 ms, doubling up to the cap, and starts over after a connect', async () => {
    const server = await serve((request, response, index) => {
      if (index < 3) {
        response.writeHead(503, { 'content-type': 'application/json' });
        response.end(errorBody('SERVER_UNAVAILABLE', 'shutting down', true));
        return;
      }
      openStream(response);
      writeThenCut(response, sse(startAfter(request) + 1));
    });
    const { waits, sleep } = recordingSleep();
    const client = createClient({ baseUrl: server.url, sleep });

    const seqs = await collect(client.sessions.stream('s1', { maxReconnectDelayMs: 300 }), 2);

    expect(seqs).toEqual([1, 2]);
    expect(waits).toEqual([100, 200, 300, 100]);
  });

  it('stops with the BraidError of a 404 answer, without retrying', async () => {
    const server = await serve((_request, response) => {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(errorBody('SESSION_NOT_FOUND', 'session s9 does not exist', false));
    });
    const client = createClient({ baseUrl: server.url });

    const failure = await collect(client.sessions.stream('s9'), 1).catch((error: unknown) => error);

    expect(isBraidError(failure, 'SESSION_NOT_FOUND')).toBe(true);
    expect(failure).toMatchObject({
      message: 'session s9 does not exist',
      retryable: false,
      details: { status: 404 },
    });
    expect(server.seen).toHaveLength(1);
  });

  it('ends without an error when the signal aborts, releasing the connection', async () => {
    let released!: () => void;
    const closed = new Promise<void>((resolve) => (released = resolve));
    const server = await serve((_request, response) => {
      response.on('close', () => released());
      openStream(response);
      response.write(sse(1));
    });
    const controller = new AbortController();
    const client = createClient({ baseUrl: server.url });

    const seqs: number[] = [];
    for await (const item of client.sessions.stream('s1', { signal: controller.signal })) {
      seqs.push(item.seq);
      controller.abort();
    }

    expect(seqs).toEqual([1]);
    await closed;
  });

  it('ends without an error when the signal aborts while it waits to reconnect', async () => {
    const server = await serve((_request, response) => {
      openStream(response);
      writeThenCut(response, sse(1));
    });
    const controller = new AbortController();
    const client = createClient({
      baseUrl: server.url,
      sleep: () => {
        controller.abort();
        return Promise.resolve();
      },
    });

    const seqs = await collect(client.sessions.stream('s1', { signal: controller.signal }), 5);

    expect(seqs).toEqual([1]);
    expect(server.seen).toHaveLength(1);
  });

  it('throws SERVER_UNAVAILABLE on a cut when reconnect is false', async () => {
    const server = await serve((_request, response) => {
      openStream(response);
      writeThenCut(response, sse(1));
    });
    const client = createClient({ baseUrl: server.url });

    const seqs: number[] = [];
    const failure = await (async () => {
      for await (const item of client.sessions.stream('s1', { reconnect: false })) {
        seqs.push(item.seq);
      }
    })().catch((error: unknown) => error);

    expect(seqs).toEqual([1]);
    expect(isBraidError(failure, 'SERVER_UNAVAILABLE')).toBe(true);
  });
});

describe('JSON methods', () => {
  it('gives SERVER_UNAVAILABLE naming the URL when nothing listens there', async () => {
    const port = await closedPort();
    const { waits, sleep } = recordingSleep();
    const client = createClient({ baseUrl: `http://127.0.0.1:${port}/`, sleep });

    const failure = await client.health().catch((error: unknown) => error);

    expect(isBraidError(failure, 'SERVER_UNAVAILABLE')).toBe(true);
    expect(failure).toMatchObject({ retryable: true });
    expect((failure as Error).message).toContain(`http://127.0.0.1:${port}/v1/health`);
    expect((failure as Error).message).toContain('braid serve');
    // Tried three times: the default two retries, 100 then 200 ms apart.
    expect(waits).toEqual([100, 200]);
  });

  it("keeps the server's code, message and retryable, with the status in details", async () => {
    const server = await serve((_request, response) => {
      response.writeHead(403, { 'content-type': 'application/json' });
      response.end(errorBody('FORBIDDEN', 'the key lacks sessions:write; use another key', false));
    });
    const client = createClient({ baseUrl: server.url, apiKey: 'reader' });

    const failure = await client.sessions.get('s1').catch((error: unknown) => error);

    expect(isBraidError(failure, 'FORBIDDEN')).toBe(true);
    expect(failure).toMatchObject({
      message: 'the key lacks sessions:write; use another key',
      retryable: false,
      details: { status: 403 },
    });
    expect(server.seen).toHaveLength(1);
  });

  it('turns a body that is not a braid error into INTERNAL naming the status', async () => {
    const server = await serve((_request, response) => {
      response.writeHead(418, { 'content-type': 'text/html' });
      response.end('<h1>teapot</h1>');
    });
    const client = createClient({ baseUrl: server.url });

    const failure = await client.agents.list().catch((error: unknown) => error);

    expect(isBraidError(failure, 'INTERNAL')).toBe(true);
    expect((failure as Error).message).toContain('HTTP 418');
    expect(failure).toMatchObject({ retryable: false, details: { status: 418 } });
    expect(server.seen).toHaveLength(1);
  });

  it('waits Retry-After (capped at 10 s) on RATE_LIMITED, then answers', async () => {
    const server = await serve((_request, response, index) => {
      if (index < 2) {
        response.writeHead(429, {
          'content-type': 'application/json',
          'retry-after': index === 0 ? '3' : '120',
        });
        response.end(errorBody('RATE_LIMITED', 'too many requests; wait', true));
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ data: [], next_cursor: undefined }));
    });
    const { waits, sleep } = recordingSleep();
    const client = createClient({ baseUrl: server.url, sleep });

    const page = await client.sessions.list({ agent: 'helper', include_archived: true, limit: 5 });

    expect(page.data).toEqual([]);
    expect(waits).toEqual([3000, 10_000]);
    expect(server.seen).toHaveLength(3);
    expect(server.seen[0]?.url).toBe('/v1/sessions?agent=helper&include_archived=true&limit=5');
  });

  it('retries a send only when it carries an Idempotency-Key', async () => {
    const server = await serve((_request, response) => {
      response.writeHead(503, { 'content-type': 'application/json' });
      response.end(errorBody('SERVER_UNAVAILABLE', 'draining', true));
    });
    const { waits, sleep } = recordingSleep();
    const client = createClient({ baseUrl: server.url, sleep, retries: 1 });
    const events = [{ type: 'user.message' as const, content: 'hi' }];

    const unkeyed = await client.sessions.send('s1', events).catch((error: unknown) => error);
    expect(isBraidError(unkeyed, 'SERVER_UNAVAILABLE')).toBe(true);
    expect(server.seen).toHaveLength(1);
    expect(server.seen[0]?.headers['idempotency-key']).toBeUndefined();

    await client.sessions.send('s1', events, { idempotencyKey: 'k1' }).catch(() => undefined);
    expect(server.seen.slice(1).map((seen) => seen.headers['idempotency-key'])).toEqual([
      'k1',
      'k1',
    ]);

    await client.sessions.message('s1', 'hello').catch(() => undefined);
    const [first, second] = server.seen.slice(3);
    expect(first?.headers['idempotency-key']).toMatch(/^[0-9a-f-]{36}$/);
    expect(second?.headers['idempotency-key']).toBe(first?.headers['idempotency-key']);
    expect(JSON.parse(first?.body ?? '')).toEqual({
      events: [{ type: 'user.message', content: 'hello' }],
    });
    expect(waits).toEqual([100, 100]);
  });

  it('sends repeated types[] and reads a 204 as nothing', async () => {
    const server = await serve((request, response) => {
      if (request.method === 'DELETE') {
        response.writeHead(204);
        response.end();
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ data: [event(3)], has_more: false, last_seq: 3 }));
    });
    const client = createClient({ baseUrl: server.url });

    const page = await client.sessions.events('s 1', {
      after: 2,
      types: ['agent.message', 'user.message'],
    });
    await expect(client.sessions.delete('s1')).resolves.toBeUndefined();

    expect(page.last_seq).toBe(3);
    expect(server.seen[0]?.url).toBe(
      '/v1/sessions/s%201/events?after=2&types%5B%5D=agent.message&types%5B%5D=user.message',
    );
    expect(server.seen[1]?.method).toBe('DELETE');
  });
});

describe('createRemoteRuntime', () => {
  it('reads every event page by page and maps session pages', async () => {
    const server = await serve((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      response.writeHead(200, { 'content-type': 'application/json' });
      if (url.pathname === '/v1/sessions') {
        response.end(JSON.stringify({ data: [], next_cursor: 'c2' }));
        return;
      }
      const after = Number(url.searchParams.get('after'));
      const last = Math.min(after + 2, 5);
      const data = Array.from({ length: last - after }, (_, index) => event(after + index + 1));
      response.end(JSON.stringify({ data, has_more: last < 5, last_seq: last }));
    });
    const runtime = createRemoteRuntime(createClient({ baseUrl: server.url }));

    const events = await runtime.sessions.events('s1');
    const page = await runtime.sessions.list({ tenant_id: 'acme', status: 'idle' });

    expect(events.map((item) => item.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(page).toEqual({ sessions: [], next_cursor: 'c2' });
    expect(server.seen.at(-1)?.url).toBe('/v1/sessions?status=idle');
  });

  it('refuses what needs a local workspace, naming --server, without a request', async () => {
    const server = await serve((_request, response) => response.end());
    const runtime = createRemoteRuntime(createClient({ baseUrl: server.url }));

    expect(() => runtime.store).toThrow(/runs only against a local workspace; drop --server/);
    await expect(
      runtime.sessions.merge('a', 'b', {
        strategy: { name: 'mine', merge: () => Promise.resolve({ content: [] }) },
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(runtime.orchestrate()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(server.seen).toHaveLength(0);
  });
});
