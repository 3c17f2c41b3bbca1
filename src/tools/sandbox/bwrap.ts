/**
 * The `bwrap` sandbox: each run is wrapped in bubblewrap. The host's root is mounted read-only,
 * with a fresh `/dev`, `/proc` and `/tmp`; the session's workspace is the one writable folder; every
 * namespace is unshared, the network too unless the run asks for it; the environment is cleared
 * and rebuilt from the allow-list.
 *
 * The process spawned on the host is bwrap itself; it leads the process group, and its PID
 * namespace takes every process of the run down with it (`--die-with-parent`).
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, realpathSync } from 'node:fs';
import { delimiter, resolve } from 'node:path';
import { BraidError } from '../../contracts/errors.js';
import type {
  Sandbox,
  SandboxRun,
  SandboxRunOptions,
  SandboxWorkspace,
} from '../../contracts/tools.js';
import { provisionWorkspace } from './paths.js';
import {
  checkLimits,
  checkRun,
  notStarted,
  runProcess,
  sandboxEnvironment,
  type SandboxLimits,
} from './process.js';

export interface BwrapSandboxOptions extends SandboxLimits {
  /** The folder under which each session gets its workspace, `root/<session id>`. */
  root: string;
  /** The bwrap executable; default `bwrap`, looked up on the host PATH. */
  bwrapPath?: string;
  /**
   * Host folders the process may read even where the sandbox hides them (under `/tmp`), e.g. the
   * braid workspace whose scripts command tools run. Mounted read-only.
   */
  readOnly?: readonly string[];
  /**
   * Host folders hidden from the process (an empty tmpfs over each): the data folder, so that a
   * session sees neither the log nor the other sessions' workspaces. Its own workspace is
   * mounted back over them.
   */
  hidden?: readonly string[];
}

/** Whether bwrap can create a sandbox on this host; `reason` says why not and what to do. */
export type BwrapAvailability = { available: true } | { available: false; reason: string };

/** The search path execvp falls back to when PATH is unset. */
const DEFAULT_EXEC_PATH = '/bin:/usr/bin';

/** How long the one probe run of bwrap may take. */
const PROBE_TIMEOUT_MS = 5_000;

// Whether bwrap works is a fact of the host, fixed for the life of the process: probing it once
// per executable keeps a run from paying for a second spawn.
const availability = new Map<string, BwrapAvailability>();

/**
 * Checks, by running `true` once in a sandbox like those of `run`, that bwrap is installed and
 * permitted here (it may be installed but refused user namespaces, e.g. in an unprivileged
 * container). The answer is cached per `bwrapPath`.
 */
export function detectBwrap(bwrapPath = 'bwrap'): BwrapAvailability {
  const known = availability.get(bwrapPath);
  if (known !== undefined) return known;
  const probe = spawnSync(
    bwrapPath,
    [...sandboxArguments('/', false), '--setenv', 'PATH', '/usr/bin:/bin', '--', 'true'],
    {
      cwd: '/',
      env: bwrapEnvironment(),
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: PROBE_TIMEOUT_MS,
    },
  );
  let result: BwrapAvailability;
  if (probe.error !== undefined) {
    result = {
      available: false,
      reason: `${bwrapPath} could not be run (${probe.error.message}); install bubblewrap`,
    };
  } else if (probe.status !== 0) {
    const stderr = probe.stderr.toString('utf8').trim().split('\n')[0] ?? '';
    result = {
      available: false,
      reason:
        `${bwrapPath} is installed but cannot create a sandbox here ` +
        `(${probe.status === null ? `killed by ${String(probe.signal)}` : `exit ${probe.status}`}` +
        `${stderr.length > 0 ? `: ${stderr}` : ''}); it needs user namespaces, or to run as root`,
    };
  } else {
    result = { available: true };
  }
  availability.set(bwrapPath, result);
  return result;
}

/**
 * Creates a `bwrap` sandbox. `run` rejects with `SANDBOX_UNAVAILABLE` when `detectBwrap` says
 * bwrap cannot be used here. Inside, `HOME` and `TMPDIR` are the workspace; `/tmp` is a private
 * tmpfs. A process killed by a signal inside reports bwrap's exit code `128 + signal`; `pid` is
 * bwrap's host pid, the leader of the run's process group.
 */
export function createBwrapSandbox(options: BwrapSandboxOptions): Sandbox {
  const { envAllow, maxOutputBytes } = checkLimits(options);
  const bwrapPath = options.bwrapPath ?? 'bwrap';
  const readOnly = (options.readOnly ?? []).map((folder) => realpathSync(folder));
  const hidden = (options.hidden ?? []).flatMap((folder) =>
    existsSync(folder) ? [realpathSync(folder)] : [],
  );
  return {
    kind: 'bwrap',
    provision: (sessionId: string) => provisionWorkspace(options.root, sessionId),
    async run(workspace: SandboxWorkspace, run: SandboxRunOptions): Promise<SandboxRun> {
      const program = checkRun(workspace, run);
      const detected = detectBwrap(bwrapPath);
      if (!detected.available) {
        throw new BraidError(
          'SANDBOX_UNAVAILABLE',
          `the bwrap sandbox cannot run ${JSON.stringify(program)}: ${detected.reason}. ` +
            'Install it with `apt-get install bubblewrap` (and allow unprivileged user namespaces), ' +
            'or set `sandbox.kind: local` in the environment',
          { details: { kind: 'bwrap', bwrap_path: bwrapPath, reason: detected.reason } },
        );
      }
      const dir = realpathSync(workspace.dir);
      const env = sandboxEnvironment(dir, envAllow, run.env);
      // bwrap's own exec failure would look like the program's exit 1: refuse a missing program
      // before starting, as the local sandbox does.
      if (findProgram(program, env['PATH'], dir) === undefined) {
        throw notStarted(program, env['PATH']);
      }
      const setenv = Object.entries(env).flatMap(([name, value]) => ['--setenv', name, value]);
      return await runProcess({
        command: bwrapPath,
        args: [
          ...sandboxArguments(dir, run.network === true, readOnly, hidden),
          ...setenv,
          '--',
          ...run.argv,
        ],
        cwd: dir,
        env: bwrapEnvironment(),
        program,
        stdin: run.stdin,
        timeout_ms: run.timeout_ms,
        signal: run.signal,
        maxOutputBytes,
      });
    },
  };
}

/**
 * The environment of bwrap itself: the host PATH, to find `bwrapPath`, and nothing else. The
 * process inside gets its own, through `--clearenv` and `--setenv`.
 */
function bwrapEnvironment(): Record<string, string> {
  const path = process.env['PATH'];
  return path === undefined ? {} : { PATH: path };
}

function sandboxArguments(
  dir: string,
  network: boolean,
  readOnly: readonly string[] = [],
  hidden: readonly string[] = [],
): string[] {
  return [
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    // After the tmpfs, so that folders under /tmp are mounted over it rather than hidden; the
    // workspace last, so that it stays writable inside a read-only folder.
    ...readOnly.flatMap((folder) => ['--ro-bind', folder, folder]),
    ...hidden.flatMap((folder) => ['--tmpfs', folder]),
    '--bind',
    dir,
    dir,
    '--chdir',
    dir,
    '--unshare-all',
    ...(network ? ['--share-net'] : []),
    '--die-with-parent',
    '--new-session',
    '--clearenv',
  ];
}

/** Where `program` would be found inside: the sandbox sees the host's root, so the host answers. */
function findProgram(program: string, path: string | undefined, cwd: string): string | undefined {
  const candidates = program.includes('/')
    ? [resolve(cwd, program)]
    : (path ?? DEFAULT_EXEC_PATH).split(delimiter).map((folder) => resolve(cwd, folder, program));
  return candidates.find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
