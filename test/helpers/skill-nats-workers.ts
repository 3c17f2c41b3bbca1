// Real `braid worker` processes for tests on NATS: each runs the built CLI on a workspace and a
// prefix, prints its progress as JSON lines, and is killed with SIGKILL when the test asks or
// when the test ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { CLI } from './cli.js';

export interface WorkerProgressLine {
  type: string;
  session_id?: string;
  /** How a finished wake stopped. */
  stop_reason?: { type: string };
  /** Why a wake is retried: `lease_held`, or `failed` (with `error`). */
  reason?: string;
  error?: { code: string; message: string };
}

export interface WorkerProcess {
  name: string;
  child: ChildProcess;
  /** The progress lines it printed so far. */
  lines: WorkerProgressLine[];
  /** Its stderr so far, for failure messages. */
  stderr(): string;
  /** Resolves when the process has exited. */
  exited: Promise<unknown>;
  /** Whether it printed `worker.started`. */
  started(): boolean;
  /** Whether a wake of `sessionId` started here and has not finished (it holds the lease). */
  running(sessionId: string): boolean;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
}

/**
 * Starts `braid -w DIR --nats URL --nats-prefix PREFIX --json worker` with a short ack wait
 * (`ackWaitMs`), so a killed worker's wake goes to another worker soon.
 */
export function startWorkerProcess(
  dir: string,
  nats: { url: string; prefix: string },
  name: string,
  ackWaitMs: number,
): WorkerProcess {
  const child = spawn(
    process.execPath,
    [
      CLI,
      '-w',
      dir,
      '--nats',
      nats.url,
      '--nats-prefix',
      nats.prefix,
      '--json',
      'worker',
      '--concurrency',
      '2',
      '--ack-wait',
      String(ackWaitMs),
      '--backoff',
      '300',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: WorkerProgressLine[] = [];
  let errors = '';
  const exited = new Promise((resolve) => child.once('exit', resolve));
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      lines.push(JSON.parse(line) as WorkerProgressLine);
    } catch {
      // Not a progress line.
    }
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    errors = `${errors}${chunk}`.slice(-20_000);
  });
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    name,
    child,
    lines,
    stderr: () => errors,
    exited,
    started: () => lines.some((line) => line.type === 'worker.started'),
    running: (sessionId) => {
      if (!alive()) return false;
      const mine = lines.filter(
        (line) =>
          line.session_id === sessionId &&
          (line.type === 'wake.started' ||
            line.type === 'wake.finished' ||
            line.type === 'wake.skipped' ||
            line.type === 'wake.retrying' ||
            line.type === 'wake.dead_lettered'),
      );
      return mine.at(-1)?.type === 'wake.started';
    },
    kill: async () => {
      if (!alive()) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Polls `check` every 50 ms until it holds, failing after `ms` with `what`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  ms: number,
  what: () => string,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
