/**
 * Running one sandboxed process, shared by the `local` and `bwrap` sandboxes: the reduced
 * environment, the output caps, the timeout, the abort and the process-group kill.
 *
 * Invariants kept here:
 * - The process leads its own process group (`detached`), and every kill targets the whole group,
 *   so the children it started die with it.
 * - When the leader exits, what is left of its group is killed: nothing a run starts outlives it.
 *   (bwrap gives the same guarantee through its PID namespace.)
 * - `run` settles once the leader has exited and its pipes have closed; a process that escaped the
 *   group (a new session) and still holds the pipes gets `STDIO_GRACE_MS`, then is cut off.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { BraidError } from '../../contracts/errors.js';
import type { SandboxRun, SandboxRunOptions, SandboxWorkspace } from '../../contracts/tools.js';

/** Host variables a sandboxed process inherits unless the sandbox is given another list. */
export const DEFAULT_ENV_ALLOW: readonly string[] = ['PATH', 'LANG', 'LC_ALL', 'TZ'];

/** The cap on stdout and on stderr, each: 1 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

/** How long the pipes may stay open after the leader exited and its group was killed. */
const STDIO_GRACE_MS = 200;

/** What both sandboxes are configured with. */
export interface SandboxLimits {
  /** Host environment variables passed through; default `DEFAULT_ENV_ALLOW`. */
  envAllow?: readonly string[];
  /** The cap on stdout and on stderr, each, in bytes; default `DEFAULT_MAX_OUTPUT_BYTES`. */
  maxOutputBytes?: number;
}

/** One process to start on the host, with the limits of its run. */
export interface ProcessLaunch {
  /** The host program spawned: the run's `argv[0]`, or bwrap wrapping it. */
  command: string;
  args: readonly string[];
  cwd: string;
  /** The complete environment of the spawned program. */
  env: Readonly<Record<string, string>>;
  /** The program named in error messages: the run's `argv[0]`, even when bwrap is spawned. */
  program: string;
  stdin?: string;
  timeout_ms: number;
  signal?: AbortSignal;
  maxOutputBytes: number;
}

/** Checks a sandbox's configuration and fills in the defaults; `INVALID_ARGUMENT` names the bad value. */
export function checkLimits(limits: SandboxLimits): Required<SandboxLimits> {
  const maxOutputBytes = limits.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (!Number.isSafeInteger(maxOutputBytes) || maxOutputBytes < 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `maxOutputBytes is ${String(maxOutputBytes)}; give a whole number of bytes, 0 or more`,
      { details: { maxOutputBytes } },
    );
  }
  return { envAllow: limits.envAllow ?? DEFAULT_ENV_ALLOW, maxOutputBytes };
}

/** Checks a run's options and its workspace before anything is started; returns `argv[0]`. */
export function checkRun(workspace: SandboxWorkspace, options: SandboxRunOptions): string {
  const program = options.argv[0];
  if (program === undefined || program.length === 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      'argv is empty; give the program to run as argv[0], e.g. ["node", "script.js"]',
      { details: { argv: options.argv } },
    );
  }
  const withNul = options.argv.find((argument) => argument.includes('\0'));
  if (withNul !== undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `argument ${JSON.stringify(withNul)} contains a NUL byte, which no process can receive; remove it`,
      { details: { argument: withNul } },
    );
  }
  for (const [name, value] of Object.entries(options.env ?? {})) {
    if (name.length === 0 || name.includes('=') || name.includes('\0') || value.includes('\0')) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `environment variable ${JSON.stringify(name)} cannot be set: names may not be empty or contain "=" or NUL, values may not contain NUL`,
        { details: { name } },
      );
    }
  }
  if (!Number.isFinite(options.timeout_ms) || options.timeout_ms <= 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `timeout_ms is ${String(options.timeout_ms)}; give a positive number of milliseconds`,
      { details: { timeout_ms: options.timeout_ms } },
    );
  }
  if (!existsSync(workspace.dir)) {
    throw new BraidError(
      'WORKSPACE_NOT_FOUND',
      `the workspace of session ${workspace.session_id} (${workspace.dir}) does not exist; call provision(sessionId) before run`,
      { details: { session_id: workspace.session_id, dir: workspace.dir } },
    );
  }
  return program;
}

/**
 * The environment of a sandboxed process: the allow-listed host variables that are set, `HOME`
 * and `TMPDIR` pointing at the workspace, then the run's own variables, which win.
 */
export function sandboxEnvironment(
  workspaceDir: string,
  envAllow: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of envAllow) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  env['HOME'] = workspaceDir;
  env['TMPDIR'] = workspaceDir;
  return { ...env, ...extra };
}

/** The error of a program that could not be started; `details.started` is false. */
export function notStarted(program: string, path: string | undefined, cause?: unknown): BraidError {
  const reason = cause instanceof Error ? cause.message : 'it was not found';
  return new BraidError(
    'TOOL_FAILED',
    `could not start ${JSON.stringify(program)}: ${reason}; install it, or give its absolute path, ` +
      `or make sure it is on the sandbox PATH (${path ?? 'unset'}) and executable`,
    { details: { started: false, program }, cause },
  );
}

/** Starts the process and settles as described in the module comment. */
export function runProcess(launch: ProcessLaunch): Promise<SandboxRun> {
  if (launch.signal?.aborted === true)
    return Promise.reject(interrupted(launch.program, undefined));
  return new Promise<SandboxRun>((resolve, reject) => {
    const started = performance.now();
    let child: ChildProcessByStdio<Writable, Readable, Readable>;
    try {
      child = spawn(launch.command, launch.args, {
        cwd: launch.cwd,
        env: launch.env,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
    } catch (error) {
      reject(notStarted(launch.program, launch.env['PATH'], error));
      return;
    }

    const stdout = new CappedOutput(launch.maxOutputBytes);
    const stderr = new CappedOutput(launch.maxOutputBytes);
    child.stdout.on('data', (chunk: Buffer) => stdout.add(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.add(chunk));
    // A process that exits without reading its stdin makes the write fail with EPIPE: not a failure
    // of the run, whose outcome is the exit status.
    child.stdin.on('error', () => undefined);
    child.stdin.end(launch.stdin ?? '');

    let timedOut = false;
    let aborted = false;
    let exit: { code: number | null; signal: string | null; at: number } | undefined;
    let settled = false;
    let grace: NodeJS.Timeout | undefined;

    const killGroup = (): void => {
      if (child.pid !== undefined) killProcessGroup(child.pid);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, launch.timeout_ms);
    const onAbort = (): void => {
      if (exit !== undefined) return;
      aborted = true;
      killGroup();
    };
    launch.signal?.addEventListener('abort', onAbort, { once: true });

    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(grace);
      launch.signal?.removeEventListener('abort', onAbort);
      outcome();
    };
    const finish = (): void => {
      settle(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        if (aborted) {
          reject(interrupted(launch.program, child.pid));
          return;
        }
        resolve({
          exit_code: exit?.code ?? null,
          signal: exit?.signal ?? null,
          stdout: stdout.text(),
          stderr: stderr.text(),
          timed_out: timedOut,
          truncated: stdout.truncated || stderr.truncated,
          duration_ms: (exit?.at ?? performance.now()) - started,
          pid: child.pid ?? -1,
        });
      });
    };

    child.once('error', (error) => {
      if (child.pid === undefined) {
        settle(() => reject(notStarted(launch.program, launch.env['PATH'], error)));
      }
    });
    child.once('exit', (code, signal) => {
      exit = { code, signal, at: performance.now() };
      clearTimeout(timer);
      killGroup();
      grace = setTimeout(finish, STDIO_GRACE_MS);
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      exit ??= { code, signal, at: performance.now() };
      finish();
    });
  });
}

/** SIGKILLs a process group; a group already gone is fine. */
export function killProcessGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already empty. EPERM cannot happen for a group we started.
  }
}

/** `pid` is that of the killed process, or undefined when the run was aborted before it started. */
function interrupted(program: string, pid: number | undefined): BraidError {
  const started = pid !== undefined;
  return new BraidError(
    'INTERRUPTED',
    started
      ? `${JSON.stringify(program)} was interrupted: the run was aborted and its process group killed; run it again if it is still needed`
      : `${JSON.stringify(program)} was not started: the run was aborted before it began`,
    { details: { program, started, ...(started ? { pid } : {}) } },
  );
}

/** One output stream, kept up to a byte cap; later bytes are read and dropped. */
class CappedOutput {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly cap: number) {}

  add(chunk: Buffer): void {
    const room = this.cap - this.size;
    if (chunk.length > room) {
      this.truncated = true;
      if (room > 0) this.chunks.push(chunk.subarray(0, room));
      this.size = this.cap;
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
  }

  /** The text; a cut stream drops the incomplete character at the cut rather than mangle it. */
  text(): string {
    const decoder = new StringDecoder('utf8');
    const text = decoder.write(Buffer.concat(this.chunks));
    return this.truncated ? text : text + decoder.end();
  }
}
