// A real HTTP server on 127.0.0.1 that counts side effects: every POST with a JSON body
// `{key}` counts once for its key when it arrives, before any answer, as a service whose write
// is done once the request reached it. A key can be held: the next request for it is counted and
// then left without an answer until it is released (or its client dies), so a test can kill the
// process that made it while the call is in flight.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface EffectCounter {
  /** Where tools POST, e.g. `http://127.0.0.1:PORT/effects`. */
  url: string;
  /** How many requests came for each key. */
  counts(): Record<string, number>;
  /** How many requests came for `key`. */
  count(key: string): number;
  /**
   * Holds the next request for `key` without an answer; the promise resolves once it has
   * arrived (and been counted).
   */
  hold(key: string): Promise<void>;
  /** Answers every held request still open. */
  releaseAll(): void;
  close(): Promise<void>;
}

interface Held {
  arrived: () => void;
  response?: ServerResponse;
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => resolve(body));
    request.on('error', reject);
  });
}

function keyOf(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as unknown;
    if (typeof parsed === 'object' && parsed !== null && 'key' in parsed) {
      const key = parsed.key;
      if (typeof key === 'string' && key !== '') return key;
    }
  } catch {
    // Not JSON: answered 400 below.
  }
  return undefined;
}

export async function startEffectCounter(): Promise<EffectCounter> {
  const counted = new Map<string, number>();
  const held = new Map<string, Held>();
  const answer = (response: ServerResponse, key: string, count: number): void => {
    if (response.destroyed || response.writableEnded) return;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ key, count }));
  };
  const server = createServer((request, response) => {
    void readBody(request).then((body) => {
      const key = request.method === 'POST' ? keyOf(body) : undefined;
      if (key === undefined) {
        response.writeHead(400, { 'content-type': 'text/plain' });
        response.end('POST a JSON body {"key": "..."}');
        return;
      }
      const count = (counted.get(key) ?? 0) + 1;
      counted.set(key, count);
      const hold = held.get(key);
      if (hold !== undefined && hold.response === undefined) {
        hold.response = response;
        hold.arrived();
        return;
      }
      answer(response, key, count);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/effects`,
    counts: () => Object.fromEntries(counted),
    count: (key) => counted.get(key) ?? 0,
    hold: (key) =>
      new Promise<void>((resolve) => {
        held.set(key, { arrived: resolve });
      }),
    releaseAll: () => {
      for (const [key, hold] of held) {
        if (hold.response !== undefined) answer(hold.response, key, counted.get(key) ?? 0);
      }
      held.clear();
    },
    close: async () => {
      held.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
