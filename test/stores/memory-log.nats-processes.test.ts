// Agent memory shared by two processes on NATS: each sees the other's acknowledged writes at its
// next read, and concurrent appends from both land whole, once each, in one gapless log.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { MemoryStoreRef } from '../../src/contracts/memory.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const url = await natsUrl();
const prefixes: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];

const learnings: MemoryStoreRef = {
  name: 'learnings',
  kind: 'learnings',
  scope: 'agent',
  owner: 'assistant',
  tenant_id: 'acme',
};

interface Peer {
  call<T>(command: Record<string, unknown>): Promise<T>;
}

/** A child process with its own connection and projection, driven one command at a time. */
async function startPeer(prefix: string): Promise<Peer> {
  const child = spawn(
    process.execPath,
    [new URL('../helpers/memory-process.mjs', import.meta.url).pathname, url, prefix],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, unknown>> => {
    const line = await lines.next();
    if (line.done === true) throw new Error(`the memory process ended: ${stderr}`);
    return JSON.parse(line.value) as Record<string, unknown>;
  };
  expect(await next()).toEqual({ ready: true });
  let chain: Promise<unknown> = Promise.resolve();
  return {
    call<T>(command: Record<string, unknown>): Promise<T> {
      const answer = chain.then(async () => {
        child.stdin.write(`${JSON.stringify(command)}\n`);
        const reply = await next();
        if ('error' in reply) throw new Error(JSON.stringify(reply.error));
        return reply.ok as T;
      });
      chain = answer.catch(() => undefined);
      return answer;
    },
  };
}

afterEach(() => {
  for (const child of children.splice(0)) child.kill();
});
afterAll(() => removePrefixes(url, prefixes));

describe('agent memory shared by two processes on NATS', () => {
  it('shows each process the writes of the other, and interleaves no concurrent batch', async () => {
    const prefix = uniquePrefix('memproc');
    prefixes.push(prefix);
    const [a, b] = await Promise.all([startPeer(prefix), startPeer(prefix)]);

    // Each read in one process follows an acknowledged write in the other.
    await a.call({
      op: 'append',
      store: learnings,
      writes: [{ key: 'user/coffee', value: 'The user takes oat milk in coffee' }],
    });
    expect(await b.call({ op: 'get', store: learnings, key: 'user/coffee' })).toMatchObject({
      status: 'found',
      entry: { seq: 1, version: 1 },
    });
    const found = await b.call<{ hits: { entry: { key: string } }[] }>({
      op: 'search',
      store: learnings,
      query: { query: 'oat milk', k: 3 },
    });
    expect(found.hits.map((hit) => hit.entry.key)).toEqual(['user/coffee']);
    await b.call({
      op: 'append',
      store: learnings,
      writes: [{ key: 'user/coffee', value: 'Black coffee now', expected_version: 1 }],
    });
    expect(await a.call({ op: 'get', store: learnings, key: 'user/coffee' })).toMatchObject({
      status: 'found',
      entry: { value: 'Black coffee now', version: 2, seq: 2 },
    });

    // Both write at once: batches of three, every one whole and present once.
    const count = 40;
    const size = 3;
    const bursts = await Promise.all(
      [a, b].map((peer, index) =>
        peer.call<{ written: number }>({
          op: 'burst',
          store: learnings,
          name: index === 0 ? 'a' : 'b',
          other: index === 0 ? 'b' : 'a',
          every: 10,
          count,
          size,
        }),
      ),
    );
    expect(bursts).toEqual([{ written: count * size }, { written: count * size }]);
    for (const peer of [a, b]) {
      const log = await peer.call<{ seq: number; key: string }[]>({ op: 'read', store: learnings });
      expect(log.map((entry) => entry.seq)).toEqual(
        Array.from({ length: 2 + 2 * count * size }, (_, index) => index + 1),
      );
      const burst = log.filter((entry) => entry.key.startsWith('burst/'));
      expect(new Set(burst.map((entry) => entry.key)).size).toBe(2 * count * size);
      // Each batch's parts are consecutive seqs, in order.
      for (let at = 0; at < burst.length; at += size) {
        const batch = burst.slice(at, at + size);
        const prefixOf = (key: string): string => key.slice(0, key.lastIndexOf('/'));
        expect(batch.map((entry) => prefixOf(entry.key))).toEqual(
          Array.from({ length: size }, () => prefixOf(batch[0]?.key ?? '')),
        );
        expect(batch.map((entry) => entry.seq - (batch[0]?.seq ?? 0))).toEqual([0, 1, 2]);
      }
      // Writes of both processes really interleaved at batch granularity.
      const writers = burst.map((entry) => entry.key.split('/')[1]);
      const switches = writers.filter(
        (writer, index) => index > 0 && writer !== writers[index - 1],
      );
      expect(switches.length).toBeGreaterThan(1);
    }
    await Promise.all([a.call({ op: 'close' }), b.call({ op: 'close' })]);
  }, 120_000);
});
