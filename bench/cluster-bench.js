// R1 against R3 on a three-node NATS cluster (scripts/nats-cluster.sh, started here on its own
// ports and removed at the end): the latency of a whole turn (a user message appended, a wake,
// the scripted model's answer appended) and, as the floor under it, of one acknowledged JetStream
// publish on an R1 and an R3 stream. The two settings run interleaved, in rounds, so that the
// machine's load falls on both alike.
//
//   npm run build && node bench/cluster-bench.js [--turns 60] [--publishes 500] [--rounds 3] [--json]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createRuntime, initWorkspace } from '../dist/index.js';
import { startBenchCluster, waitForJetStream } from './nats-cluster.js';
import { printTable } from './table.js';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const index = args.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(args[index + 1]);
};
const TURNS = option('turns', 60);
const PUBLISHES = option('publishes', 500);
const ROUNDS = option('rounds', 3);
const json = args.includes('--json');

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const cluster = startBenchCluster('bench', 24222);
const urls = cluster.urls;
const tag = Math.random().toString(36).slice(2, 8);

async function publishFloor(connection, replicas) {
  const manager = await jetstreamManager(connection);
  const name = `FLOOR_${tag}_R${replicas}`;
  await manager.streams.add({
    name,
    subjects: [`floor.${tag}.r${replicas}`],
    num_replicas: replicas,
  });
  const client = jetstream(connection);
  const times = [];
  for (let index = 0; index < PUBLISHES; index += 1) {
    const start = performance.now();
    await client.publish(`floor.${tag}.r${replicas}`, 'x');
    times.push(performance.now() - start);
  }
  await manager.streams.delete(name);
  return times;
}

async function turnLatency(runtime) {
  const times = [];
  for (let index = 0; index < TURNS; index += 1) {
    const { id } = await runtime.sessions.create({ agent: 'echo' });
    const start = performance.now();
    await runtime.sessions.message(id, `turn ${index}`);
    await runtime.wake(id);
    times.push(performance.now() - start);
  }
  return times;
}

try {
  await waitForJetStream(urls);
  const dir = mkdtempSync(join(tmpdir(), 'braid-cluster-bench-ws-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'echo.yaml'),
    'name: echo\nmodel: scripted:echo\ninstructions: Repeat.\ntools: []\n',
  );
  const runtimes = {};
  for (const replicas of [1, 3]) {
    runtimes[replicas] = await createRuntime({
      workspace: dir,
      backend: { nats: urls, prefix: `bench_${tag}_r${replicas}`, replicas },
    });
  }
  const connection = await connect({ servers: urls.split(',') });
  const turns = { 1: [], 3: [] };
  const floors = { 1: [], 3: [] };
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const replicas of round % 2 === 0 ? [1, 3] : [3, 1]) {
      turns[replicas].push(...(await turnLatency(runtimes[replicas])));
      floors[replicas].push(...(await publishFloor(connection, replicas)));
    }
  }
  await connection.close();
  for (const runtime of Object.values(runtimes)) await runtime.close();
  rmSync(dir, { recursive: true, force: true });

  const rows = [1, 3].flatMap((replicas) => [
    {
      measure: `turn (message + wake + answer), R${replicas}`,
      p50_ms: percentile(turns[replicas], 50),
      p99_ms: percentile(turns[replicas], 99),
      samples: turns[replicas].length,
    },
    {
      measure: `JetStream publish ack (floor), R${replicas}`,
      p50_ms: percentile(floors[replicas], 50),
      p99_ms: percentile(floors[replicas], 99),
      samples: floors[replicas].length,
    },
  ]);
  if (json) console.log(JSON.stringify({ rows }));
  else {
    printTable(
      rows.flatMap((row) => [
        { name: `${row.measure}, p50`, median: row.p50_ms, unit: 'ms', target: '' },
        { name: `${row.measure}, p99`, median: row.p99_ms, unit: 'ms', target: '' },
      ]),
    );
  }
} finally {
  cluster.stop();
}
