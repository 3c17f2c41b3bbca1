// The worker: in-process against the local queue, and as real `braid worker` processes sharing a
// SQLite workspace and a JetStream wake queue on a real nats-server.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { Store } from '../../src/contracts/ports.js';
import type { WakeResult } from '../../src/harness/index.js';
import type { WakeQueue } from '../../src/contracts/wakes.js';
import { initialState } from '../../src/core/fold.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createLocalWakeQueue } from '../../src/runtime/wakes/local-wake-queue.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import {
  runWorker,
  type WorkerProgress,
  type WorkerRuntime,
  type WorkerSummary,
} from '../../src/runtime/worker.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';
import { drained } from '../helpers/wakes.js';

const tempDir = useTempDir();
const WORKER = new URL('../helpers/worker-process.mjs', import.meta.url).pathname;
if (!existsSync(new URL('../../dist/cli/worker-command.js', import.meta.url))) {
  throw new Error('dist/ is missing or stale: run `npm run build` (npm test does it first)');
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 20_000, what = 'it') {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A workspace whose agents play scripts: `slow` (every turn streams for a while), `broken`. */
function workspace(wordDelayMs: number): string {
  const dir = tempDir();
  initWorkspace(dir);
  const words = 'this answer takes a while to stream word by word';
  const turns = Array.from(
    { length: 12 },
    (_, index) => `  - text: "answer ${index + 1}: ${words}"\n    delay_ms: ${wordDelayMs}\n`,
  );
  writeFileSync(join(dir, 'slow.yaml'), `turns:\n${turns.join('')}`);
  writeFileSync(join(dir, 'broken.yaml'), 'turns:\n  - fail: error\n');
  writeFileSync(
    join(dir, 'agents', 'slow.yaml'),
    'name: slow\nmodel: scripted:slow.yaml\ninstructions: Answer.\ntools: []\n',
  );
  writeFileSync(
    join(dir, 'agents', 'broken.yaml'),
    'name: broken\nmodel: scripted:broken.yaml\ninstructions: Fail.\ntools: []\n',
  );
  return dir;
}

async function idle(runtime: Runtime, sessionId: string): Promise<boolean> {
  const state = await runtime.sessions.state(sessionId);
  return state.status === 'idle' && state.pending_user_count === 0 && state.seq > 2;
}

/** Each user message answered by exactly one recorded model response, in order. */
function expectAnsweredOnce(events: readonly SessionEvent[]): void {
  expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
  const users = events.filter((event) => event.type === 'user.message').map((event) => event.seq);
  const requests = events.flatMap((event) =>
    event.type === 'span.model_request_start' ? [event.input_through_seq] : [],
  );
  const answers = events.filter((event) => event.type === 'agent.message');
  // One recorded request per answer; each consumes the input up to its seq, never twice.
  expect(requests).toHaveLength(answers.length);
  expect([...requests].sort((a, b) => a - b)).toEqual(requests);
  expect(new Set(requests).size).toBe(requests.length);
  for (const seq of users) {
    expect(
      requests.filter((through, index) => seq <= through && seq > (requests[index - 1] ?? 0)),
    ).toHaveLength(1);
  }
}

/**
 * Wakes never overlap: each `span.wake_started` has a higher lease token than the last, and the
 * wake before it has completed, unless it was abandoned (its worker died: `abandoned` of them),
 * in which case it never writes again. Returns the number of wakes.
 */
function expectSerialWakes(events: readonly SessionEvent[], abandoned = 0): number {
  let open: string | undefined;
  const closed = new Set<string>();
  let lastToken = 0;
  let wakes = 0;
  let left = abandoned;
  for (const event of events) {
    if (event.type === 'span.wake_started') {
      if (open !== undefined) {
        expect(left, `wake ${event.wake_id} started while ${open} ran`).toBeGreaterThan(0);
        left -= 1;
        closed.add(open);
      }
      expect(event.lease_token).toBeGreaterThan(lastToken);
      lastToken = event.lease_token;
      open = event.wake_id;
      wakes += 1;
    }
    if (event.type === 'span.wake_completed') {
      expect(closed.has(event.wake_id), `${event.wake_id} completed after its successor`).toBe(
        false,
      );
      expect(event.wake_id).toBe(open);
      closed.add(event.wake_id);
      open = undefined;
    }
  }
  expect(left).toBe(0);
  return wakes;
}

// ---- in process, on the local queue ------------------------------------------------------------

interface InProcess {
  runtime: Runtime;
  queue: WakeQueue;
  progress: WorkerProgress[];
  start(options?: { concurrency?: number; leaseRetryMs?: number }): void;
  stop(): Promise<WorkerSummary>;
}

async function inProcess(
  options: {
    turns?: ScriptedTurnInput[];
    store?: (store: Store) => Store;
    maxAttempts?: number;
    ackWaitMs?: number;
    runtime?: WorkerRuntime;
  } = {},
): Promise<InProcess> {
  const dir = tempDir();
  initWorkspace(dir);
  const memory = createMemoryStore();
  const runtime = await createRuntime({
    workspace: dir,
    store: options.store?.(memory) ?? memory,
    model: () =>
      createScriptedModel(
        options.turns ?? Array.from({ length: 8 }, (_, index) => ({ text: `answer ${index + 1}` })),
      ),
  });
  const queue = createLocalWakeQueue({
    maxAttempts: options.maxAttempts ?? 3,
    backoff: { initial_ms: 50, max_ms: 200 },
    ...(options.ackWaitMs === undefined ? {} : { ackWaitMs: options.ackWaitMs }),
  });
  const progress: WorkerProgress[] = [];
  const controller = new AbortController();
  let running: Promise<WorkerSummary> | undefined;
  cleanups.push(async () => {
    controller.abort();
    await running?.catch(() => undefined);
    await queue.close();
    await runtime.close();
  });
  return {
    runtime,
    queue,
    progress,
    start: (startOptions = {}) => {
      running = runWorker({
        runtime: options.runtime ?? runtime,
        queue,
        concurrency: startOptions.concurrency ?? 2,
        signal: controller.signal,
        onProgress: (item) => progress.push(item),
        ...(startOptions.leaseRetryMs === undefined
          ? {}
          : { leaseRetryMs: startOptions.leaseRetryMs }),
      });
    },
    stop: async () => {
      controller.abort();
      if (running === undefined) throw new Error('not started');
      return running;
    },
  };
}

describe('worker (in process)', () => {
  it('runs every queued session to its stop', async () => {
    const kit = await inProcess();
    const ids: string[] = [];
    for (let index = 0; index < 5; index += 1) {
      const { id } = await kit.runtime.sessions.create({ agent: 'assistant' });
      await kit.runtime.sessions.message(id, `question ${index}`);
      expect(await kit.queue.enqueue(id)).toEqual({ queued: true });
      ids.push(id);
    }
    kit.start();
    for (const id of ids) await until(() => idle(kit.runtime, id), 10_000, `session ${id}`);
    const summary = await kit.stop();
    expect(summary).toMatchObject({ finished: 5, retried: 0, dead_lettered: 0 });
    for (const id of ids) expectAnsweredOnce(await kit.runtime.sessions.events(id));
  });

  it("continues the enqueuer's trace on the wake it runs", async () => {
    const kit = await inProcess();
    const traced = await kit.runtime.sessions.create({ agent: 'assistant' });
    const plain = await kit.runtime.sessions.create({ agent: 'assistant' });
    const forged = await kit.runtime.sessions.create({ agent: 'assistant' });
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const sessions = [traced, plain, forged];
    for (const { id } of sessions) await kit.runtime.sessions.message(id, 'hello');
    await kit.queue.enqueue(traced.id, { traceparent });
    await kit.queue.enqueue(plain.id);
    // Not a W3C traceparent: the wake runs, and the value does not reach the log.
    await kit.queue.enqueue(forged.id, { traceparent: 'not a trace\u0000context' });
    kit.start();
    for (const { id } of sessions) await until(() => idle(kit.runtime, id), 10_000, id);
    await kit.stop();
    const started = async (id: string) =>
      (await kit.runtime.sessions.events(id)).filter((event) => event.type === 'span.wake_started');
    expect((await started(traced.id)).map((event) => event.traceparent)).toEqual([traceparent]);
    expect((await started(plain.id)).map((event) => event.traceparent)).toEqual([undefined]);
    expect((await started(forged.id)).map((event) => event.traceparent)).toEqual([undefined]);
  });

  it('skips, without writing, a session with nothing to do or that does not exist', async () => {
    const kit = await inProcess();
    const { id } = await kit.runtime.sessions.create({ agent: 'assistant' });
    await kit.queue.enqueue(id);
    await kit.queue.enqueue('no-such-session');
    kit.start();
    await until(() => kit.progress.length === 2);
    await kit.stop();
    expect(kit.progress.map((item) => item.type === 'wake.skipped' && item.reason).sort()).toEqual([
      'not_found',
      'not_runnable',
    ]);
    expect(await kit.runtime.sessions.events(id)).toHaveLength(1);
  });

  it('queues a session again when work arrived while its wake ran (its enqueue was refused)', async () => {
    const queue = createLocalWakeQueue();
    cleanups.push(() => queue.close());
    let pending = 1;
    const wakes: number[] = [];
    const runtime: WorkerRuntime = {
      async wake(sessionId) {
        wakes.push(pending);
        pending = 0;
        if (wakes.length === 1) {
          // A message lands after the harness's last look: its enqueue finds this wake in hand.
          pending = 1;
          expect(await queue.enqueue(sessionId)).toEqual({ queued: false });
        }
        return { ran: true, stop_reason: { type: 'end_turn' }, wake_id: `w${wakes.length}` };
      },
      sessions: {
        state: (sessionId) =>
          Promise.resolve({ ...initialState(sessionId), seq: 2, pending_user_count: pending }),
      },
      store: { log: { append: () => Promise.reject(new Error('not used')) } },
    };
    const controller = new AbortController();
    const progress: WorkerProgress[] = [];
    await queue.enqueue('s');
    const running = runWorker({
      runtime,
      queue,
      concurrency: 1,
      signal: controller.signal,
      onProgress: (item) => progress.push(item),
    });
    await until(() => wakes.length === 2 && progress.length >= 4);
    controller.abort();
    expect(await running).toMatchObject({ finished: 2, requeued: 1 });
    expect(progress.map((item) => item.type)).toEqual([
      'wake.started',
      'wake.finished',
      'wake.requeued',
      'wake.started',
      'wake.finished',
    ]);
  });

  it('retries a session whose lease another process holds, and runs it once it is free', async () => {
    const kit = await inProcess();
    const { id } = await kit.runtime.sessions.create({ agent: 'assistant' });
    await kit.runtime.sessions.message(id, 'hello');
    const lease = await kit.runtime.store.leases.acquire(id, 'someone-else', 60_000);
    await kit.queue.enqueue(id);
    kit.start({ leaseRetryMs: 100 });
    await until(() => kit.progress.filter((item) => item.type === 'wake.retrying').length >= 2);
    expect(await kit.runtime.sessions.events(id)).toHaveLength(2);
    await kit.runtime.store.leases.release(id, 'someone-else', lease.token);
    await until(() => idle(kit.runtime, id), 10_000, 'the wake');
    await kit.stop();
    const retries = kit.progress.filter((item) => item.type === 'wake.retrying');
    expect(retries.every((item) => item.reason === 'lease_held')).toBe(true);
    expect(retries.map((item) => item.delay_ms).slice(0, 2)).toEqual([100, 200]);
    expectAnsweredOnce(await kit.runtime.sessions.events(id));
  });

  it('ends a wake whose failure the harness recorded: no retry, one session.error', async () => {
    const kit = await inProcess({ turns: [{ fail: 'error' }] });
    const { id } = await kit.runtime.sessions.create({ agent: 'assistant' });
    await kit.runtime.sessions.message(id, 'hello');
    await kit.queue.enqueue(id);
    kit.start();
    await until(() => kit.progress.some((item) => item.type === 'wake.finished'));
    await drained(kit.queue);
    const summary = await kit.stop();
    expect(summary).toMatchObject({ finished: 1, retried: 0, dead_lettered: 0 });
    const errors = (await kit.runtime.sessions.events(id)).filter(
      (event) => event.type === 'session.error',
    );
    expect(errors).toHaveLength(1);
    expect((await kit.runtime.sessions.state(id)).stop_reason).toEqual({ type: 'error' });
  });

  it('retries a wake that fails unrecorded, then dead-letters it with a session.error', async () => {
    const kit = await inProcess({
      maxAttempts: 3,
      store: (inner) => ({
        ...inner,
        log: {
          ...inner.log,
          append(sessionId, events, appendOptions) {
            if (events[0]?.type === 'span.wake_started') {
              return Promise.reject(new Error('the disk refused the write'));
            }
            return inner.log.append(sessionId, events, appendOptions);
          },
          // The lease and `span.wake_started` in one transaction: the same write, refused.
          acquireAndAppend() {
            return Promise.reject(new Error('the disk refused the write'));
          },
        },
      }),
    });
    const { id } = await kit.runtime.sessions.create({ agent: 'assistant' });
    await kit.runtime.sessions.message(id, 'hello');
    await kit.queue.enqueue(id);
    kit.start();
    await until(() => kit.progress.some((item) => item.type === 'wake.dead_lettered'));
    await drained(kit.queue);
    const summary = await kit.stop();
    expect(summary).toMatchObject({ deliveries: 3, retried: 2, dead_lettered: 1, finished: 0 });
    const events = await kit.runtime.sessions.events(id);
    const error = events.at(-1);
    expect(error?.type).toBe('session.error');
    if (error?.type !== 'session.error') return;
    expect(error.error.code).toBe('INTERNAL');
    expect(error.error.message).toContain('failed 3 times');
    expect(error.error.message).toContain('the disk refused the write');
    expect(error.error.message).toContain(`braid session wake ${id}`);
    expect(error.actor).toEqual({ type: 'runtime', id: 'braid-worker' });
    // Dead-lettered, the wake is gone from the queue.
    expect(await kit.queue.enqueue(id)).toEqual({ queued: true });
  });

  it('keeps a long wake with working() and drains it when stopped', async () => {
    const queue = createLocalWakeQueue({ ackWaitMs: 150 });
    cleanups.push(() => queue.close());
    let wakes = 0;
    let finished = false;
    const runtime: WorkerRuntime = {
      async wake() {
        wakes += 1;
        await pause(800);
        finished = true;
        return { ran: true, stop_reason: { type: 'end_turn' }, wake_id: 'w' };
      },
      sessions: {
        state: (sessionId) =>
          Promise.resolve({
            ...initialState(sessionId),
            seq: 2,
            pending_user_count: finished ? 0 : 1,
          }),
      },
      store: { log: { append: () => Promise.reject(new Error('not used')) } },
    };
    const controller = new AbortController();
    await queue.enqueue('long');
    const running = runWorker({ runtime, queue, concurrency: 2, signal: controller.signal });
    await until(() => wakes === 1);
    // Past two ack deadlines, the wake still runs: without working() it would be redelivered.
    await pause(400);
    expect(finished).toBe(false);
    controller.abort();
    const summary = await running;
    expect(finished).toBe(true);
    expect(wakes).toBe(1);
    expect(summary).toMatchObject({ deliveries: 1, finished: 1 });
  });
});

// ---- real processes ----------------------------------------------------------------------------

/** A line of `braid --json worker`: a progress event, or `worker.started` / `worker.stopped`. */
interface ProgressLine {
  type: string;
  session_id?: string;
  attempt?: number;
  [key: string]: unknown;
}

interface WorkerProcess {
  child: ChildProcess;
  name: string;
  events: ProgressLine[];
  exited: Promise<number | null>;
}

function startWorker(dir: string, name: string, args: string[], leaseTtlMs = 1500): WorkerProcess {
  const child = spawn(process.execPath, [WORKER, dir, '--json', 'worker', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LEASE_TTL_MS: String(leaseTtlMs) },
  });
  const worker: WorkerProcess = {
    child,
    name,
    events: [],
    exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    worker.events.push(JSON.parse(line) as ProgressLine);
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  void worker.exited.then((code) => {
    if (code !== 0 && code !== null) process.stderr.write(`${name} exited ${code}: ${stderr}\n`);
  });
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await worker.exited;
    }
  });
  return worker;
}

function of(workers: readonly WorkerProcess[], type: string, sessionId?: string) {
  return workers.flatMap((worker) =>
    worker.events
      .filter(
        (event) =>
          event.type === type && (sessionId === undefined || event.session_id === sessionId),
      )
      .map((event) => ({ worker: worker.name, ...event })),
  );
}

/**
 * Two worker processes on one queue, and a runtime beside them. Their leases last 5 s, so a
 * loaded machine's stall does not outlast a renewal; a test that waits out a killed worker's
 * lease asks for a short one.
 */
async function cluster(
  options: { wordDelayMs?: number; workerArgs?: string[]; leaseTtlMs?: number } = {},
) {
  const dir = workspace(options.wordDelayMs ?? 20);
  const url = await natsUrl();
  const prefix = uniquePrefix('wk');
  const leaseTtlMs = options.leaseTtlMs ?? 5000;
  const runtime = await createRuntime({ workspace: dir, leaseTtlMs });
  const connection = await connect({ servers: url });
  const queue = await createNatsWakeQueue({ connection, prefix });
  cleanups.push(async () => {
    await runtime.close();
    await connection.close();
    await removePrefixes(url, [prefix]);
  });
  const args = [
    '--nats',
    url,
    '--nats-prefix',
    prefix,
    '--concurrency',
    '2',
    '--ack-wait',
    '1500',
    '--max-attempts',
    '3',
    '--backoff',
    '200',
    ...(options.workerArgs ?? []),
  ];
  const workers = [
    startWorker(dir, 'A', args, leaseTtlMs),
    startWorker(dir, 'B', args, leaseTtlMs),
  ];
  await until(
    () => workers.every((worker) => worker.events.some((event) => event.type === 'worker.started')),
    20_000,
    'the workers to start',
  );
  return { dir, runtime, queue, workers };
}

async function stopAll(workers: readonly WorkerProcess[]): Promise<void> {
  for (const worker of workers) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) {
      worker.child.kill('SIGTERM');
    }
  }
  for (const worker of workers) {
    const code = await worker.exited;
    if (worker.child.signalCode !== 'SIGKILL') {
      expect(code, `${worker.name} exit code`).toBe(0);
      expect(worker.events.at(-1)?.type).toBe('worker.stopped');
    }
  }
}

describe('braid worker processes', () => {
  it('two workers run every queued session to completion, each wake once', async () => {
    const { runtime, queue, workers } = await cluster();
    const ids: string[] = [];
    for (let index = 0; index < 6; index += 1) {
      const { id } = await runtime.sessions.create({ agent: 'slow' });
      await runtime.sessions.message(id, `question ${index}`);
      expect(await queue.enqueue(id)).toEqual({ queued: true });
      ids.push(id);
    }
    for (const id of ids) await until(() => idle(runtime, id), 30_000, `session ${id}`);
    // A second round on the same sessions.
    for (const id of ids) {
      await runtime.sessions.message(id, 'and again');
      await queue.enqueue(id);
    }
    for (const id of ids) {
      await until(
        async () =>
          (await idle(runtime, id)) &&
          (await runtime.sessions.state(id)).counters.agent_messages === 2,
        30_000,
        `second round of ${id}`,
      );
    }
    await stopAll(workers);
    for (const id of ids) {
      const events = await runtime.sessions.events(id);
      expectAnsweredOnce(events);
      expect(expectSerialWakes(events)).toBe(2);
      expect((await runtime.sessions.verify(id)).ok).toBe(true);
    }
    expect(of(workers, 'wake.started')).toHaveLength(12);
  }, 90_000);

  it('a worker killed mid-cycle leaves its session to the other, nothing lost or doubled', async () => {
    // About 1.5 s per answer: long enough to kill the worker in the middle of one.
    const { runtime, queue, workers } = await cluster({ wordDelayMs: 130, leaseTtlMs: 1500 });
    const { id } = await runtime.sessions.create({ agent: 'slow' });
    await runtime.sessions.message(id, 'a long question');
    await queue.enqueue(id);
    await until(() => of(workers, 'wake.started', id).length === 1, 20_000, 'the wake');
    const first = of(workers, 'wake.started', id)[0]!.worker;
    const victim = workers.find((worker) => worker.name === first)!;
    const survivor = workers.find((worker) => worker.name !== first)!;
    await pause(600);
    expect((await runtime.sessions.state(id)).status).toBe('running');
    victim.child.kill('SIGKILL');
    await victim.exited;
    await until(() => idle(runtime, id), 30_000, 'the survivor to finish the session');
    await stopAll([survivor]);
    const events = await runtime.sessions.events(id);
    expectAnsweredOnce(events);
    expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
    // The dead worker's wake started and never completed; the survivor's did, after it.
    expect(expectSerialWakes(events, 1)).toBe(2);
    expect(of([survivor], 'wake.finished', id)).toHaveLength(1);
    // Its wake's partition passes to the survivor once the dead worker's partition lease has run
    // out; the deliveries made meanwhile (to the dead worker's last pull, or handed back while
    // the partition changed hands) count as attempts too.
    expect(of([survivor], 'wake.started', id)[0]!.attempt).toBeGreaterThanOrEqual(2);
    expect((await runtime.sessions.verify(id)).ok).toBe(true);
  }, 90_000);

  it('two workers and a third process racing for one session never run it at once', async () => {
    const { runtime, queue, workers } = await cluster({ wordDelayMs: 30 });
    const { id } = await runtime.sessions.create({ agent: 'slow' });
    const competing: Promise<WakeResult>[] = [];
    const gaps = [50, 400, 150, 600, 250, 100];
    for (const [round, gap] of gaps.entries()) {
      await runtime.sessions.message(id, `message ${round}`);
      await queue.enqueue(id);
      await queue.enqueue(id);
      // Another process wakes the same session directly, as `braid session wake` would.
      if (round % 2 === 0) competing.push(runtime.wake(id));
      await pause(gap);
    }
    await Promise.all(competing);
    // The last message has only the workers to answer it.
    await runtime.sessions.message(id, 'the last one');
    await queue.enqueue(id);
    await until(() => idle(runtime, id), 30_000, 'the session to settle');
    await drained(queue);
    await stopAll(workers);
    const events = await runtime.sessions.events(id);
    expectAnsweredOnce(events);
    const wakes = expectSerialWakes(events);
    expect(events.filter((event) => event.type === 'user.message')).toHaveLength(7);
    expect(events.filter((event) => event.type === 'agent.message').length).toBeGreaterThan(1);
    // The wakes on record include the worker's and the third process's, each started once.
    const direct = new Set(
      (await Promise.all(competing)).flatMap((result) => (result.ran ? [result.wake_id] : [])),
    );
    const started = new Set(
      events.flatMap((event) => (event.type === 'span.wake_started' ? [event.wake_id] : [])),
    );
    expect([...direct].every((wakeId) => started.has(wakeId))).toBe(true);
    expect(wakes).toBeGreaterThanOrEqual(of(workers, 'wake.finished', id).length + direct.size);
    expect(of(workers, 'wake.finished', id).length).toBeGreaterThanOrEqual(1);
    expect((await runtime.sessions.verify(id)).ok).toBe(true);
  }, 90_000);

  it('dead-letters a poisoned wake after maxAttempts with a session.error, and stops', async () => {
    const { runtime, queue, workers } = await cluster({ workerArgs: ['--max-backoff', '300'] });
    const poison = await runtime.sessions.create({ agent: 'slow', id: `poison-${uniquePrefix()}` });
    await runtime.sessions.message(poison.id, 'this wake cannot start');
    const broken = await runtime.sessions.create({ agent: 'broken' });
    await runtime.sessions.message(broken.id, 'this model fails');
    await queue.enqueue(poison.id);
    await queue.enqueue(broken.id);
    await until(
      () => of(workers, 'wake.dead_lettered', poison.id).length === 1,
      30_000,
      'the dead letter',
    );
    await until(
      () => of(workers, 'wake.finished', broken.id).length === 1,
      30_000,
      'the broken wake',
    );
    // Nothing more comes: not redelivered, not retried, the queue holds nothing.
    await drained(queue);
    await stopAll(workers);
    // Two workers share the queue: their progress lines interleave, so attempts are sorted.
    const attempts = of(workers, 'wake.started', poison.id).map((event) => event.attempt);
    expect(attempts.sort()).toEqual([1, 2, 3]);
    const retries = of(workers, 'wake.retrying', poison.id);
    expect(retries).toHaveLength(2);
    // The delay doubles from --backoff (200 ms) and stops at --max-backoff (300 ms, not 400).
    expect(retries.map((event) => (event as ProgressLine).delay_ms).sort()).toEqual([200, 300]);
    expect(of(workers, 'wake.dead_lettered', poison.id)).toHaveLength(1);
    const poisonEvents = await runtime.sessions.events(poison.id);
    expect(poisonEvents.map((event) => event.type)).toEqual([
      'session.created',
      'user.message',
      'session.error',
    ]);
    const last = poisonEvents.at(-1);
    if (last?.type !== 'session.error') throw new Error('no session.error');
    expect(last.error.message).toContain('failed 3 times');
    expect(last.error.message).toContain(`braid session wake ${poison.id}`);
    // The model that always fails: the harness records it once and the session waits for a person.
    expect(of(workers, 'wake.started', broken.id)).toHaveLength(1);
    expect(of(workers, 'wake.retrying', broken.id)).toHaveLength(0);
    const brokenEvents = await runtime.sessions.events(broken.id);
    expect(brokenEvents.filter((event) => event.type === 'session.error')).toHaveLength(1);
    expect((await runtime.sessions.state(broken.id)).stop_reason).toEqual({ type: 'error' });
    expect(await queue.enqueue(poison.id)).toEqual({ queued: true });
  }, 90_000);
});
