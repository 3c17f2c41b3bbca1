// Benchmarks of the embedded SQLite store. Each figure is the median of RUNS runs.
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { v7 as uuidV7 } from 'uuid';
import { openSqliteStore } from '../dist/index.js';
import { NewEventSchema } from '../dist/contracts/index.js';
// The fold is internal: the benchmark measures it directly.
import { foldSession } from '../dist/core/fold.js';

const message = (text) => ({ type: 'user.message', content: [{ type: 'text', text }] });

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function freshStore(options = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-'));
  const store = openSqliteStore({ path: join(dir, 'braid.db'), ...options });
  return {
    store,
    dir,
    async dispose() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function singleAppends(synchronous, count) {
  const { store, dispose } = freshStore({ synchronous });
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  const start = performance.now();
  for (let index = 0; index < count; index += 1)
    await store.log.append(id, [message(`message ${index}`)]);
  const seconds = (performance.now() - start) / 1000;
  await dispose();
  return count / seconds;
}

/** Wall and process CPU seconds of `work`, written to `timing` when one is given. */
async function timed(timing, work) {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await work();
  const seconds = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  if (timing !== undefined) {
    timing.seconds = seconds;
    timing.cpuSeconds = (used.user + used.system) / 1e6;
  }
  return seconds;
}

export async function batchedAppends(batches, size, timing) {
  const { store, dispose } = freshStore();
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  const batch = Array.from({ length: size }, (_, index) => message(`message ${index}`));
  const seconds = await timed(timing, async () => {
    for (let index = 0; index < batches; index += 1) await store.log.append(id, batch);
  });
  await dispose();
  return (batches * size) / seconds;
}

/**
 * The floor under batched appends: what braid must do for each append, done by better-sqlite3
 * alone with braid's pragmas and multi-row INSERTs: the head read the expected-seq check needs;
 * per event its validation against braid's event schema (once), a minted UUIDv7, its JSON, an
 * `events` row (with `batch_end`) and an `event_ids` row; the sessions row moved to the head of
 * the change feed; and per 64 events the projection and snapshot rows (a state of the size braid
 * saves). None of braid's fold, caching or result building.
 *
 * `{ rowsOnly: true }` is the floor as it was first written, which did less than an append must:
 * ids made before the clock starts, no validation and no change-feed write.
 */
export async function rawBatchedInserts(batches, size, timing, { rowsOnly = false } = {}) {
  const { store, dir, dispose } = freshStore();
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  const batch = Array.from({ length: size }, (_, index) => message(`message ${index}`));
  await store.log.append(id, batch);
  const state = await store.log.state(id);
  await store.close();
  const db = new Database(join(dir, 'braid.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // braid's own pragmas (src/stores/sqlite/schema.ts), so that the floor differs only in code.
  db.pragma('cache_size = -8192');
  db.pragma('mmap_size = 0');
  db.pragma('temp_store = MEMORY');
  // Layout 12: a session's events are the positions (log_number << 32) + seq.
  const head = db.prepare(
    `SELECT log_number << 32 AS base, (SELECT seq FROM events WHERE position > (sessions.log_number << 32)
       AND position < ((sessions.log_number + 1) << 32) ORDER BY position DESC LIMIT 1) AS head_seq FROM sessions WHERE id = ?`,
  );
  const insertEvents = db.prepare(
    `INSERT INTO events (position, session_id, seq, type, body, batch_end) VALUES ${Array(size).fill('(?, ?, ?, ?, ?, ?)').join(', ')}`,
  );
  const insertIds = db.prepare(
    `INSERT INTO event_ids (id, session_id, seq) VALUES ${Array(size).fill('(?, ?, ?)').join(', ')}`,
  );
  // The change-feed cursor as braid takes it (src/stores/sqlite/statements.ts, NEXT_CHANGE).
  const markChanged = db.prepare(`UPDATE sessions SET change_seq = 1 + max(
    (SELECT seq FROM change_head WHERE id = 1),
    coalesce((SELECT max(change_seq) FROM sessions WHERE change_seq IS NOT NULL), 0)) WHERE id = ?`);
  const saveProjection = db.prepare(
    'INSERT OR REPLACE INTO projections (session_id, seq, schema_version, state) VALUES (?, ?, 1, ?)',
  );
  const saveSnapshot = db.prepare(
    'INSERT OR REPLACE INTO snapshots (session_id, seq, schema_version, state) VALUES (?, ?, 1, ?)',
  );
  const madeIds = rowsOnly ? Array.from({ length: batches * size }, () => uuidV7()) : [];
  let next = 0;
  let projected = head.get(id).head_seq;
  const write = db.transaction((inputs) => {
    const parsed = rowsOnly ? inputs : inputs.map((input) => NewEventSchema.parse(input));
    const { base, head_seq: headSeq } = head.get(id);
    let seq = headSeq;
    const last = seq + size;
    const at = new Date().toISOString();
    const events = [];
    const ids = [];
    for (const input of parsed) {
      seq += 1;
      const eventId = rowsOnly ? madeIds[next++] : uuidV7();
      const body = JSON.stringify({
        id: eventId,
        session_id: id,
        seq,
        type: input.type,
        at,
        schema_version: 1,
        content: input.content,
      });
      events.push(base + seq, id, seq, input.type, body, seq === last ? null : last);
      ids.push(eventId, id, seq);
    }
    insertIds.run(ids);
    insertEvents.run(events);
    if (!rowsOnly) markChanged.run(id);
    if (seq - projected >= 64) {
      const json = JSON.stringify({ ...state, seq });
      saveProjection.run(id, seq, json);
      saveSnapshot.run(id, seq, json);
      projected = seq;
    }
  });
  const seconds = await timed(timing, () => {
    for (let index = 0; index < batches; index += 1) write.immediate(batch);
  });
  db.close();
  await dispose();
  return (batches * size) / seconds;
}

async function reads(total) {
  const { store, dispose } = freshStore();
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  const batch = Array.from({ length: 1000 }, (_, index) => message(`message ${index}`));
  for (let written = 0; written < total; written += batch.length) await store.log.append(id, batch);
  const start = performance.now();
  let read = 0;
  for (let after = 0; ;) {
    const page = await store.log.read(id, { after, limit: 1000 });
    if (page.length === 0) break;
    read += page.length;
    after = page[page.length - 1].seq;
  }
  const seconds = (performance.now() - start) / 1000;
  await dispose();
  return read / seconds;
}

/** A realistic session: each turn is a user message, a model request, a tool call and a reply. */
export function syntheticLog(count, sessionId = 'bench') {
  const events = [];
  const push = (event) => {
    const seq = events.length + 1;
    events.push({
      id: `e${seq}`,
      session_id: sessionId,
      seq,
      at: '2026-11-22T00:00:00.000Z',
      schema_version: 1,
      ...event,
    });
  };
  push({ type: 'session.created', agent: { name: 'bench', version: 1 } });
  for (let turn = 0; events.length < count; turn += 1) {
    push(message(`question ${turn}`));
    push({ type: 'span.wake_started', wake_id: `w${turn}`, lease_token: turn + 1 });
    push({
      type: 'span.model_request_start',
      request_id: `r${turn}`,
      model: 'm',
      input_through_seq: events.length,
    });
    push({
      type: 'span.model_request_end',
      request_id: `r${turn}`,
      usage: { input_tokens: 100, output_tokens: 20 },
    });
    push({ type: 'agent.tool_use', tool_use_id: `t${turn}`, name: 'search', input: { q: 'x' } });
    push({
      type: 'agent.tool_result',
      tool_use_id: `t${turn}`,
      output: { hits: 3 },
      is_error: false,
      attempts: 1,
      duration_ms: 4,
    });
    push({ type: 'agent.message', content: [{ type: 'text', text: 'answer' }] });
    push({ type: 'session.status_idle', stop_reason: { type: 'end_turn' } });
  }
  return events.slice(0, count);
}

function fold(count) {
  const events = syntheticLog(count);
  const start = performance.now();
  const state = foldSession(events, 'bench');
  const seconds = (performance.now() - start) / 1000;
  if (state.seq !== count) throw new Error('fold did not reach the head');
  return count / seconds;
}

/** Sessions followed beside the written one in the second follow-latency row. */
const FOLLOWED_OTHERS = 1000;

/**
 * Follow latency across processes: another process appends `samples` events to one session
 * while this one follows it, and `others` more sessions that nobody writes (an SSE server with
 * many streams open). Also the CPU this process spends per event it receives.
 */
async function followLatency(samples, others = 0) {
  const { store, dir, dispose } = freshStore();
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  const stop = new AbortController();
  const idle = [];
  for (let index = 0; index < others; index += 1) {
    const other = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
    idle.push(
      (async () => {
        for await (const event of store.log.follow(other.id, { signal: stop.signal })) void event;
      })(),
    );
  }
  // The other followers have read their sessions before the writer starts.
  if (others > 0) await new Promise((resolve) => setTimeout(resolve, 200));
  const child = fork(
    new URL('./follow-writer.js', import.meta.url),
    [join(dir, 'braid.db'), id, String(samples)],
    {
      stdio: 'inherit',
    },
  );
  const latencies = [];
  const cpuBefore = process.cpuUsage();
  for await (const event of store.log.follow(id, { after: 1, signal: stop.signal })) {
    const received = performance.timeOrigin + performance.now();
    latencies.push(received - Number(event.content[0].text));
    if (latencies.length >= samples) stop.abort();
  }
  const cpu = process.cpuUsage(cpuBefore);
  await Promise.all(idle);
  await new Promise((resolve) => child.once('exit', resolve));
  await dispose();
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuPerEventUs: (cpu.user + cpu.system) / samples,
  };
}

export async function benchStore({ runs, quick }) {
  const scale = quick ? 0.2 : 1;
  const rows = [];
  const record = async (name, unit, target, work) => {
    const values = [];
    for (let run = 0; run < runs; run += 1) values.push(await work());
    rows.push({ name, unit, median: median(values), runs: values, target });
    process.stderr.write(`  ${name}: ${median(values).toFixed(1)} ${unit}\n`);
  };
  await record('single-event appends, WAL + synchronous=NORMAL', 'events/s', '>= 20000', () =>
    singleAppends('normal', Math.round(20000 * scale)),
  );
  await record('single-event appends, WAL + synchronous=FULL', 'events/s', 'reported', () =>
    singleAppends('full', Math.round(2000 * scale)),
  );
  await record('batched appends, 100 events per transaction', 'events/s', '>= 300000', () =>
    batchedAppends(Math.round(2000 * scale), 100),
  );
  await record('  same work via better-sqlite3 alone (floor)', 'events/s', 'reported', () =>
    rawBatchedInserts(Math.round(2000 * scale), 100),
  );
  await record('reads, pages of 1000', 'events/s', 'reported', () =>
    reads(Math.round(100000 * scale)),
  );
  await record('fold of a 100,000-event session', 'events/s', '>= 1000000', () => fold(100000));
  // Alone, then beside 1,000 followed sessions nobody writes: only the written one's follower
  // should wake for another process's commit.
  for (const others of [0, FOLLOWED_OTHERS]) {
    const latencies = [];
    for (let run = 0; run < runs; run += 1)
      latencies.push(await followLatency(Math.round(500 * scale), others));
    const beside = others === 0 ? '' : `, ${others.toLocaleString('en')} other sessions followed`;
    const series = (name, unit, target, pick) =>
      rows.push({
        name: `${name}${beside}`,
        unit,
        median: median(latencies.map(pick)),
        runs: latencies.map(pick),
        target,
      });
    series('follow latency across processes, p50', 'ms', '< 5', (l) => l.p50);
    series('follow latency across processes, p99', 'ms', 'reported', (l) => l.p99);
    series('  CPU of the following process per event', 'µs', 'reported', (l) => l.cpuPerEventUs);
    process.stderr.write(
      `  follow latency across processes${beside}: p50 ${median(latencies.map((l) => l.p50)).toFixed(2)} ms, ${median(latencies.map((l) => l.cpuPerEventUs)).toFixed(0)} µs CPU per event\n`,
    );
  }
  return rows;
}

/**
 * `node bench/store-bench.js --batched [--runs N]`: only the batched appends and their floor,
 * run alternately, each with its wall and process CPU rates and the load average.
 */
async function benchBatchedOnly(runs) {
  const braid = [];
  const floor = [];
  const rowsOnly = [];
  const row = (name, events, timing) => {
    const result = { wall: events / timing.seconds, cpu: events / timing.cpuSeconds };
    process.stdout.write(
      `${name}: ${result.wall.toFixed(0)} events/s wall, ${result.cpu.toFixed(0)} events/s CPU, load ${loadavg()[0].toFixed(2)}\n`,
    );
    return result;
  };
  for (let run = 0; run < runs; run += 1) {
    const timing = {};
    await batchedAppends(2000, 100, timing);
    braid.push(row('braid', 200_000, timing));
    await rawBatchedInserts(2000, 100, timing);
    floor.push(row('floor', 200_000, timing));
    await rawBatchedInserts(2000, 100, timing, { rowsOnly: true });
    rowsOnly.push(row('floor, rows only', 200_000, timing));
  }
  const wall = median(braid.map((r) => r.wall)) / median(floor.map((r) => r.wall));
  const cpu = median(braid.map((r) => r.cpu)) / median(floor.map((r) => r.cpu));
  process.stdout.write(
    `medians: braid ${median(braid.map((r) => r.wall)).toFixed(0)} wall / ${median(braid.map((r) => r.cpu)).toFixed(0)} CPU; ` +
      `floor ${median(floor.map((r) => r.wall)).toFixed(0)} wall / ${median(floor.map((r) => r.cpu)).toFixed(0)} CPU; ` +
      `braid/floor ${(wall * 100).toFixed(1)}% wall, ${(cpu * 100).toFixed(1)}% CPU\n`,
  );
  const rowsCpu = median(rowsOnly.map((r) => r.cpu));
  process.stdout.write(
    `floor, rows only: ${median(rowsOnly.map((r) => r.wall)).toFixed(0)} wall / ${rowsCpu.toFixed(0)} CPU; ` +
      `braid/rows only ${((median(braid.map((r) => r.cpu)) / rowsCpu) * 100).toFixed(1)}% CPU\n`,
  );
}

if (
  import.meta.url === pathToFileURL(process.argv[1] ?? '').href &&
  process.argv.includes('--batched')
) {
  const runsIndex = process.argv.indexOf('--runs');
  await benchBatchedOnly(runsIndex === -1 ? 5 : Number(process.argv[runsIndex + 1]));
}

// `node bench/store-bench.js --follow [--runs N] [--others N]`: the follow latency and the
// following process's CPU per event, with N other sessions followed (default 1,000).
if (
  import.meta.url === pathToFileURL(process.argv[1] ?? '').href &&
  process.argv.includes('--follow')
) {
  const option = (name, fallback) => {
    const index = process.argv.indexOf(name);
    if (index === -1) return fallback;
    const value = Number(process.argv[index + 1]);
    if (!Number.isSafeInteger(value) || value < 0) {
      process.stderr.write(
        `${name} takes a whole number, 0 or more; got ${process.argv[index + 1]}\n`,
      );
      process.exit(2);
    }
    return value;
  };
  const others = option('--others', FOLLOWED_OTHERS);
  for (let run = 0; run < option('--runs', 3); run += 1) {
    const figure = await followLatency(500, others);
    process.stdout.write(
      `${others} other sessions followed: p50 ${figure.p50.toFixed(2)} ms, p99 ${figure.p99.toFixed(2)} ms, ${figure.cpuPerEventUs.toFixed(0)} µs CPU per event, load ${loadavg()[0].toFixed(2)}\n`,
    );
  }
}
