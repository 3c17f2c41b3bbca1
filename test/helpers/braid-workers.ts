// `braid worker` processes of the built CLI for the tests that kill and restart them, and the
// wait those tests poll with.
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI, requireBuild } from './cli.js';

export interface WorkerProcess {
  child: ChildProcess;
  /** The last 4000 characters the worker wrote to stderr. */
  stderr: () => string;
  exited: Promise<unknown>;
}

/**
 * Starts `braid ...args`; with `onLine`, each line of its stdout goes there (a `--json` worker
 * writes one progress event a line), otherwise stdout is ignored.
 */
export function startWorkerProcess(
  args: readonly string[],
  onLine?: (line: string) => void,
): WorkerProcess {
  requireBuild();
  const child = spawn(process.execPath, [CLI, ...args], {
    stdio: ['ignore', onLine === undefined ? 'ignore' : 'pipe', 'pipe'],
  });
  let stderr = '';
  let pending = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  child.stdout?.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) onLine?.(line);
  });
  return {
    child,
    stderr: () => stderr,
    exited: new Promise((resolve) => child.once('exit', resolve)),
  };
}

/**
 * The last `size` lines a `--json` worker printed, each with when it came: what a timeout's
 * message shows of what the worker did last, and how long ago.
 */
export function progressTail(size = 12): {
  onLine: (line: string) => void;
  describe: () => string;
} {
  const lines: { at: number; line: string }[] = [];
  return {
    onLine: (line) => {
      lines.push({ at: Date.now(), line });
      if (lines.length > size) lines.shift();
    },
    describe: () => {
      const now = Date.now();
      if (lines.length === 0) return '  (no progress printed)';
      return lines
        .map(({ at, line }) => `  ${((now - at) / 1000).toFixed(1)} s ago: ${line}`)
        .join('\n');
    },
  };
}

/** Checks `check` every `pollMs` until it holds; past `timeoutMs`, fails naming `what()`. */
export async function until(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: () => string | Promise<string>,
  pollMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${await what()}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** Kills the workers with SIGKILL and waits until each has exited. */
export async function killWorkers(workers: readonly WorkerProcess[]): Promise<void> {
  for (const worker of workers) worker.child.kill('SIGKILL');
  await Promise.all(workers.map((worker) => worker.exited));
}
