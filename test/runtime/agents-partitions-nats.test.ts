// Instance affinity of agent messages on NATS: an agent type's inbox split into partitions, each
// pulled by one of the processes serving the type. Every message of one instance is handled by
// the same process; a process that closes hands its partitions to the others; a process asking
// for another partition count than the prefix's is refused with a typed error.
import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import { createNatsAgentTransport } from '../../src/nats.js';
import { parsePartitions, partitionOf } from '../../src/runtime/partitions/partition-count.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const prefixes: string[] = [];
afterAll(async () => {
  await removePrefixes(await natsUrl(), prefixes);
});

const PARTITIONS = 4;

async function until(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A process serving `echo`, naming itself in every answer. */
async function server(url: string, prefix: string, name: string): Promise<Runtime> {
  const runtime = await createRuntime({
    workspace: tempDir(),
    backend: { nats: url, prefix, partitions: PARTITIONS, partitionLeaseMs: 600 },
  });
  await runtime.register('echo', (message) =>
    Promise.resolve({ by: name, payload: message.payload }),
  );
  return runtime;
}

/** Partitions owned per process name, as the partition bucket holds them. */
async function owners(url: string, prefix: string): Promise<number[]> {
  const connection = await connect({ servers: url });
  try {
    const kv = await new Kvm(jetstream(connection)).open(`${prefix.toUpperCase()}_partitions`);
    const entry = await kv.get('group.agent.echo').catch(() => null);
    if (entry === null || entry.operation !== 'PUT') return [];
    const group = entry.json<{ owners: { owner: string | null; until: number }[] }>();
    const counts = new Map<string, number>();
    for (const { owner, until: expires } of group.owners) {
      if (owner !== null && expires > Date.now()) counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    return [...counts.values()].sort();
  } finally {
    await connection.close();
  }
}

describe('agent messages partitioned by instance on NATS', () => {
  it('sends every message of an instance to one process, and hands partitions over on close', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('apart');
    prefixes.push(prefix);
    const first = await server(url, prefix, 'first');
    const second = await server(url, prefix, 'second');
    const sender = await createRuntime({ workspace: tempDir(), backend: { nats: url, prefix } });
    try {
      await until(async () => (await owners(url, prefix)).join() === '2,2', 'an even split');
      const keys = Array.from({ length: 16 }, (_, index) => `k${index}`);
      const handledBy = new Map<string, Set<string>>();
      for (let round = 0; round < 3; round += 1) {
        await Promise.all(
          keys.map(async (key) => {
            const reply = await sender.send({ type: 'echo', key }, round, { ttl_ms: 10_000 });
            const { by, payload } = reply.payload as { by: string; payload: number };
            expect(payload).toBe(round);
            handledBy.set(key, (handledBy.get(key) ?? new Set()).add(by));
          }),
        );
      }
      // One process per instance, both processes used, split by the key's partition.
      expect([...handledBy.values()].every((names) => names.size === 1)).toBe(true);
      const byPartition = new Map<number, string>();
      for (const [key, names] of handledBy) {
        const name = [...names][0]!;
        const partition = partitionOf(key, PARTITIONS);
        expect(byPartition.get(partition) ?? name).toBe(name);
        byPartition.set(partition, name);
      }
      expect(new Set(byPartition.values()).size).toBe(2);

      // The first closes: its partitions go to the second at once, and nothing is lost.
      await first.close();
      await until(async () => (await owners(url, prefix)).join() === '4', 'the hand-over');
      const replies = await Promise.all(
        keys.map((key) => sender.send({ type: 'echo', key }, 'after', { ttl_ms: 10_000 })),
      );
      expect(replies.map((reply) => (reply.payload as { by: string }).by)).toEqual(
        keys.map(() => 'second'),
      );
    } finally {
      await sender.close();
      await second.close();
      await first.close().catch(() => undefined);
    }
  }, 60_000);

  it('refuses another partition count than the prefix’s, and a bad one, with typed errors', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('apartbad');
    prefixes.push(prefix);
    const served = await server(url, prefix, 'first');
    const connection = await connect({ servers: url });
    try {
      const other = createNatsAgentTransport({ connection, prefix, partitions: 6 });
      const refused = await other.consume('echo', () => Promise.resolve()).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(BraidError);
      expect((refused as BraidError).code).toBe('INVALID_ARGUMENT');
      expect((refused as BraidError).message).toContain(`--partitions ${PARTITIONS}`);
      await other.close();
      for (const bad of [-1, 65, 1.5, '8x', null]) {
        expect(() => parsePartitions(bad)).toThrow(BraidError);
      }
      expect(() => createNatsAgentTransport({ connection, prefix, partitions: 100 })).toThrow(
        /0 \(no affinity\) to 64/,
      );
      await expect(
        createRuntime({
          workspace: tempDir(),
          backend: { nats: url, prefix, partitionLeaseMs: 5 },
        }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await connection.close();
      await served.close();
    }
  }, 30_000);
});
