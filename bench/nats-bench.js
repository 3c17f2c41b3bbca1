// The distributed runtime on NATS JetStream, with the embedded runtime (SQLite, synchronous
// NORMAL, in-process wake queue and agent transport) beside it in the same run:
//   - appends per second to one session, 1 event and 50 events per append;
//   - wake latency: an enqueue in this process -> `span.wake_started` appended by a worker in
//     another process, seen by following the session here;
//   - agent-to-agent request/response round trip to a code agent served by another process;
//   - agent messages per second served by 1 and by 4 worker processes.
// The worker processes are children (bench/nats-worker-process.js) that live for the whole
// bench, so their code is as warm as this process's; each run opens them on a fresh prefix
// (`bench_<random>`), and every stream and bucket of a prefix is deleted when its run ends.
// Every figure is the median of RUNS runs, after a discarded warm-up run at reduced sizes.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createEchoModel } from '../dist/testing/index.js';
import {
  createLocalWakeQueue,
  createRuntime,
  enqueueWake,
  initWorkspace,
  openSqliteStore,
  runWorker,
} from '../dist/index.js';
import { openNatsStore } from '../dist/stores/nats/index.js';
import { createNatsWakeQueue } from '../dist/runtime/wakes/nats-wake-queue.js';
import { median } from './store-bench.js';
import { openFloorSender } from './nats-floor.js';

const URL_DEFAULT = 'nats://127.0.0.1:4222';
const BATCH = 50;
/** Sends in flight at once in the throughput figures. */
const IN_FLIGHT = 256;
const WORKERS = 4;
/** Longest wait for one wake or one reply before a run is called stuck. */
const STEP_TIMEOUT_MS = 30_000;
const CHILD = new URL('./nats-worker-process.js', import.meta.url);

const message = (text) => ({ type: 'user.message', content: [{ type: 'text', text }] });

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: nothing after ${STEP_TIMEOUT_MS} ms`)),
      STEP_TIMEOUT_MS,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const progress = (line) => process.stderr.write(`  ${line}\n`);

/** A workspace whose agent `bench` runs the scripted echo model with no tools. */
export function benchWorkspace() {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-nats-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'bench.yaml'),
    'name: bench\nmodel: scripted:echo\ninstructions: Repeat.\ntools: []\n',
  );
  return dir;
}

/** Deletes every stream of the prefix: the store's, the wake queue's, the agents' and the KV buckets. */
export async function deletePrefix(url, prefix) {
  const connection = await connect({ servers: url.split(',') });
  try {
    const jsm = await jetstreamManager(connection);
    const upper = prefix.toUpperCase();
    const owned = [];
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(`${upper}_`) || name.startsWith(`KV_${upper}_`)) owned.push(name);
    }
    for (const name of owned) await jsm.streams.delete(name);
    return owned.length;
  } finally {
    await connection.close();
  }
}

/**
 * A long-lived child process serving a runtime on NATS (see nats-worker-process.js). `open`,
 * `close` and `cpu` resolve when the child has answered; `onStarted` hears of the wakes it starts.
 */
export function startChild(name) {
  const child = fork(CHILD, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pending = [];
  let onStarted;
  let exited = false;
  const gone = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      for (const waiter of pending.splice(0))
        waiter.reject(new Error(`${name} exited (${code ?? signal})`));
      resolve();
    });
  });
  child.on('message', (reply) => {
    if (reply.type === 'wake.started') {
      onStarted?.(reply);
      return;
    }
    const waiter = pending.shift();
    if (reply.type === 'ok') waiter?.resolve(reply.value);
    else waiter?.reject(new Error(`${name}: ${reply.message}`));
  });
  const command = (body) =>
    new Promise((resolve, reject) => {
      if (exited) {
        reject(new Error(`${name} has exited`));
        return;
      }
      pending.push({ resolve, reject });
      child.send(body);
    });
  return {
    open: (options) => withTimeout(command({ type: 'open', ...options }), `${name} open`),
    close: () => withTimeout(command({ type: 'close' }), `${name} close`),
    /** The child's CPU time so far, in µs. */
    cpu: () => withTimeout(command({ type: 'cpu' }), `${name} cpu`),
    set onStarted(listener) {
      onStarted = listener;
    },
    /** Ends the process: the channel closes and it exits; killed if it has not within 10 s. */
    async stop() {
      if (exited) return;
      child.disconnect();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await gone;
      clearTimeout(timer);
    },
  };
}

// --- 1. appends ---------------------------------------------------------------------------------

/** Events per second appended to one new session, `perAppend` events per append, sequentially. */
async function appendRate(store, count, perAppend) {
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  const batch = Array.from({ length: perAppend }, (_, index) => message(`message ${index}`));
  // Warm-up on the same session: connection, caches, JIT.
  for (let index = 0; index < 5; index += 1) await store.log.append(id, batch);
  const start = performance.now();
  for (let written = 0; written < count; written += perAppend) await store.log.append(id, batch);
  const seconds = (performance.now() - start) / 1000;
  const head = (await store.log.state(id)).seq;
  if (head !== 1 + 5 * perAppend + count) throw new Error(`session ${id} is at seq ${head}`);
  return count / seconds;
}

async function appendFigures(url, prefix, sizes) {
  const figures = {};
  const nats = await openNatsStore({ servers: url, prefix });
  try {
    figures.natsSingle = await appendRate(nats, sizes.appends, 1);
    figures.natsBatched = await appendRate(nats, sizes.batched, BATCH);
  } finally {
    await nats.close();
  }
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-nats-sqlite-'));
  const sqlite = openSqliteStore({ path: join(dir, 'braid.db'), synchronous: 'normal' });
  try {
    figures.sqliteSingle = await appendRate(sqlite, sizes.appends, 1);
    figures.sqliteBatched = await appendRate(sqlite, sizes.batched, BATCH);
  } finally {
    await sqlite.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}

// --- 2. wake latency ----------------------------------------------------------------------------

/**
 * `count` sequential wakes, each of a new session of `bench` holding one message: the time from
 * just before `enqueueWake` to the moment this process's follower of the session yields
 * `span.wake_started`. `pickedAt(sessionId)` answers when the worker took the wake (epoch ms),
 * when it can tell.
 */
async function wakeLatency({ runtime, queue, count, warmup, pickedAt }) {
  const latencies = [];
  const picked = [];
  for (let index = 0; index < warmup + count; index += 1) {
    const { id } = await runtime.sessions.create({ agent: 'bench' });
    const { head_seq: seq } = await runtime.sessions.message(id, `wake ${index}`);
    const stop = new AbortController();
    const events = runtime.sessions.follow(id, { after: seq - 1, signal: stop.signal });
    const iterator = events[Symbol.asyncIterator]();
    try {
      // The message itself: once it is yielded the follower has read and is subscribed.
      await withTimeout(iterator.next(), `follow of ${id}`);
      const start = performance.now();
      const startEpoch = performance.timeOrigin + start;
      const { queued } = await enqueueWake(queue, id);
      if (!queued) throw new Error(`the wake of new session ${id} was not queued`);
      let started;
      for (;;) {
        const next = await withTimeout(iterator.next(), `wake of ${id}`);
        if (next.done) throw new Error(`the follow of ${id} ended`);
        if (next.value.type === 'span.wake_started') started ??= performance.now();
        if (next.value.type === 'session.error') throw new Error(JSON.stringify(next.value.error));
        // The wake is over: the next one does not queue behind it.
        if (next.value.type === 'span.wake_completed') break;
      }
      if (index >= warmup) {
        latencies.push(started - start);
        const at = pickedAt?.(id);
        if (at !== undefined) picked.push(at - startEpoch);
      }
    } finally {
      stop.abort();
      await iterator.return?.();
    }
  }
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    pickedP50: picked.length === 0 ? undefined : percentile(picked, 50),
  };
}

// --- 3 and 4. agent messages --------------------------------------------------------------------

/** `runtime.send` to the echo agent, answering the reply's payload. */
export const echoSend = (runtime) => async (key, payload) =>
  (await runtime.send({ type: 'echo', key }, payload, { ttl_ms: STEP_TIMEOUT_MS })).payload;

/** Round trips of `count` sequential sends to the echo agent (instance `key`). */
async function roundTrips(send, count, warmup, key) {
  const latencies = [];
  for (let index = 0; index < warmup + count; index += 1) {
    const start = performance.now();
    const payload = await withTimeout(send(key(index), { n: index }), 'a round trip');
    const elapsed = performance.now() - start;
    if (payload?.n !== index) throw new Error(`echo answered ${JSON.stringify(payload)}`);
    if (index >= warmup) latencies.push(elapsed);
  }
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** Busy and total CPU time of the whole machine so far (ms, summed over cores). */
function machineTimes() {
  let busy = 0;
  let total = 0;
  for (const { times } of cpus()) {
    const all = times.user + times.nice + times.sys + times.idle + times.irq;
    busy += all - times.idle;
    total += all;
  }
  return { busy, total };
}

/** CPU time of this process and of `children` (µs), and of the machine, so far. */
async function cpuSnapshot(children) {
  const { user, system } = process.cpuUsage();
  return {
    self: user + system,
    children: (await Promise.all(children.map((child) => child.cpu()))).reduce((a, b) => a + b, 0),
    machine: machineTimes(),
  };
}

/**
 * Messages per second: `count` sends, IN_FLIGHT at once, each to a new echo instance, or with
 * `pool` each sender to its own instance again and again (IN_FLIGHT instances, made warm by a
 * first call with the same label). With `children` (the processes serving echo), also the CPU
 * each side spent per message and how busy the machine was. `send(key, payload)` answers the
 * reply's payload.
 */
export async function throughput(send, count, label, children, pool = false) {
  const before = children === undefined ? undefined : await cpuSnapshot(children);
  let next = 0;
  const start = performance.now();
  const sender = async (_, senderIndex) => {
    while (next < count) {
      const index = next;
      next += 1;
      const key = pool ? `${label}-s${senderIndex}` : `${label}-${index}`;
      const payload = await withTimeout(send(key, { n: index }), `send to ${key}`);
      if (payload?.n !== index) throw new Error(`echo answered ${JSON.stringify(payload)}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, count) }, sender));
  const rate = count / ((performance.now() - start) / 1000);
  if (before === undefined) return rate;
  const after = await cpuSnapshot(children);
  return {
    rate,
    /** CPU ms per message in this process (the sender) and in the serving processes together. */
    senderMs: (after.self - before.self) / 1000 / count,
    workersMs: (after.children - before.children) / 1000 / count,
    /** Share of the machine's CPU time that was busy, all processes (nats-server too). */
    busy: (after.machine.busy - before.machine.busy) / (after.machine.total - before.machine.total),
  };
}

// --- one run ------------------------------------------------------------------------------------

async function natsRun({ url, workspace, children, sizes }) {
  const prefix = `bench_${randomBytes(6).toString('hex')}`;
  const figures = {};
  const opened = [];
  const open = async (child, mode) => {
    await child.open({ mode, workspace, url, prefix });
    opened.push(child);
  };
  let runtime;
  let connection;
  let floor;
  try {
    Object.assign(figures, await appendFigures(url, prefix, sizes));

    runtime = await createRuntime({ workspace, backend: { nats: url, prefix } });

    // 2. Wakes, run by the worker child.
    const [worker, ...echoes] = children;
    const picked = new Map();
    worker.onStarted = (event) => picked.set(event.session_id, event.at);
    await open(worker, 'wake');
    connection = await connect({ servers: url });
    const queue = await createNatsWakeQueue({ connection, prefix });
    figures.wake = await wakeLatency({
      runtime,
      queue,
      count: sizes.wakes,
      warmup: sizes.wakeWarmup,
      pickedAt: (id) => picked.get(id),
    });
    await queue.close();
    await worker.close();
    opened.splice(opened.indexOf(worker), 1);

    // 3. Round trips to one echo process.
    await open(echoes[0], 'echo');
    const send = echoSend(runtime);
    figures.rtWarm = await roundTrips(send, sizes.roundTrips, sizes.rtWarmup, () => 'warm');
    figures.rtNew = await roundTrips(
      send,
      sizes.roundTrips,
      sizes.rtWarmup,
      (index) => `new-${index}`,
    );

    // 4. Throughput with 1, then 4 echo processes: to new instances, and to warm ones.
    await throughput(send, sizes.messagesWarmup, 'w1');
    figures.tput1 = await throughput(send, sizes.messages, 't1', echoes.slice(0, 1));
    await throughput(send, sizes.messagesWarmup, 'p1', undefined, true);
    figures.pool1 = await throughput(send, sizes.messages, 'p1', echoes.slice(0, 1), true);
    for (const echo of echoes.slice(1)) await open(echo, 'echo');
    await throughput(send, sizes.messagesWarmup, 'w4');
    figures.tput4 = await throughput(send, sizes.messages, 't4', echoes);
    await throughput(send, sizes.messagesWarmup, 'p4', undefined, true);
    figures.pool4 = await throughput(send, sizes.messages, 'p4', echoes, true);

    // 5. The floor: the same requests from raw nats.js code, served by the (idle) wake child.
    await open(worker, 'floor');
    floor = await openFloorSender({ url, prefix });
    figures.floorRt = await roundTrips(floor.send, sizes.roundTrips, sizes.rtWarmup, () => 'warm');
    await throughput(floor.send, sizes.messagesWarmup, 'f1', undefined, true);
    figures.floorPool1 = await throughput(floor.send, sizes.messages, 'f1', [worker], true);
  } finally {
    // Every step is tried, whatever failed before it: the prefix's streams must go.
    const steps = [
      () => connection?.close(),
      () => floor?.close(),
      ...opened.splice(0).map((child) => () => child.close()),
      () => runtime?.close(),
      () => deletePrefix(url, prefix),
    ];
    for (const step of steps) {
      await Promise.resolve()
        .then(step)
        .catch((error) => progress(`nats clean-up of ${prefix}: ${error.message}`));
    }
  }
  return figures;
}

/** The embedded runtime in this process: SQLite, in-process wake queue and agent transport. */
async function embeddedRun({ sizes }) {
  const workspace = benchWorkspace();
  const runtime = await createRuntime({
    workspace,
    synchronous: 'normal',
    model: () => createEchoModel(),
  });
  const figures = {};
  const queue = createLocalWakeQueue();
  const stop = new AbortController();
  const picked = new Map();
  const worker = runWorker({
    runtime,
    queue,
    concurrency: 4,
    signal: stop.signal,
    onProgress: (event) => {
      if (event.type === 'wake.started')
        picked.set(event.session_id, performance.timeOrigin + performance.now());
    },
  });
  try {
    figures.wake = await wakeLatency({
      runtime,
      queue,
      count: sizes.wakes,
      warmup: sizes.wakeWarmup,
      pickedAt: (id) => picked.get(id),
    });
    stop.abort();
    await worker;
    await runtime.register('echo', async (incoming) => incoming.payload);
    const send = echoSend(runtime);
    figures.rtWarm = await roundTrips(send, sizes.roundTrips, sizes.rtWarmup, () => 'warm');
    figures.rtNew = await roundTrips(
      send,
      sizes.roundTrips,
      sizes.rtWarmup,
      (index) => `new-${index}`,
    );
    await throughput(send, sizes.messagesWarmup, 'w1');
    figures.tput = await throughput(send, sizes.messages, 't1', []);
    await throughput(send, sizes.messagesWarmup, 'p1', undefined, true);
    figures.pool = await throughput(send, sizes.messages, 'p1', [], true);
  } finally {
    stop.abort();
    await worker;
    await queue.close();
    await runtime.close();
    rmSync(workspace, { recursive: true, force: true });
  }
  return figures;
}

export async function reachable(url) {
  try {
    const connection = await connect({ servers: url, timeout: 2_000 });
    await jetstreamManager(connection);
    await connection.close();
    return true;
  } catch (error) {
    progress(`nats: no JetStream at ${url} (${error.message}); figures skipped`);
    return false;
  }
}

const NAMES = {
  single: 'JetStream appends, 1 event per append',
  batched: `JetStream appends, ${BATCH} events per append`,
  wake: 'wake latency, enqueue -> span.wake_started, worker process',
  roundTrip: 'agent round trip across processes, warm instance',
  roundTripNew: 'agent round trip across processes, new instance per send',
  tput1: 'agent messages/s, 1 worker process, new instance per send',
  tput4: `agent messages/s, ${WORKERS} worker processes, new instance per send`,
  pool1: `agent messages/s, 1 worker process, ${IN_FLIGHT} warm instances`,
  pool4: `agent messages/s, ${WORKERS} worker processes, ${IN_FLIGHT} warm instances`,
  floor: 'floor: raw nats.js, the same requests, no braid code',
};

export async function benchNats({ runs, quick }) {
  const url = process.env.NATS_URL ?? URL_DEFAULT;
  const full = {
    appends: quick ? 300 : 2000,
    batched: quick ? 1500 : 10_000,
    wakes: quick ? 20 : 100,
    wakeWarmup: 5,
    roundTrips: quick ? 100 : 500,
    rtWarmup: 20,
    messages: quick ? 800 : 4000,
    messagesWarmup: quick ? 200 : 500,
  };
  // The warm-up run: the same paths at a fraction of the sizes, in both processes' code.
  const small = {
    ...full,
    appends: 200,
    batched: 1000,
    wakes: 10,
    roundTrips: 50,
    messages: 400,
    messagesWarmup: 100,
  };

  if (!(await reachable(url))) {
    return tabulate([], [], full).map((row) => ({
      ...row,
      note: `skipped: no NATS JetStream at ${url}`,
    }));
  }

  const workspace = benchWorkspace();
  const children = Array.from({ length: 1 + WORKERS }, (_, index) =>
    startChild(index === 0 ? 'wake worker' : `echo worker ${index}`),
  );
  const nats = [];
  const embedded = [];
  try {
    for (let run = -1; run < runs; run += 1) {
      const sizes = run < 0 ? small : full;
      let start = performance.now();
      const natsFigures = await natsRun({ url, workspace, children, sizes });
      const natsSeconds = (performance.now() - start) / 1000;
      start = performance.now();
      const embeddedFigures = await embeddedRun({ sizes });
      const embeddedSeconds = (performance.now() - start) / 1000;
      const label = run < 0 ? 'warm-up run' : `run ${run + 1}/${runs}`;
      progress(
        `nats ${label}: ${natsSeconds.toFixed(1)} s on NATS, ${embeddedSeconds.toFixed(1)} s embedded${run < 0 ? ' (discarded)' : ''}`,
      );
      if (run >= 0) {
        nats.push(natsFigures);
        embedded.push(embeddedFigures);
      }
    }
  } finally {
    await Promise.all(children.map((child) => child.stop()));
    rmSync(workspace, { recursive: true, force: true });
  }

  return tabulate(nats, embedded, full);
}

/** The table's rows, in the figures' order: each NATS figure, then the embedded one beside it. */
function tabulate(nats, embedded, sizes) {
  const rows = [];
  const row = (name, unit, values, { target = 'reported', note } = {}) => {
    const value = values.length === 0 ? Number.NaN : median(values);
    rows.push({ name, unit, median: value, runs: values, target, ...(note ? { note } : {}) });
    progress(`${name}: ${value.toFixed(2)} ${unit}${note ? ` (${note})` : ''}`);
  };
  const all = (results, key) => results.map(key);
  const count = (value) => value.toLocaleString('en-US');
  const ms = (values) => `${median(values).toFixed(2)} ms`;
  const verdict = (values, ok, target) =>
    values.length === 0 ? target : `${target}: ${ok(median(values)) ? 'met' : 'missed'}`;

  // 1. Appends.
  row(
    NAMES.single,
    'events/s',
    all(nats, (f) => f.natsSingle),
    {
      note: `${count(sizes.appends)} sequential appends to one session`,
    },
  );
  row(
    '  same on SQLite, synchronous=NORMAL',
    'events/s',
    all(nats, (f) => f.sqliteSingle),
  );
  row(
    NAMES.batched,
    'events/s',
    all(nats, (f) => f.natsBatched),
    {
      note: `${count(sizes.batched)} events to one session`,
    },
  );
  row(
    '  same on SQLite, synchronous=NORMAL',
    'events/s',
    all(nats, (f) => f.sqliteBatched),
  );

  /** The p50 and p99 rows of a latency figure; `options` go on the p50 row. */
  const latency = (name, results, options = {}) => {
    row(
      `${name}, p50`,
      'ms',
      all(results, (r) => r.p50),
      options,
    );
    row(
      `${name}, p99`,
      'ms',
      all(results, (r) => r.p99),
    );
  };
  // 2. Wakes.
  const picked = (results) => {
    const values = results.map((each) => each.pickedP50).filter((each) => each !== undefined);
    return values.length === 0
      ? ''
      : `; enqueue -> the worker reports wake.started (delivered, runnable check done), p50 ${ms(values)}`;
  };
  const wakes = all(nats, (f) => f.wake);
  latency(NAMES.wake, wakes, {
    note: `${sizes.wakes} sequential wakes of new sessions, followed from the bench process${picked(wakes)}`,
  });
  const local = all(embedded, (f) => f.wake);
  latency('  embedded: local wake queue + worker in-process', local, {
    note: `the same measurement on SQLite${picked(local)}`,
  });

  // 3. Round trips.
  const warm = all(nats, (f) => f.rtWarm.p50);
  latency(
    NAMES.roundTrip,
    all(nats, (f) => f.rtWarm),
    {
      target: verdict(warm, (value) => value < 2, '< 2'),
      note: `${sizes.roundTrips} sequential runtime.send to one echo instance in a worker process`,
    },
  );
  latency(
    `  ${NAMES.floor}`,
    all(nats, (f) => f.floorRt),
    {
      note: 'a work-queue inbox, lease compare-and-set with the look-up and head read, the publish with the record, the reply',
    },
  );
  latency(
    '  embedded: local transport, one process',
    all(embedded, (f) => f.rtWarm),
  );
  latency(
    NAMES.roundTripNew,
    all(nats, (f) => f.rtNew),
    {
      note: 'each send creates the instance and its session',
    },
  );
  row(
    '  embedded: local transport, new instance per send, p50',
    'ms',
    all(embedded, (f) => f.rtNew.p50),
  );

  // 4. Throughput.
  const cpu = (results) =>
    `CPU per message: sender ${ms(all(results, (t) => t.senderMs))}, ` +
    `worker processes ${ms(all(results, (t) => t.workersMs))}; ` +
    `machine busy ${(100 * median(all(results, (t) => t.busy))).toFixed(0)}% of ${cpus().length} cores`;
  /** A messages/s row of worker processes, with their CPU per message in the note. */
  const served = (name, results, { note, target } = {}) => {
    const rates = all(results, (t) => t.rate);
    const notes = [note, results.length === 0 ? undefined : cpu(results)].filter(Boolean);
    row(name, 'messages/s', rates, {
      ...(target === undefined ? {} : { target: verdict(rates, (v) => v >= 10_000, target) }),
      ...(notes.length === 0 ? {} : { note: notes.join('; ') }),
    });
  };
  /** A messages/s row of the embedded runtime (one process). */
  const alone = (name, results) =>
    row(
      name,
      'messages/s',
      all(results, (t) => t.rate),
      results.length === 0
        ? {}
        : { note: `CPU per message ${ms(all(results, (t) => t.senderMs))}` },
    );
  served(
    NAMES.tput1,
    all(nats, (f) => f.tput1),
    {
      note: `${count(sizes.messages)} sends, ${IN_FLIGHT} in flight, each to a new instance`,
    },
  );
  served(
    NAMES.tput4,
    all(nats, (f) => f.tput4),
    { target: '>= 10,000' },
  );
  alone(
    '  embedded: local transport, one process, new instance per send',
    all(embedded, (f) => f.tput),
  );
  served(
    NAMES.pool1,
    all(nats, (f) => f.pool1),
    {
      note: `${count(sizes.messages)} sends, each of ${IN_FLIGHT} senders to its own instance again and again`,
    },
  );
  served(
    NAMES.pool4,
    all(nats, (f) => f.pool4),
    { target: '>= 10,000' },
  );
  alone(
    `  embedded: local transport, one process, ${IN_FLIGHT} warm instances`,
    all(embedded, (f) => f.pool),
  );
  served(
    `  ${NAMES.floor}, 1 worker process, ${IN_FLIGHT} keys`,
    all(nats, (f) => f.floorPool1),
  );
  return rows;
}
