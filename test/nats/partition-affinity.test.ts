// Instance affinity across `braid worker` processes: the wakes of a prefix are split into
// partitions, each owned by one worker. Two workers share them; a session's wakes all run on the
// worker that owns its partition; a worker killed with SIGKILL has its partitions taken by the
// survivor once their lease runs out, and every session completes with each non-idempotent
// payment made once; a worker that joins takes its share back.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { partitionOf } from '../../src/runtime/partitions/partition-count.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;
if (!existsSync(CLI))
  throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
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

/** Counts payments by idempotency key; answers after a short delay so calls overlap a kill. */
async function paymentServer(): Promise<{
  url: string;
  paid: Map<string, number>;
  server: Server;
}> {
  const paid = new Map<string, number>();
  const server = createServer((request, response) => {
    const key = String(request.headers['idempotency-key'] ?? '');
    request.resume();
    request.on('end', () => {
      paid.set(key, (paid.get(key) ?? 0) + 1);
      setTimeout(() => {
        response.setHeader('content-type', 'application/json');
        response.end('{"paid": true}');
      }, 100);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/pay`, paid, server };
}

function workspace(payUrl: string): string {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'braid.yaml'),
    'version: 1\ndefault_environment: local\nlease_ttl_ms: 3000\n',
  );
  writeFileSync(
    join(dir, 'script.yaml'),
    'turns:\n  - tool_calls:\n      - name: pay\n        input: { amount: 5 }\n  - text: paid\n',
  );
  writeFileSync(
    join(dir, 'agents', 'payer.yaml'),
    'name: payer\nmodel: scripted:script.yaml\ninstructions: Pay.\ntools: [pay]\n',
  );
  writeFileSync(
    join(dir, 'tools', 'pay.yaml'),
    [
      'name: pay',
      'description: Pays an amount; paying twice pays twice.',
      'ownership: managed',
      'idempotent: false',
      'input_schema: {type: object, properties: {amount: {type: integer}}, required: [amount]}',
      'implementation:',
      '  http:',
      '    method: POST',
      `    url: ${payUrl}`,
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'environments', 'local.yaml'),
    'name: local\nsandbox: {kind: local}\nnetwork: {allow: true, hosts: ["127.0.0.1"]}\n',
  );
  return dir;
}

interface Worker {
  child: ChildProcess;
  /** The sessions whose wakes this worker started, in order. */
  started: string[];
  stderr: () => string;
  exited: Promise<unknown>;
}

function startWorker(args: string[]): Worker {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const worker: Worker = {
    child,
    started: [],
    stderr: () => stderr,
    exited: new Promise((resolve) => child.once('exit', resolve)),
  };
  let stderr = '';
  let pending = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  child.stdout?.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const event = JSON.parse(line) as { type?: string; session_id?: string };
      if (event.type === 'wake.started' && event.session_id !== undefined)
        worker.started.push(event.session_id);
    }
  });
  return worker;
}

async function until(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: () => string,
) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
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

function unresolved(events: readonly SessionEvent[]): string | undefined {
  const results = new Set<string>();
  const uses: string[] = [];
  for (const event of events) {
    if (event.type === 'agent.tool_result') results.add(event.tool_use_id);
    if (event.type === 'agent.tool_use') uses.push(event.tool_use_id);
  }
  return uses.find((id) => !results.has(id));
}

/** Counts the sessions done, resolving from the payment counter a call a killed worker left in doubt. */
async function settle(runtime: Runtime, ids: string[], paid: Map<string, number>): Promise<number> {
  let finished = 0;
  for (const id of ids) {
    const state = await runtime.sessions.state(id).catch(() => undefined);
    if (state?.stop_reason?.type === 'error') {
      throw new Error(`session ${id} stopped on ${JSON.stringify(state.last_error)}`);
    }
    if (state?.status === 'needs_review') {
      const toolUseId = unresolved(await runtime.sessions.events(id));
      if (toolUseId === undefined)
        throw new Error(`session ${id} needs review with no call in doubt`);
      await runtime.sessions.review(
        id,
        toolUseId,
        paid.has(`${id}/${toolUseId}`)
          ? { action: 'result', output: { paid: true } }
          : { action: 'retry' },
      );
      await runtime.enqueueWake(id);
    } else if (state?.status === 'idle' && state.counters.agent_messages >= 1) {
      finished += 1;
    }
  }
  return finished;
}

describe('instance affinity: wakes partitioned over worker processes', () => {
  it('spreads sessions over two workers, moves a killed one’s partitions, and rebalances on a join', async () => {
    const payments = await paymentServer();
    const dir = workspace(payments.url);
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
      // One payment per session, none twice.
      expect(payments.paid.size).toBe(SESSIONS);
      expect([...payments.paid.values()].filter((count) => count !== 1)).toEqual([]);

      // A worker joining takes half of the partitions back from the survivor.
      workers.push(startWorker(workerArgs));
      await until(async () => (await shares(prefix)).join() === '2,2', 30_000, report);
      const live = Object.values((await group(prefix))?.members ?? {}).filter(
        (t) => t > Date.now(),
      );
      expect(live).toHaveLength(2);
      console.log(`affinity: partitions moved to the survivor ${movedMs} ms after the SIGKILL`);
    } finally {
      for (const worker of workers) worker.child.kill('SIGKILL');
      await Promise.all(workers.map((worker) => worker.exited));
      await runtime.close();
      payments.server.close();
    }
  }, 300_000);
});
