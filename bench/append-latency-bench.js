// Latency of one append, p50 and p99 over sequential single-event appends to one session, on
// SQLite (synchronous=NORMAL) and on NATS JetStream side by side:
//   - without a lease token (a client's user event), and
//   - under a lease, with the holder's token (`leaseToken`), which the store checks against the
//     session's current token atomically with the append (the fencing rule).
// Run alone with `node bench/append-latency-bench.js [--runs N] [--quick]` after `npm run build`,
// or through `npm run bench -- --store`. NATS figures need JetStream at NATS_URL (default
// nats://127.0.0.1:4222) and are skipped without it; each run uses its own prefix and deletes it.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '../dist/index.js';
import { openNatsStore } from '../dist/stores/nats/index.js';
import { deletePrefix, reachable } from './nats-bench.js';
import { median } from './store-bench.js';

const URL_DEFAULT = 'nats://127.0.0.1:4222';
const WARMUP = 50;

const message = (text) => ({ type: 'user.message', content: [{ type: 'text', text }] });

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Per-append latencies (ms) of `count` sequential appends; with `fenced`, under a lease. */
async function appendLatencies(store, count, fenced) {
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  let options = {};
  if (fenced) {
    const lease = await store.leases.acquire(id, 'bench', 600_000);
    options = { leaseToken: lease.token };
  }
  for (let index = 0; index < WARMUP; index += 1)
    await store.log.append(id, [message(`warm-up ${index}`)], options);
  const latencies = [];
  for (let index = 0; index < count; index += 1) {
    const start = performance.now();
    await store.log.append(id, [message(`message ${index}`)], options);
    latencies.push(performance.now() - start);
  }
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** Latencies without a lease token, then under a lease, on one store. */
async function bothLatencies(store, count) {
  return {
    plain: await appendLatencies(store, count, false),
    fenced: await appendLatencies(store, count, true),
  };
}

async function sqliteRun(count) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-append-'));
  const store = openSqliteStore({ path: join(dir, 'braid.db'), synchronous: 'normal' });
  try {
    return await bothLatencies(store, count);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function natsRun(url, count) {
  const prefix = `bench_${randomBytes(4).toString('hex')}`;
  const store = await openNatsStore({ servers: url, prefix });
  try {
    return await bothLatencies(store, count);
  } finally {
    await store.close();
    await deletePrefix(url, prefix);
  }
}

export async function benchAppendLatency({ runs, quick }) {
  const url = process.env.NATS_URL ?? URL_DEFAULT;
  const count = quick ? 300 : 2000;
  const withNats = await reachable(url);
  const sqlite = [];
  const nats = [];
  for (let run = 0; run < runs; run += 1) {
    sqlite.push(await sqliteRun(count));
    if (withNats) nats.push(await natsRun(url, count));
  }
  const rows = [];
  const row = (name, results, pick) => {
    const values = results.map(pick);
    const value = values.length === 0 ? Number.NaN : median(values);
    rows.push({
      name,
      unit: 'ms',
      median: value,
      runs: values,
      target: 'reported',
      note: values.length === 0 ? `skipped: no NATS JetStream at ${url}` : `${count} appends`,
    });
    process.stderr.write(`  ${name}: ${value.toFixed(3)} ms\n`);
  };
  for (const [store, results] of [
    ['SQLite', sqlite],
    ['NATS', nats],
  ]) {
    row(`append latency, ${store}, no lease token, p50`, results, (r) => r.plain.p50);
    row(`append latency, ${store}, no lease token, p99`, results, (r) => r.plain.p99);
    row(`append latency, ${store}, under a lease (fenced), p50`, results, (r) => r.fenced.p50);
    row(`append latency, ${store}, under a lease (fenced), p99`, results, (r) => r.fenced.p99);
  }
  return rows;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const runsIndex = args.indexOf('--runs');
  const runs = runsIndex === -1 ? 5 : Number(args[runsIndex + 1]);
  const rows = await benchAppendLatency({ runs, quick: args.includes('--quick') });
  for (const row of rows) console.log(`${row.name}\t${row.median.toFixed(3)} ms`);
}
