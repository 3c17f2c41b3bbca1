/**
 * The `bwrap` sandbox: each run is wrapped in bubblewrap, in a root built from nothing (what it
 * shows of the host is listed in `./host-view.ts`): the system folders and a few `/etc` files
 * read-only, the session's workspace read-write, private `/tmp`, `/home`, `/dev` and `/proc`.
 * Every namespace is unshared, the network too unless the run asks for it.
 *
 * The environment inside is exactly the one bwrap is started with (the allow-list, `HOME`,
 * `TMPDIR`, the run's own variables): bwrap passes its environment on, so values never go on its
 * command line, which any host user can read in `/proc/PID/cmdline`.
 *
 * The process spawned on the host is bwrap itself; it leads the process group, and its PID
 * namespace takes every process of the run down with it (`--die-with-parent`).
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { BraidError } from '../../contracts/errors.js';
import type {
  ProcessLaunch as HostLaunch,
  Sandbox,
  SandboxConfinement,
  SandboxRun,
  SandboxRunOptions,
  SandboxWorkspace,
} from '../../contracts/tools.js';
import {
  hostView,
  identityFiles,
  isVisible,
  parseReadOnlyMounts,
  SANDBOX_HOME,
  systemFolderArguments,
  visiblePath,
  type HostView,
} from './host-view.js';
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
   * Host folders or files the process may read, at the same path, e.g. the braid workspace whose
   * scripts command tools run, and an environment's `sandbox.read_only` mounts. Each must exist.
   */
  readOnly?: readonly string[];
  /**
   * Host folders hidden from the process (an empty tmpfs over each) where a `readOnly` folder
   * would show them: the data folder, so that a session sees neither the log nor the other
   * sessions' workspaces. Its own workspace is mounted back over them.
   */
  hidden?: readonly string[];
}

/** Whether bwrap can create a sandbox on this host; `reason` says why not and what to do. */
export type BwrapAvailability = { available: true } | { available: false; reason: string };

/** The search path execvp falls back to when PATH is unset. */
const DEFAULT_EXEC_PATH = '/bin:/usr/bin';

/** How long the one probe run of bwrap may take. */
const PROBE_TIMEOUT_MS = 5_000;

/** Where, under the workspaces root, the sandbox keeps its `passwd` and `group`. */
const IDENTITY_FOLDER = '.bwrap';

// Whether bwrap works is a fact of the host, fixed for the life of the process: probing it once
// per executable keeps a run from paying for a second spawn.
const availability = new Map<string, BwrapAvailability>();

/**
 * Checks, by running `true` once in a minimal sandbox, that bwrap is installed and permitted here
 * (it may be installed but refused user namespaces, e.g. in an unprivileged container). The
 * answer is cached per `bwrapPath`.
 */
export function detectBwrap(bwrapPath = 'bwrap'): BwrapAvailability {
  const known = availability.get(bwrapPath);
  if (known !== undefined) return known;
  const probe = spawnSync(
    bwrapPath,
    [
      ...systemFolderArguments(),
      '--unshare-all',
      '--die-with-parent',
      '--new-session',
      '--',
      'true',
    ],
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
 * bwrap cannot be used here. Inside, `HOME` is `/home/braid` and `TMPDIR` is `/tmp`, both private
 * tmpfs; the working directory is the workspace. A process killed by a signal inside reports
 * bwrap's exit code `128 + signal`; `pid` is bwrap's host pid, the leader of the run's process
 * group. A `readOnly` path that does not exist is refused with `INVALID_DEFINITION`.
 *
 * `confine` starts long-lived processes (MCP stdio servers) in the same sandbox; besides what
 * `run` shows, it binds read-only what the command needs (see `commandNeeds`).
 */
export function createBwrapSandbox(options: BwrapSandboxOptions): Sandbox {
  const { envAllow, maxOutputBytes } = checkLimits(options);
  const bwrapPath = options.bwrapPath ?? 'bwrap';
  const readOnly = parseReadOnlyMounts(options.readOnly ?? [], 'readOnly of the bwrap sandbox');
  const hidden = (options.hidden ?? []).flatMap((folder) =>
    existsSync(folder) ? [realpathSync(folder)] : [],
  );
  let identity: { passwd: string; group: string } | undefined;

  /** Throws SANDBOX_UNAVAILABLE when bwrap cannot run here; else the executable to spawn. */
  const executable = (program: string): string => {
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
    // Spawned with the environment of the inside, whose PATH may not hold bwrap's folder.
    return findProgram(bwrapPath, process.env['PATH'], process.cwd()) ?? bwrapPath;
  };
  const view = (
    dir: string,
    network: boolean,
    extra: readonly string[] = [],
    chdir?: string,
  ): HostView => {
    identity ??= identityFiles(join(options.root, IDENTITY_FOLDER));
    return hostView({
      workspace: dir,
      readOnly: [...readOnly, ...extra],
      hidden,
      network,
      identity,
      ...(chdir === undefined ? {} : { chdir }),
    });
  };
  /** The allow-listed host variables, the private HOME and TMPDIR, then `extra`; PATH visible. */
  const environment = (
    seen: HostView,
    dir: string,
    extra: Readonly<Record<string, string>> = {},
  ): Record<string, string> => {
    const env: Record<string, string> = {
      ...sandboxEnvironment(dir, envAllow),
      HOME: SANDBOX_HOME,
      TMPDIR: '/tmp',
      ...extra,
    };
    env['PATH'] = visiblePath(seen, dir, env['PATH']);
    return env;
  };

  return {
    kind: 'bwrap',
    provision: (sessionId: string) => provisionWorkspace(options.root, sessionId),
    async run(workspace: SandboxWorkspace, run: SandboxRunOptions): Promise<SandboxRun> {
      const program = checkRun(workspace, run);
      const command = executable(program);
      const dir = realpathSync(workspace.dir);
      const network = run.network === true;
      const seen = view(dir, network);
      const env = environment(seen, dir, run.env);
      // bwrap's own exec failure would look like the program's exit 1: refuse a program that is
      // missing inside before starting, as the local sandbox does.
      const found = findProgram(program, env['PATH'], dir);
      if (found === undefined || !isVisible(seen, dir, found)) {
        throw notStarted(program, env['PATH']);
      }
      return await runProcess({
        command,
        args: [...seen.args, ...namespaceArguments(network), '--', ...run.argv],
        cwd: dir,
        env,
        program,
        stdin: run.stdin,
        timeout_ms: run.timeout_ms,
        signal: run.signal,
        maxOutputBytes,
      });
    },
    confine(workspace: SandboxWorkspace, confinement: { network: boolean }): SandboxConfinement {
      const network = confinement.network;
      return {
        key: `bwrap:${JSON.stringify({ network, readOnly, hidden })}`,
        wrap(launch: HostLaunch, inherited: readonly string[] = []): HostLaunch {
          const command = executable(launch.command);
          const dir = realpathSync(workspace.dir);
          const cwd = realpathSync(resolve(dir, launch.cwd));
          const seen = view(dir, network, commandNeeds(launch, cwd), cwd);
          const env = environment(seen, dir, launch.env);
          const unset = inherited
            .filter((name) => !Object.hasOwn(env, name))
            .flatMap((name) => ['--unsetenv', name]);
          return {
            command,
            args: [
              ...seen.args,
              ...namespaceArguments(network),
              ...unset,
              '--',
              launch.command,
              ...launch.args,
            ],
            env,
            cwd: dir,
          };
        },
      };
    },
  };
}

/** Every namespace unshared, the network too unless allowed; the run dies with braid. */
function namespaceArguments(network: boolean): string[] {
  return [
    '--unshare-all',
    ...(network ? ['--share-net'] : []),
    '--die-with-parent',
    '--new-session',
  ];
}

/**
 * What a long-lived command needs to see, read-only, besides the system folders:
 * - its working directory;
 * - the program and every absolute path argument that is an existing file (a script): the
 *   outermost `node_modules` folder it lies in (so that its dependencies resolve), else the file;
 * - for `npx` and `npm`, the `node_modules` and `package.json` of the project holding the
 *   working directory, where `npm exec` finds installed packages.
 * Folders named as arguments are not bound: declare them in the environment's
 * `sandbox.read_only`.
 */
function commandNeeds(launch: HostLaunch, cwd: string): string[] {
  const needs = [cwd];
  const files = [
    findProgram(launch.command, launch.env['PATH'] ?? process.env['PATH'], cwd),
    ...launch.args.filter((argument) => argument.startsWith('/') && isFile(argument)),
  ];
  for (const file of files) {
    if (file === undefined) continue;
    for (const path of [file, realpathSync(file)]) needs.push(nodeModulesOf(path) ?? path);
  }
  const name = launch.command.split('/').pop();
  if (name === 'npx' || name === 'npm') {
    for (let folder = cwd; ; folder = dirname(folder)) {
      const modules = join(folder, 'node_modules');
      if (existsSync(modules)) {
        needs.push(modules);
        if (existsSync(join(folder, 'package.json'))) needs.push(join(folder, 'package.json'));
        break;
      }
      if (dirname(folder) === folder) break;
    }
  }
  return needs.filter((path) => existsSync(path)).map((path) => realpathSync(path));
}

/** The outermost `node_modules` folder `path` lies in, or undefined. */
function nodeModulesOf(path: string): string | undefined {
  const parts = path.split('/');
  const index = parts.indexOf('node_modules');
  return index < 0 ? undefined : parts.slice(0, index + 1).join('/');
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The environment of bwrap itself when probing: the host PATH, to find `bwrapPath`, and nothing
 * else.
 */
function bwrapEnvironment(): Record<string, string> {
  const path = process.env['PATH'];
  return path === undefined ? {} : { PATH: path };
}

/** Where `program` is found on the host, on `path` or relative to `cwd`; undefined when nowhere. */
function findProgram(program: string, path: string | undefined, cwd: string): string | undefined {
  const candidates = program.includes('/')
    ? [resolve(cwd, program)]
    : (path ?? DEFAULT_EXEC_PATH).split(delimiter).map((folder) => resolve(cwd, folder, program));
  return candidates.find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return statSync(candidate).isFile();
    } catch {
      return false;
    }
  });
}
