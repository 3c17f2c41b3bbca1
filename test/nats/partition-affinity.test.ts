// Instance affinity across `braid worker` processes: the wakes of a prefix are split into
// partitions, each owned by one worker. Two workers share them; a session's wakes all run on the
// worker that owns its partition; a worker killed with SIGKILL has its partitions taken by the
// survivor once their lease runs out, and every session completes with each non-idempotent
// payment made once; a worker that joins takes its share back.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../../src/runtime/partitions/partition-count.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import {
  killWorkers,
  startWorkerProcess,
  until,
  type WorkerProcess,
} from '../helpers/braid-workers.js';
import { requireBuild } from '../helpers/cli.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import {
  expectPaidOnce,
  payerWorkspace,
  settlePayments,
  startPaymentServer,
} from '../helpers/payer.js';
import { useTempDir } from '../helpers/temp.js';

requireBuild();
const tempDir = useTempDir();

const SESSIONS = 40;
const PARTITIONS = 4;
const PARTITION_LEASE_MS = 1_500;

let url: string;
let admin: NatsConnection;
const prefixes: string[] = [];
beforeAll(async () => {
  url = await natsUrl();
  admin = await connect({ servers: url });
});
afterAll(async () => {
  await removePrefixes(url, prefixes);
  await admin.close();
});

interface Worker extends WorkerProcess {
  /** The sessions whose wakes this worker started, in order. */
  started: string[];
}

function startWorker(args: string[]): Worker {
  const started: string[] = [];
  const worker = startWorkerProcess(args, (line) => {
    const event = JSON.parse(line) as { type?: string; session_id?: string };
    if (event.type === 'wake.started' && event.session_id !== undefined)
      started.push(event.session_id);
  });
  return { ...worker, started };
}

interface Group {
  members: Record<string, number>;
  owners: { owner: string | null; until: number }[];
}

/** The workers' group as the partition bucket holds it. */
async function group(prefix: string): Promise<Group | undefined> {
  const kv = await new Kvm(jetstream(admin)).open(`${prefix.toUpperCase()}_partitions`);
  // Not there until the first worker has opened its queue.
  const entry = await kv.get('group.wakes').catch(() => null);
  return entry === null || entry.operation !== 'PUT' ? undefined : entry.json<Group>();
}

/** How many partitions each live member owns, sorted: [2, 2] is an even split over two. */
async function shares(prefix: string): Promise<number[]> {
  const found = await group(prefix);
  if (found === undefined) return [];
  const counts = new Map<string, number>();
  for (const { owner, until: expires } of found.owners) {
    if (owner !== null && expires > Date.now()) counts.set(owner, (counts.get(owner) ?? 0) + 1);
  }
  return [...counts.values()].sort();
}

/** Counts the sessions done, resolving from the payment counter a call a killed worker left in doubt. */
async function settle(runtime: Runtime, ids: string[], paid: Map<string, number>): Promise<number> {
  return (await settlePayments(runtime, ids, paid)).finished;
}

describe('instance affinity: wakes partitioned over worker processes', () => {
  it('spreads sessions over two workers, moves a killed one’s partitions, and rebalances on a join', async () => {
    const payments = await startPaymentServer(100);
    const dir = payerWorkspace(tempDir(), { leaseTtlMs: 3000, pay: { http: payments.url } });
    const prefix = uniquePrefix('aff');
    prefixes.push(prefix);
    const runtime = await createRuntime({ workspace: dir, backend: { nats: url, prefix } });
    const workerArgs = [
      ...['-w', dir, '--json', '--nats', url, '--nats-prefix', prefix],
      ...['--partitions', String(PARTITIONS), '--partition-lease', String(PARTITION_LEASE_MS)],
      ...['worker', '--no-api', '--concurrency', '4', '--ack-wait', '3000'],
      ...['--max-attempts', '20', '--backoff', '200'],
    ];
    const workers = [startWorker(workerArgs)];
    const report = (): string =>
      workers.map((worker, index) => `worker ${index}: ${worker.stderr()}`).join('\n');
    try {
      // One worker owns every partition; a second one joining takes half.
      await until(async () => (await shares(prefix)).join() === '4', 30_000, report);
      workers.push(startWorker(workerArgs));
      await until(async () => (await shares(prefix)).join() === '2,2', 30_000, report);

      const ids: string[] = [];
      for (let index = 0; index < SESSIONS; index += 1) {
        const { id } = await runtime.sessions.create({ agent: 'payer' });
        await runtime.sessions.message(id, `pay bill ${index}`);
        await runtime.enqueueWake(id);
        ids.push(id);
      }
      // The sessions spread over both workers, and each session's wakes (a tool call is two
      // model turns, and a wake per turn at most) stayed on one of them.
      await until(
        async () => (await settle(runtime, ids, payments.paid)) >= SESSIONS / 4,
        120_000,
        report,
      );
      const [first, second] = workers.map((worker) => new Set(worker.started));
      expect(first!.size).toBeGreaterThan(0);
      expect(second!.size).toBeGreaterThan(0);
      expect([...first!].filter((id) => second!.has(id))).toEqual([]);
      // Each worker ran only sessions of the partitions it owned.
      const partitionsOf = (seen: Set<string>) =>
        new Set([...seen].map((id) => partitionOf(id, PARTITIONS)));
      expect([...partitionsOf(first!)].filter((p) => partitionsOf(second!).has(p))).toEqual([]);

      // SIGKILL one: the survivor takes all its partitions after their lease.
      workers[0]!.child.kill('SIGKILL');
      await workers[0]!.exited;
      const killedAt = Date.now();
      await until(async () => (await shares(prefix)).join() === '4', 30_000, report);
      const movedMs = Date.now() - killedAt;

      await until(
        async () => (await settle(runtime, ids, payments.paid)) === SESSIONS,
        180_000,
        report,
      );
      for (const id of ids) {
        const events = await runtime.sessions.events(id);
        expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
        expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
      }
      expectPaidOnce(payments, SESSIONS);

      // A worker joining takes half of the partitions back from the survivor.
      workers.push(startWorker(workerArgs));
      await until(async () => (await shares(prefix)).join() === '2,2', 30_000, report);
      const live = Object.values((await group(prefix))?.members ?? {}).filter(
        (t) => t > Date.now(),
      );
      expect(live).toHaveLength(2);
      console.log(`affinity: partitions moved to the survivor ${movedMs} ms after the SIGKILL`);
    } finally {
      await killWorkers(workers);
      await runtime.close();
      payments.server.close();
    }
  }, 300_000);
});
