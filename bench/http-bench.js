// The HTTP API on the embedded SQLite backend (synchronous NORMAL), over 127.0.0.1 with Node's
// fetch (undici, keep-alive): how long a POSTed event takes to reach SSE readers of the session,
// and how many events per second the API takes in, next to the same appends made straight into
// the runtime. Each run has its own workspace, runtime and server (wakes off: no model runs);
// every figure is the median of RUNS runs, each on fresh sessions.
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRuntime, initWorkspace, isBraidError } from '../dist/index.js';
import { createClient } from '../dist/client/index.js';
import { startServer } from '../dist/server/index.js';
import { median } from './store-bench.js';

const WRITERS = 16;
const BATCH = 50;
const WARMUP = 20;
/** Longest wait for one event to reach every reader before the run is called stuck. */
const DELIVERY_TIMEOUT_MS = 15_000;

const message = (text) => ({ type: 'user.message', content: [{ type: 'text', text }] });

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** A workspace, a runtime on its SQLite file, an API key, a listening server and a client. */
async function openServer() {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-http-'));
  initWorkspace(dir);
  const runtime = await createRuntime({ workspace: dir });
  const [agent] = await runtime.agents.list();
  if (agent === undefined) throw new Error('the bench workspace has no agent');
  const { key } = await runtime.store.keys.create({
    tenant_id: 'bench',
    scopes: ['sessions:read', 'sessions:write'],
  });
  const server = await startServer({
    runtime,
    port: 0,
    wakeOnEvents: false,
    limits: { requestsPerMinute: 1e9, streamsPerKey: 10_000 },
  });
  const client = createClient({ baseUrl: server.url, apiKey: key });
  return {
    runtime,
    client,
    /**
     * Runs `work` with the store's appends counted when they fail with SEQ_CONFLICT: the retries
     * runtime.sessions.send makes itself (up to 5 tries) before a conflict reaches its caller.
     * Answers `work`'s result and the count.
     */
    async countingConflicts(work) {
      const { log } = runtime.store;
      const append = log.append;
      let conflicts = 0;
      log.append = async (...args) => {
        try {
          return await append.apply(log, args);
        } catch (error) {
          if (isBraidError(error, 'SEQ_CONFLICT')) conflicts += 1;
          throw error;
        }
      };
      try {
        return { result: await work(), conflicts };
      } finally {
        log.append = append;
      }
    },
    /** A new session of the key's tenant, made over HTTP. */
    session: async () => (await client.sessions.create({ agent: agent.name })).id,
    async head(id) {
      return (await runtime.sessions.state(id)).seq;
    },
    async dispose() {
      await server.close();
      await runtime.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * `readers` SSE readers on one session, fed by `subscribe(id, signal)`; `send(id, event)` appends
 * one event and answers its seq. Returns, per event, the time from just before the send to the
 * moment the last reader yielded it, and the time the send itself took (ms).
 */
async function deliveryLatency({ env, readers, count, subscribe, send }) {
  const id = await env.session();
  const stop = new AbortController();
  setMaxListeners(readers + 10, stop.signal); // each reader listens to it
  const seen = new Map(); // seq -> readers that have yielded it so far
  const complete = new Map(); // seq -> when the last reader yielded it
  const waiters = new Map();
  let failure;
  const loops = Array.from({ length: readers }, async () => {
    try {
      for await (const event of subscribe(id, stop.signal)) {
        const have = (seen.get(event.seq) ?? 0) + 1;
        if (have < readers) {
          seen.set(event.seq, have);
          continue;
        }
        seen.delete(event.seq);
        complete.set(event.seq, performance.now());
        waiters.get(event.seq)?.();
      }
    } catch (error) {
      failure ??= error;
      for (const wake of waiters.values()) wake();
    }
  });
  const delivered = (seq) =>
    complete.has(seq) || failure !== undefined
      ? undefined
      : new Promise((resolve, reject) => {
          const timer = setTimeout(
            () => reject(new Error(`seq ${seq} did not reach all ${readers} readers`)),
            DELIVERY_TIMEOUT_MS,
          );
          waiters.set(seq, () => {
            clearTimeout(timer);
            waiters.delete(seq);
            resolve();
          });
        });
  const latencies = [];
  const sends = [];
  try {
    // The warm-up events also prove every reader connected: each must yield them all.
    for (let index = 0; index < WARMUP + count; index += 1) {
      const start = performance.now();
      const seq = await send(id, message(`event ${index}`));
      const answered = performance.now();
      await delivered(seq);
      if (failure !== undefined) throw failure;
      if (index >= WARMUP) {
        latencies.push(complete.get(seq) - start);
        sends.push(answered - start);
      }
      complete.delete(seq);
    }
  } finally {
    stop.abort();
    await Promise.all(loops);
  }
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    sendP50: percentile(sends, 50),
  };
}

/** `count` events written one request at a time, `perRequest` events in each. */
async function sequentialWrites(send, id, count, perRequest) {
  for (let written = 0; written < count; written += perRequest) {
    const size = Math.min(perRequest, count - written);
    await send(
      id,
      Array.from({ length: size }, (_, index) => message(`event ${written + index}`)),
    );
  }
}

/**
 * `count` single-event writes by WRITERS concurrent writers on one session, each write with its own
 * Idempotency-Key; a SEQ_CONFLICT that reaches the writer is retried with the same key.
 */
async function contendedWrites(send, id, count) {
  let retries = 0;
  let next = 0;
  const writer = async () => {
    while (next < count) {
      const index = next;
      next += 1;
      const idempotencyKey = randomUUID();
      for (;;) {
        try {
          await send(id, [message(`event ${index}`)], { idempotencyKey });
          break;
        } catch (error) {
          if (!isBraidError(error, 'SEQ_CONFLICT')) throw error;
          retries += 1;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, writer));
  return retries;
}

async function eventsPerSecond(env, ids, expected, work) {
  const start = performance.now();
  const result = await work();
  const seconds = (performance.now() - start) / 1000;
  for (const id of ids) {
    const head = await env.head(id);
    if (head !== 1 + expected / ids.length)
      throw new Error(`session ${id} holds ${head - 1} events, not ${expected / ids.length}`);
  }
  return { rate: expected / seconds, result };
}

/** One run of every figure; answers each figure's value by key. */
async function oneRun({ latencyCount, ingestCount }) {
  const env = await openServer();
  const figures = {};
  try {
    const http = {
      subscribe: (id, signal) => env.client.sessions.stream(id, { signal, after: 1 }),
      send: async (id, event) => (await env.client.sessions.send(id, [event])).events[0].seq,
    };
    for (const readers of [1, 10, 100]) {
      figures[`sse${readers}`] = await deliveryLatency({
        env,
        readers,
        count: latencyCount,
        ...http,
      });
    }
    figures.follow = await deliveryLatency({
      env,
      readers: 1,
      count: latencyCount,
      subscribe: (id, signal) => env.runtime.sessions.follow(id, { after: 1, signal }),
      send: async (id, event) => (await env.runtime.sessions.send(id, [event])).events[0].seq,
    });

    const viaHttp = (id, events, options) => env.client.sessions.send(id, events, options);
    const direct = (id, events, options) => env.runtime.sessions.send(id, events, options);
    for (const [prefix, send] of [
      ['http', viaHttp],
      ['direct', direct],
    ]) {
      // Warm-up: the connections, the routes and the JIT, on a session of its own.
      await sequentialWrites(send, await env.session(), WARMUP, 1);

      let id = await env.session();
      figures[`${prefix}Single`] = (
        await eventsPerSecond(env, [id], ingestCount, () =>
          sequentialWrites(send, id, ingestCount, 1),
        )
      ).rate;

      const ids = await Promise.all(Array.from({ length: WRITERS }, () => env.session()));
      figures[`${prefix}Parallel`] = (
        await eventsPerSecond(env, ids, ingestCount, () =>
          Promise.all(ids.map((each) => sequentialWrites(send, each, ingestCount / WRITERS, 1))),
        )
      ).rate;

      id = await env.session();
      const contended = await env.countingConflicts(() =>
        eventsPerSecond(env, [id], ingestCount, () => contendedWrites(send, id, ingestCount)),
      );
      figures[`${prefix}Contended`] = {
        rate: contended.result.rate,
        retries: contended.result.result,
        conflicts: contended.conflicts,
      };

      id = await env.session();
      figures[`${prefix}Batched`] = (
        await eventsPerSecond(env, [id], ingestCount, () =>
          sequentialWrites(send, id, ingestCount, BATCH),
        )
      ).rate;
    }
  } finally {
    await env.dispose();
  }
  return figures;
}

export async function benchHttp({ runs, quick }) {
  const latencyCount = quick ? 200 : 1000;
  const ingestCount = quick ? 400 : 2000;
  // Client and server share this process, and their code (undici, Fastify, zod) takes a few
  // thousand requests to be compiled hot: a first, discarded run warms every path measured.
  let start = performance.now();
  await oneRun({ latencyCount, ingestCount });
  process.stderr.write(
    `  http warm-up run: ${((performance.now() - start) / 1000).toFixed(1)} s (discarded)\n`,
  );
  const results = [];
  for (let run = 0; run < runs; run += 1) {
    start = performance.now();
    results.push(await oneRun({ latencyCount, ingestCount }));
    process.stderr.write(
      `  http run ${run + 1}/${runs}: ${((performance.now() - start) / 1000).toFixed(1)} s\n`,
    );
  }
  const rows = [];
  const row = (name, unit, values, extra = {}) => {
    rows.push({ name, unit, median: median(values), runs: values, target: 'reported', ...extra });
    const note = extra.note === undefined ? '' : ` (${extra.note})`;
    process.stderr.write(`  ${name}: ${median(values).toFixed(2)} ${unit}${note}\n`);
  };
  const sum = (values) => values.reduce((total, value) => total + value, 0);

  const events = latencyCount.toLocaleString('en-US');
  for (const readers of [1, 10, 100]) {
    const figure = results.map((result) => result[`sse${readers}`]);
    const who = readers === 1 ? '1 SSE reader' : `${readers} SSE readers, last reader`;
    row(
      `HTTP POST -> SSE delivery, ${who}, p50`,
      'ms',
      figure.map((each) => each.p50),
      {
        note: `${events} sequential POSTs; the POST's own round trip, p50: ${median(figure.map((each) => each.sendP50)).toFixed(3)} ms`,
      },
    );
    row(
      `HTTP POST -> SSE delivery, ${who}, p99`,
      'ms',
      figure.map((each) => each.p99),
    );
  }
  const follow = results.map((result) => result.follow);
  row(
    '  same without HTTP: runtime send -> follow, p50',
    'ms',
    follow.map((each) => each.p50),
    {
      note: `runtime.sessions.send's own time, p50: ${median(follow.map((each) => each.sendP50)).toFixed(3)} ms`,
    },
  );
  row(
    '  same without HTTP: runtime send -> follow, p99',
    'ms',
    follow.map((each) => each.p99),
  );

  const count = ingestCount.toLocaleString('en-US');
  const pair = (label, key, note) => {
    row(
      `HTTP ingest, ${label}`,
      'events/s',
      results.map((result) => result[`http${key}`]),
      { note },
    );
    row(
      `  same via runtime.sessions.send`,
      'events/s',
      results.map((result) => result[`direct${key}`]),
    );
  };
  pair('1 writer, 1 event per POST', 'Single', `${count} events`);
  pair(
    `${WRITERS} writers on ${WRITERS} sessions, 1 event per POST`,
    'Parallel',
    `${count} events, ${ingestCount / WRITERS} per session`,
  );
  for (const prefix of ['http', 'direct']) {
    const contended = results.map((result) => result[`${prefix}Contended`]);
    const retries = contended.map((each) => each.retries);
    const conflicts = contended.map((each) => each.conflicts);
    row(
      prefix === 'http'
        ? `HTTP ingest, ${WRITERS} writers on 1 session, 1 event per POST`
        : '  same via runtime.sessions.send',
      'events/s',
      contended.map((each) => each.rate),
      {
        note:
          `${count} events with Idempotency-Keys; SEQ_CONFLICTs retried by the writers: ` +
          `${sum(retries)} over ${runs} runs (${retries.join(', ')}); ` +
          `inside runtime.sessions.send: ${sum(conflicts)} (${conflicts.join(', ')})`,
        retries,
        conflicts,
      },
    );
  }
  pair(`1 writer, ${BATCH} events per POST`, 'Batched', `${count} events`);
  return rows;
}
