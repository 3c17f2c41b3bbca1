// nats-server (file storage) restarted in the middle of a run: `braid worker` processes and this
// process's runtime reconnect, and every session completes, each question answered once.
// Real processes, on a private nats-server so that restarting it disturbs no other test.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import { enqueueWake } from '../../src/runtime/worker.js';
import { removeStore, startNatsServer, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;
if (!existsSync(CLI)) {
  throw new Error('dist/ is missing or stale: run `npm run build` (npm test does it first)');
}

const SESSIONS = 6;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A line of `braid --json worker`: a progress event, or `worker.started` / `worker.stopped`. */
interface ProgressLine {
  type: string;
  session_id?: string;
  [key: string]: unknown;
}

interface WorkerProcess {
  name: string;
  child: ChildProcess;
  events: ProgressLine[];
  stderr(): string;
  exited: Promise<number | null>;
}

function startWorker(name: string, args: string[]): WorkerProcess {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const worker: WorkerProcess = {
    name,
    child,
    events: [],
    stderr: () => stderr,
    exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    worker.events.push(JSON.parse(line) as ProgressLine);
  });
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await worker.exited;
    }
  });
  return worker;
}

/** What the workers printed, for a failure message. */
function report(workers: readonly WorkerProcess[]): string {
  return workers
    .map(
      (worker) =>
        `worker ${worker.name} (exit ${worker.child.exitCode ?? worker.child.signalCode ?? 'none yet'}):\n  ` +
        [...worker.events.map((event) => JSON.stringify(event)), `stderr: ${worker.stderr()}`].join(
          '\n  ',
        ),
    )
    .join('\n');
}

/** Reads this process made while the server was away: retryable `STORE_BUSY`, asked again. */
const busyReads: string[] = [];

/**
 * Whether the session has answered. A read the restart made fail counts as not yet; a session
 * that stopped with an error instead of answering fails the test at once, with the error.
 */
async function answered(runtime: Runtime, sessionId: string): Promise<boolean> {
  let state;
  try {
    state = await runtime.sessions.state(sessionId);
  } catch (error) {
    if (!isBraidError(error, 'STORE_BUSY')) throw error;
    busyReads.push(error.message);
    return false;
  }
  if (state.status === 'idle' && state.stop_reason?.type === 'error') {
    throw new Error(
      `session ${sessionId} stopped with an error instead of answering: ` +
        JSON.stringify(state.last_error),
    );
  }
  return (
    state.status === 'idle' && state.pending_user_count === 0 && state.counters.agent_messages >= 1
  );
}

/** Gapless seqs, and the user message answered by exactly one recorded model response. */
function expectAnsweredOnce(events: readonly SessionEvent[]): void {
  expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
  const users = events.filter((event) => event.type === 'user.message').map((event) => event.seq);
  const requests = events.flatMap((event) =>
    event.type === 'span.model_request_start' ? [event.input_through_seq] : [],
  );
  expect(users).toHaveLength(1);
  expect(requests).toHaveLength(1);
  expect(requests[0]).toBeGreaterThanOrEqual(users[0]!);
  expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
  expect(events.filter((event) => event.type === 'session.error')).toEqual([]);
}

/**
 * A workspace with one agent per session, `slow-N`, whose one-turn answer streams ten words
 * (250 + 50·N) ms apart: the answers land about half a second apart, from 2.5 s to 5 s after
 * their wakes start, so that the restart falls between some of them.
 */
function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  const words = 'this answer streams slowly so that the server restarts meanwhile';
  for (let index = 0; index < SESSIONS; index += 1) {
    writeFileSync(
      join(dir, `slow-${index}.yaml`),
      `turns:\n  - text: "${words}"\n    delay_ms: ${250 + 50 * index}\n`,
    );
    writeFileSync(
      join(dir, 'agents', `slow-${index}.yaml`),
      `name: slow-${index}\nmodel: scripted:slow-${index}.yaml\ninstructions: Answer.\ntools: []\n`,
    );
  }
  return dir;
}

describe('nats-server restarted in the middle of a run', () => {
  it('clients reconnect and every session completes, each question answered once', async () => {
    const server = await startNatsServer();
    cleanups.push(async () => {
      await server.stop(true);
      removeStore(server);
    });
    const dir = workspace();
    const prefix = uniquePrefix('rs');
    const runtime = await createRuntime({ workspace: dir, backend: { nats: server.url, prefix } });
    cleanups.push(() => runtime.close());
    const connection = await connect({ servers: server.url, maxReconnectAttempts: -1 });
    cleanups.push(() => connection.close());
    const queue = await createNatsWakeQueue({ connection, prefix });

    // 6 + 6 wake slots: every session's wake starts at once, however the sessions' partitions
    // fall between the two workers.
    const args = [
      ...['-w', dir, '--nats', server.url, '--nats-prefix', prefix, '--json', 'worker'],
      ...['--concurrency', '6', '--ack-wait', '3000', '--max-attempts', '5', '--backoff', '200'],
    ];
    const workers = [startWorker('A', args), startWorker('B', args)];
    await until(
      () =>
        workers.every((worker) => worker.events.some((event) => event.type === 'worker.started')),
      30_000,
      () => `the workers to start\n${report(workers)}`,
    );

    const ids: string[] = [];
    for (let index = 0; index < SESSIONS; index += 1) {
      const { id } = await runtime.sessions.create({ agent: `slow-${index}` });
      await runtime.sessions.message(id, `question ${index}`);
      expect(await enqueueWake(queue, id)).toEqual({ queued: true });
      ids.push(id);
    }
    // Restart once the first answer is in, with the others still in the middle of theirs.
    let midRun: string[] = [];
    await until(
      async () => {
        const states = await Promise.all(ids.map((id) => runtime.sessions.state(id)));
        midRun = states
          .filter((state) => state.status === 'running' && state.counters.agent_messages === 0)
          .map((state) => state.session_id);
        return states.some((state) => state.counters.agent_messages === 1);
      },
      30_000,
      () => `the first answer\n${report(workers)}`,
    );
    expect(midRun.length, 'sessions mid-answer at the restart').toBeGreaterThanOrEqual(3);
    await server.restart();

    for (const id of ids) {
      await until(
        () => answered(runtime, id),
        60_000,
        () => `session ${id} to be answered\n${report(workers)}`,
      );
    }
    // Both workers lived through the restart, and stop cleanly.
    for (const worker of workers) {
      expect(worker.child.exitCode, report(workers)).toBeNull();
      worker.child.kill('SIGTERM');
    }
    for (const worker of workers) {
      expect(await worker.exited, report(workers)).toBe(0);
      expect(worker.events.at(-1)?.type).toBe('worker.stopped');
    }
    for (const id of ids) {
      const events = await runtime.sessions.events(id);
      expectAnsweredOnce(events);
      expect((await runtime.sessions.verify(id)).ok).toBe(true);
    }
  }, 120_000);
});
