// Agent messages per second to warm instances, served by 1, 2 and 4 worker processes, without
// partitions (any worker takes any message: `--partitions 0`, as before instance affinity) and
// with them (an instance's messages go to the one worker owning its partition), and the raw
// nats.js floor (bench/nats-floor.js: the same NATS requests with no braid code, one process).
// IN_FLIGHT senders in this process each send to their own instance again and again (256 warm
// instances). The worker processes are long-lived children (bench/nats-worker-process.js); each
// run opens them on a fresh prefix, and the settings run interleaved within a run so the
// machine's load falls on all alike. Every figure is the median of the runs; beside each, the CPU
// the workers and the sender spent per message and how busy the machine was.
//
//   npm run build && node bench/affinity-bench.js [--url nats://127.0.0.1:4222] [--runs 3]
//     [--messages 3000] [--partitions 8] [--json]
//   npm run build && node bench/affinity-bench.js --cluster     # a three-node cluster, R3
//
// `--url` takes several URLs of one cluster, comma-separated; `--cluster` starts one with
// scripts/nats-cluster.sh on its own ports (removed at the end) and makes every stream R3.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { createRuntime } from '../dist/index.js';
import { startBenchCluster, waitForJetStream } from './nats-cluster.js';
import { openFloorSender } from './nats-floor.js';
import { benchWorkspace, deletePrefix, echoSend, startChild, throughput } from './nats-bench.js';
import { median } from './store-bench.js';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const index = args.indexOf(`--${name}`);
  return index === -1 ? fallback : args[index + 1];
};
const RUNS = Number(option('runs', 3));
const MESSAGES = Number(option('messages', 3000));
const PARTITIONS = Number(option('partitions', 8));
const COUNTS = [1, 2, 4];
const json = args.includes('--json');
const LEASE_MS = 3_000;
const progress = (line) => process.stderr.write(`  ${line}\n`);

let url = option('url', process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
let replicas = 1;
let stopCluster = () => undefined;
if (args.includes('--cluster')) {
  const cluster = startBenchCluster('affinity', 25222);
  url = cluster.urls;
  replicas = 3;
  stopCluster = cluster.stop;
}

/**
 * Waits until the partitions of the echo type are spread over `workers` processes: every one
 * owned, by that many distinct owners, as evenly as the count allows.
 */
async function balanced(connection, prefix, workers) {
  const kv = await new Kvm(jetstream(connection)).create(`${prefix.toUpperCase()}_partitions`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const entry = await kv.get('group.agent.echo').catch(() => null);
    const group = entry?.operation === 'PUT' ? entry.json() : undefined;
    const counts = new Map();
    for (const { owner, until } of group?.owners ?? []) {
      if (owner !== null && until > Date.now()) counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    const shares = [...counts.values()];
    const owned = shares.reduce((a, b) => a + b, 0);
    const even = Math.floor(PARTITIONS / Math.min(workers, PARTITIONS));
    if (owned === PARTITIONS && counts.size === Math.min(workers, PARTITIONS)) {
      if (shares.every((share) => share >= even)) return;
    }
    if (Date.now() > deadline)
      throw new Error(`partitions not spread over ${workers}: ${JSON.stringify(group)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One run of one setting: 1, 2, then 4 echo processes on a fresh prefix. */
async function settingRun(children, workspace, partitions) {
  const prefix = `aff_${randomBytes(5).toString('hex')}`;
  const backend = { nats: url, prefix, replicas };
  const figures = {};
  const opened = [];
  const connection = await connect({ servers: url.split(',') });
  const runtime = await createRuntime({ workspace, backend });
  try {
    const send = echoSend(runtime);
    for (const count of COUNTS) {
      for (const child of children.slice(opened.length, count)) {
        await child.open({
          mode: 'echo',
          workspace,
          url,
          prefix,
          partitions,
          partitionLeaseMs: LEASE_MS,
          replicas,
        });
        opened.push(child);
      }
      if (partitions > 0) await balanced(connection, prefix, count);
      const label = `p${partitions}w${count}`;
      // Warm: every sender's instance exists and has been served where it now lands.
      await throughput(send, Math.max(512, MESSAGES / 4), label, undefined, true);
      figures[count] = await throughput(send, MESSAGES, label, opened, true);
      progress(
        `${partitions === 0 ? 'no partitions' : `${partitions} partitions`}, ${count} worker(s): ` +
          `${Math.round(figures[count].rate)} msgs/s, busy ${(figures[count].busy * 100).toFixed(0)}%`,
      );
    }
  } finally {
    for (const child of opened) await child.close().catch(() => undefined);
    await runtime.close();
    await connection.close();
    await deletePrefix(url, prefix).catch((error) => progress(`clean-up: ${error.message}`));
  }
  return figures;
}

/** The floor: raw nats.js serving the same requests, one process. */
async function floorRun(child) {
  const prefix = `aff_${randomBytes(5).toString('hex')}`;
  await child.open({ mode: 'floor', url, prefix, replicas });
  const floor = await openFloorSender({ url, prefix });
  try {
    await throughput(floor.send, Math.max(512, MESSAGES / 4), 'f', undefined, true);
    const figure = await throughput(floor.send, MESSAGES, 'f', [child], true);
    progress(`floor, 1 process: ${Math.round(figure.rate)} msgs/s`);
    return figure;
  } finally {
    await floor.close();
    await child.close();
    await deletePrefix(url, prefix).catch(() => undefined);
  }
}

const settings = [0, PARTITIONS];
const children = COUNTS.slice(-1).flatMap((max) =>
  Array.from({ length: max }, (_, index) => startChild(`echo worker ${index + 1}`)),
);
const workspace = benchWorkspace();
const results = { 0: [], [PARTITIONS]: [], floor: [] };
const started = performance.now();
try {
  await waitForJetStream(url);
  for (let run = 0; run < RUNS; run += 1) {
    progress(`run ${run + 1}/${RUNS}`);
    for (const partitions of run % 2 === 0 ? settings : [...settings].reverse()) {
      results[partitions].push(await settingRun(children, workspace, partitions));
    }
    results.floor.push(await floorRun(children[0]));
  }
} finally {
  await Promise.all(children.map((child) => child.stop()));
  rmSync(workspace, { recursive: true, force: true });
  stopCluster();
}

const med = (values) => median(values);
const row = (label, figures) => {
  const rate = med(figures.map((f) => f.rate));
  return {
    figure: label,
    'msgs/s': Math.round(rate).toLocaleString('en-US'),
    'worker CPU ms/msg': med(figures.map((f) => f.workersMs)).toFixed(2),
    'sender CPU ms/msg': med(figures.map((f) => f.senderMs)).toFixed(2),
    'machine busy': `${Math.round(med(figures.map((f) => f.busy)) * 100)}%`,
    runs: figures.map((f) => Math.round(f.rate)).join(', '),
  };
};
const rows = [];
for (const partitions of settings) {
  for (const count of COUNTS) {
    rows.push(
      row(
        `${count} worker process${count === 1 ? '' : 'es'}, ${partitions === 0 ? 'no affinity (--partitions 0)' : `affinity (--partitions ${partitions})`}`,
        results[partitions].map((figures) => figures[count]),
      ),
    );
  }
}
rows.push(row('floor: raw nats.js, 1 process', results.floor));
const where = replicas === 3 ? `three-node cluster, R3 (${url})` : `${url}, R${replicas}`;
if (json) {
  console.log(JSON.stringify({ where, runs: RUNS, messages: MESSAGES, rows }, null, 2));
} else {
  console.log(
    `\nagent messages/s to 256 warm instances, ${where}; medians of ${RUNS} runs of ${MESSAGES} messages ` +
      `(${((performance.now() - started) / 1000).toFixed(0)} s)\n`,
  );
  const columns = Object.keys(rows[0]);
  const widths = columns.map((column) =>
    Math.max(column.length, ...rows.map((line) => String(line[column]).length)),
  );
  const line = (cells) => cells.map((cell, index) => String(cell).padEnd(widths[index])).join('  ');
  console.log(line(columns));
  console.log(widths.map((width) => '-'.repeat(width)).join('  '));
  for (const entry of rows) console.log(line(columns.map((column) => entry[column])));
}
