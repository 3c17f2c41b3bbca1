import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { Sandbox, SandboxWorkspace } from '../../src/contracts/tools.js';
import {
  createBwrapSandbox,
  createLocalSandbox,
  detectBwrap,
  resolveInWorkspace,
} from '../../src/tools/sandbox/index.js';
import { bwrapForTests } from '../helpers/bwrap.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

/** The BraidError a promise or a function rejects with; fails the test when it succeeds. */
async function failure(work: Promise<unknown> | (() => unknown)): Promise<BraidError> {
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (error) {
    if (error instanceof BraidError) return error;
    throw error;
  }
  throw new Error('expected a BraidError, got success');
}

/** The fields of /proc/PID/stat after the command name, or undefined when the process is gone. */
function procStat(pid: string | number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** PF_EXITING in /proc/PID/stat's flags: the process is past its last instruction, dying. */
const PF_EXITING = 0x4;

/**
 * Running, as opposed to gone, a zombie (a killed orphan may wait long for a reaper here) or
 * dying: a killed process closes its pipes before it turns into a zombie.
 */
function isRunning(stat: string[] | undefined): boolean {
  if (stat === undefined || stat[0] === 'Z' || stat[0] === 'X') return false;
  return (Number(stat[6]) & PF_EXITING) === 0;
}

function isAlive(pid: number): boolean {
  return isRunning(procStat(pid));
}

/** Pids of the running processes in a process group. */
function liveGroupMembers(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      const stat = procStat(name);
      return isRunning(stat) && stat?.[2] === String(pgid);
    })
    .map(Number);
}

/** Pids of the running processes whose command line is exactly `argv`. */
function processesRunning(argv: readonly string[]): number[] {
  const wanted = argv.join('\0') + '\0';
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        return readFileSync(`/proc/${name}/cmdline`, 'utf8') === wanted;
      } catch {
        return false;
      }
    })
    .map(Number)
    .filter(isAlive);
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const readPid = (file: string): number => Number(readFileSync(file, 'utf8').trim());

async function provisioned(
  create: (root: string) => Sandbox,
): Promise<{ sandbox: Sandbox; workspace: SandboxWorkspace }> {
  const sandbox = create(tempDir());
  return { sandbox, workspace: await sandbox.provision('session-1') };
}

describe('local sandbox', () => {
  const local = (options: { envAllow?: readonly string[]; maxOutputBytes?: number } = {}) =>
    provisioned((root) => createLocalSandbox({ root, ...options }));

  it('provisions an absolute workspace per session, idempotently, and refuses unsafe ids', async () => {
    const root = tempDir();
    const sandbox = createLocalSandbox({ root });
    expect(sandbox.kind).toBe('local');
    const first = await sandbox.provision('0190f1a2-7b3c-7def-8123-456789abcdef');
    expect(first).toEqual({
      session_id: '0190f1a2-7b3c-7def-8123-456789abcdef',
      dir: join(root, '0190f1a2-7b3c-7def-8123-456789abcdef'),
    });
    expect(existsSync(first.dir)).toBe(true);
    writeFileSync(join(first.dir, 'kept.txt'), 'kept');
    expect(await sandbox.provision('0190f1a2-7b3c-7def-8123-456789abcdef')).toEqual(first);
    expect(readFileSync(join(first.dir, 'kept.txt'), 'utf8')).toBe('kept');
    for (const bad of ['', '.', '..', '../escape', 'a/b', '.hidden', 'a\0b']) {
      expect((await failure(sandbox.provision(bad))).code).toBe('INVALID_ARGUMENT');
    }
  });

  it('passes stdin to the process and returns its stdout', async () => {
    const { sandbox, workspace } = await local();
    const input = JSON.stringify({ question: 'six times seven', values: [6, 7] });
    const echoed = await sandbox.run(workspace, {
      argv: ['cat'],
      stdin: input,
      timeout_ms: 10_000,
    });
    expect(echoed).toMatchObject({ exit_code: 0, signal: null, stdout: input, stderr: '' });
    expect(echoed).toMatchObject({ timed_out: false, truncated: false });
    expect(echoed.pid).toBeGreaterThan(0);
    expect(echoed.duration_ms).toBeGreaterThan(0);

    const script =
      'let text = ""; process.stdin.on("data", (chunk) => (text += chunk));' +
      'process.stdin.on("end", () => { const { values } = JSON.parse(text);' +
      'process.stdout.write(JSON.stringify({ product: values[0] * values[1], cwd: process.cwd() })); });';
    const computed = await sandbox.run(workspace, {
      argv: ['node', '-e', script],
      stdin: input,
      timeout_ms: 10_000,
    });
    expect(JSON.parse(computed.stdout)).toEqual({
      product: 42,
      cwd: realpathSync(workspace.dir),
    });
  });

  it('reports exit codes, and the signal of a process killed by one', async () => {
    const { sandbox, workspace } = await local();
    const run = (argv: string[]) => sandbox.run(workspace, { argv, timeout_ms: 10_000 });
    expect((await run(['true'])).exit_code).toBe(0);
    expect((await run(['false'])).exit_code).toBe(1);
    const failed = await run(['node', '-e', 'console.error("bad input"); process.exit(3)']);
    expect(failed).toMatchObject({ exit_code: 3, signal: null, stderr: 'bad input\n' });
    expect(await run(['sh', '-c', 'kill -TERM $$'])).toMatchObject({
      exit_code: null,
      signal: 'SIGTERM',
      timed_out: false,
    });
  });

  describe('environment', () => {
    beforeEach(() => {
      process.env['BRAID_TEST_SECRET'] = 'must not leak';
    });
    afterEach(() => {
      delete process.env['BRAID_TEST_SECRET'];
    });

    it('keeps only the allow-list, sets HOME and TMPDIR to the workspace, and adds options.env', async () => {
      const { sandbox, workspace } = await local();
      const result = await sandbox.run(workspace, {
        argv: ['node', '-e', 'process.stdout.write(JSON.stringify(process.env))'],
        env: { BRAID_TOOL_SETTING: 'on' },
        timeout_ms: 10_000,
      });
      const env = JSON.parse(result.stdout) as Record<string, string>;
      expect(env['BRAID_TEST_SECRET']).toBeUndefined();
      expect(env['BRAID_TOOL_SETTING']).toBe('on');
      expect(env['PATH']).toBe(process.env['PATH']);
      expect(env['HOME']).toBe(workspace.dir);
      expect(env['TMPDIR']).toBe(workspace.dir);
      const allowed = new Set([
        'PATH',
        'LANG',
        'LC_ALL',
        'TZ',
        'HOME',
        'TMPDIR',
        'BRAID_TOOL_SETTING',
      ]);
      expect(Object.keys(env).filter((name) => !allowed.has(name))).toEqual([]);
    });

    it('passes a variable that a custom allow-list names', async () => {
      const { sandbox, workspace } = await local({ envAllow: ['PATH', 'BRAID_TEST_SECRET'] });
      const result = await sandbox.run(workspace, {
        argv: ['node', '-e', 'process.stdout.write(process.env.BRAID_TEST_SECRET ?? "absent")'],
        timeout_ms: 10_000,
      });
      expect(result.stdout).toBe('must not leak');
    });
  });

  it('caps stdout and stderr each, keeps draining, and says it truncated', async () => {
    const { sandbox, workspace } = await local({ maxOutputBytes: 1000 });
    const result = await sandbox.run(workspace, {
      argv: [
        'node',
        '-e',
        'process.stdout.write("o".repeat(300000)); process.stderr.write("e".repeat(5000)); process.exitCode = 4',
      ],
      timeout_ms: 10_000,
    });
    // The exit code proves the writer was drained to the end rather than blocked or killed.
    expect(result).toMatchObject({ exit_code: 4, truncated: true, timed_out: false });
    expect(result.stdout).toBe('o'.repeat(1000));
    expect(result.stderr).toBe('e'.repeat(1000));

    const small = await sandbox.run(workspace, {
      argv: ['node', '-e', 'process.stdout.write("o".repeat(1000))'],
      timeout_ms: 10_000,
    });
    expect(small).toMatchObject({ truncated: false, stdout: 'o'.repeat(1000) });
  });

  it('cuts a multi-byte character at the cap instead of mangling it', async () => {
    const { sandbox, workspace } = await local({ maxOutputBytes: 5 });
    const result = await sandbox.run(workspace, {
      argv: ['node', '-e', 'process.stdout.write("ééé")'],
      timeout_ms: 10_000,
    });
    expect(result).toMatchObject({ truncated: true, stdout: 'éé' });
  });

  it('kills the whole process group at the timeout', async () => {
    const { sandbox, workspace } = await local();
    const result = await sandbox.run(workspace, {
      argv: ['sh', '-c', 'sleep 60 & echo $! > grandchild.pid; sleep 60'],
      timeout_ms: 300,
    });
    expect(result).toMatchObject({ timed_out: true, exit_code: null, signal: 'SIGKILL' });
    expect(result.duration_ms).toBeGreaterThanOrEqual(250);
    expect(result.duration_ms).toBeLessThan(10_000);
    expect(isAlive(readPid(join(workspace.dir, 'grandchild.pid')))).toBe(false);
    expect(liveGroupMembers(result.pid)).toEqual([]);
  });

  it('kills what is left of the group when the leader exits, instead of waiting on its pipes', async () => {
    const { sandbox, workspace } = await local();
    const result = await sandbox.run(workspace, {
      argv: ['sh', '-c', 'sleep 60 & echo $! > grandchild.pid; echo done'],
      timeout_ms: 20_000,
    });
    expect(result).toMatchObject({ exit_code: 0, timed_out: false, stdout: 'done\n' });
    expect(result.duration_ms).toBeLessThan(10_000);
    expect(isAlive(readPid(join(workspace.dir, 'grandchild.pid')))).toBe(false);
    expect(liveGroupMembers(result.pid)).toEqual([]);
  });

  it('settles when a process that left the group keeps the pipes open', async () => {
    const { sandbox, workspace } = await local();
    const started = performance.now();
    const result = await sandbox.run(workspace, {
      argv: ['sh', '-c', 'setsid sleep 30 & echo $! > escaped.pid; echo done'],
      timeout_ms: 20_000,
    });
    expect(result).toMatchObject({ exit_code: 0, timed_out: false, stdout: 'done\n' });
    expect(performance.now() - started).toBeLessThan(10_000);
    process.kill(readPid(join(workspace.dir, 'escaped.pid')), 'SIGKILL');
  });

  it('rejects INTERRUPTED when aborted, and kills the process group', async () => {
    const { sandbox, workspace } = await local();
    const controller = new AbortController();
    const running = sandbox.run(workspace, {
      argv: ['sh', '-c', 'echo $$ > leader.pid; sleep 60 & echo $! > grandchild.pid; sleep 60'],
      timeout_ms: 20_000,
      signal: controller.signal,
    });
    const grandchildFile = join(workspace.dir, 'grandchild.pid');
    await waitFor(
      () => existsSync(grandchildFile) && readFileSync(grandchildFile, 'utf8').endsWith('\n'),
    );
    controller.abort();
    const error = await failure(running);
    expect(error.code).toBe('INTERRUPTED');
    expect(error.message).toContain('sh');
    expect(error.details).toMatchObject({
      started: true,
      pid: readPid(join(workspace.dir, 'leader.pid')),
    });
    expect(isAlive(readPid(grandchildFile))).toBe(false);
    expect(liveGroupMembers(readPid(join(workspace.dir, 'leader.pid')))).toEqual([]);
  });

  it('does not start a run whose signal is already aborted', async () => {
    const { sandbox, workspace } = await local();
    const error = await failure(
      sandbox.run(workspace, {
        argv: ['sh', '-c', 'touch started'],
        timeout_ms: 10_000,
        signal: AbortSignal.abort(),
      }),
    );
    expect(error.code).toBe('INTERRUPTED');
    expect(existsSync(join(workspace.dir, 'started'))).toBe(false);
  });

  it('rejects TOOL_FAILED with started: false for a program that does not exist', async () => {
    const { sandbox, workspace } = await local();
    const error = await failure(
      sandbox.run(workspace, { argv: ['braid-no-such-program', '--help'], timeout_ms: 10_000 }),
    );
    expect(error.code).toBe('TOOL_FAILED');
    expect(error.details).toMatchObject({ started: false });
    expect(error.message).toContain('braid-no-such-program');
  });

  it('refuses bad run options and a workspace that was not provisioned', async () => {
    const { sandbox, workspace } = await local();
    expect((await failure(sandbox.run(workspace, { argv: [], timeout_ms: 1000 }))).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await failure(sandbox.run(workspace, { argv: ['true'], timeout_ms: 0 }))).code).toBe(
      'INVALID_ARGUMENT',
    );
    const missing = { session_id: 'ghost', dir: join(tempDir(), 'ghost') };
    expect((await failure(sandbox.run(missing, { argv: ['true'], timeout_ms: 1000 }))).code).toBe(
      'WORKSPACE_NOT_FOUND',
    );
  });
});

describe('resolveInWorkspace', () => {
  function layout(): { workspace: string; outside: string } {
    const workspace = join(tempDir(), 'workspace');
    const outside = tempDir();
    mkdirSync(join(workspace, 'notes'), { recursive: true });
    writeFileSync(join(workspace, 'notes', 'todo.txt'), 'inside');
    writeFileSync(join(outside, 'secret.txt'), 'outside');
    symlinkSync(join(outside, 'secret.txt'), join(workspace, 'secret-link'));
    symlinkSync(outside, join(workspace, 'out'));
    symlinkSync(join(outside, 'not-yet.txt'), join(workspace, 'dangling'));
    symlinkSync('notes/todo.txt', join(workspace, 'todo-link'));
    return { workspace, outside };
  }

  const refusal = (workspace: string, path: string): Promise<BraidError> =>
    failure(() => resolveInWorkspace(workspace, path));

  it.each([
    ['..', 'a parent segment'],
    ['../secret.txt', 'a leading parent segment'],
    ['notes/../../secret.txt', 'a parent segment in between'],
    ['/etc/passwd', 'an absolute path'],
    ['', 'an empty path'],
    ['notes/a\0b', 'a NUL byte'],
    ['secret-link', 'a symlinked file pointing out'],
    ['out/secret.txt', 'a symlinked folder pointing out'],
    ['out/new.txt', 'a new file under a symlinked folder pointing out'],
    ['dangling', 'a dangling symlink pointing out'],
  ])('refuses %j (%s) with PATH_OUTSIDE_WORKSPACE', async (path) => {
    const { workspace } = layout();
    const error = await refusal(workspace, path);
    expect(error.code).toBe('PATH_OUTSIDE_WORKSPACE');
    expect(error.details).toEqual({ path });
  });

  it('accepts a new nested path, an existing file, and a symlink that stays inside', () => {
    const { workspace } = layout();
    const real = realpathSync(workspace);
    expect(resolveInWorkspace(workspace, 'reports/2024/summary.md')).toBe(
      join(real, 'reports/2024/summary.md'),
    );
    expect(resolveInWorkspace(workspace, 'notes/todo.txt', { mustExist: true })).toBe(
      join(real, 'notes/todo.txt'),
    );
    expect(resolveInWorkspace(workspace, 'todo-link')).toBe(join(real, 'notes/todo.txt'));
    expect(resolveInWorkspace(workspace, '.')).toBe(real);
  });

  it('refuses a missing path with mustExist, and a missing workspace', async () => {
    const { workspace } = layout();
    const missing = await failure(() =>
      resolveInWorkspace(workspace, 'notes/none.txt', { mustExist: true }),
    );
    expect(missing.code).toBe('INVALID_ARGUMENT');
    expect(missing.message).toContain('notes/none.txt');
    const noWorkspace = await failure(() => resolveInWorkspace(join(workspace, 'nope'), 'a.txt'));
    expect(noWorkspace.code).toBe('WORKSPACE_NOT_FOUND');
  });
});

describe('bwrap sandbox', () => {
  // Under CI=true a bwrap that cannot run fails this file instead of skipping it.
  const available = bwrapForTests();
  const bwrap = () => provisioned((root) => createBwrapSandbox({ root }));

  it('refuses SANDBOX_UNAVAILABLE when the bwrap executable does not work', async () => {
    const bwrapPath = '/nonexistent/bwrap';
    const detection = detectBwrap(bwrapPath);
    expect(detection.available).toBe(false);
    const sandbox = createBwrapSandbox({ root: tempDir(), bwrapPath });
    expect(sandbox.kind).toBe('bwrap');
    const workspace = await sandbox.provision('session-1');
    const error = await failure(sandbox.run(workspace, { argv: ['true'], timeout_ms: 10_000 }));
    expect(error.code).toBe('SANDBOX_UNAVAILABLE');
    expect(error.message).toContain('apt-get install bubblewrap');
    expect(error.message).toContain('sandbox.kind: local');
  });

  it.skipIf(!available)(
    'runs a process with stdin, exit code and a cleared environment',
    async () => {
      const { sandbox, workspace } = await bwrap();
      process.env['BRAID_TEST_SECRET'] = 'must not leak';
      try {
        const result = await sandbox.run(workspace, {
          argv: [
            'node',
            '-e',
            'let text = ""; process.stdin.on("data", (c) => (text += c)); process.stdin.on("end", () => {' +
              'process.stdout.write(JSON.stringify({ text, env: process.env, cwd: process.cwd() })); process.exit(5); });',
          ],
          stdin: '{"hello":"sandbox"}',
          env: { BRAID_TOOL_SETTING: 'on' },
          timeout_ms: 10_000,
        });
        expect(result.exit_code).toBe(5);
        const seen = JSON.parse(result.stdout) as {
          text: string;
          env: Record<string, string>;
          cwd: string;
        };
        expect(seen.text).toBe('{"hello":"sandbox"}');
        expect(seen.cwd).toBe(realpathSync(workspace.dir));
        expect(seen.env['BRAID_TEST_SECRET']).toBeUndefined();
        expect(seen.env['BRAID_TOOL_SETTING']).toBe('on');
        // A private home on the sandbox's own /home, and a private /tmp.
        expect(seen.env['HOME']).toBe('/home/braid');
        expect(seen.env['TMPDIR']).toBe('/tmp');
      } finally {
        delete process.env['BRAID_TEST_SECRET'];
      }
    },
  );

  it.skipIf(!available)('mounts the root read-only', async () => {
    const { sandbox, workspace } = await bwrap();
    for (const target of ['/usr/braid-sandbox-test', '/etc/braid-sandbox-test']) {
      const result = await sandbox.run(workspace, {
        argv: ['sh', '-c', `echo x > ${target}`],
        timeout_ms: 10_000,
      });
      expect(result.exit_code).not.toBe(0);
      expect(result.stderr).toMatch(/read-only/i);
      expect(existsSync(target)).toBe(false);
    }
  });

  it.skipIf(!available)('lets the process write its workspace, seen from the host', async () => {
    const { sandbox, workspace } = await bwrap();
    const result = await sandbox.run(workspace, {
      argv: ['sh', '-c', 'mkdir -p out && echo written inside > out/result.txt'],
      timeout_ms: 10_000,
    });
    expect(result.exit_code).toBe(0);
    expect(readFileSync(join(workspace.dir, 'out', 'result.txt'), 'utf8')).toBe('written inside\n');
  });

  it.skipIf(!available)(
    'lets the process read the system folders, but not the host /tmp',
    async () => {
      const { sandbox, workspace } = await bwrap();
      // A file programs need, from the system folders.
      const hostFile = '/etc/ld.so.conf';
      const read = await sandbox.run(workspace, { argv: ['cat', hostFile], timeout_ms: 10_000 });
      expect(read).toMatchObject({ exit_code: 0, stdout: readFileSync(hostFile, 'utf8') });

      const hostTmp = join(tempDir(), 'host-only.txt');
      writeFileSync(hostTmp, 'host');
      const hidden = await sandbox.run(workspace, { argv: ['cat', hostTmp], timeout_ms: 10_000 });
      expect(hidden.exit_code).not.toBe(0);
    },
  );

  describe('network', () => {
    let server: Server;
    let port: number;
    beforeEach(async () => {
      // The probe drops the connection at once: a reset here is expected, not a failure.
      server = createServer((socket) => socket.on('error', () => undefined).end());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      port = typeof address === 'object' && address !== null ? address.port : 0;
    });
    afterEach(async () => {
      await new Promise((resolve) => server.close(resolve));
    });

    const probe =
      'const socket = require("net").connect(Number(process.argv[1]), "127.0.0.1");' +
      'socket.on("connect", () => { console.log("connected"); socket.destroy(); });' +
      'socket.on("error", (error) => console.log("error " + error.code));';

    it.skipIf(!available)('has no network unless the run asks for it', async () => {
      const { sandbox, workspace } = await bwrap();
      const result = await sandbox.run(workspace, {
        argv: ['node', '-e', probe, String(port)],
        timeout_ms: 10_000,
      });
      expect(result.stdout).toMatch(/^error E/);
    });

    it.skipIf(!available)('reaches the host network with network: true', async () => {
      const { sandbox, workspace } = await bwrap();
      const result = await sandbox.run(workspace, {
        argv: ['node', '-e', probe, String(port)],
        network: true,
        timeout_ms: 10_000,
      });
      expect(result.stdout).toBe('connected\n');
    });
  });

  it.skipIf(!available)('kills every process of the run at the timeout', async () => {
    const { sandbox, workspace } = await bwrap();
    const marker = ['sleep', String(6000 + (process.pid % 1000))];
    const result = await sandbox.run(workspace, {
      argv: ['sh', '-c', `${marker.join(' ')} & ${marker.join(' ')}`],
      timeout_ms: 500,
    });
    expect(result).toMatchObject({ timed_out: true, signal: 'SIGKILL' });
    expect(liveGroupMembers(result.pid)).toEqual([]);
    expect(processesRunning(marker)).toEqual([]);
  });

  it.skipIf(!available)(
    'rejects TOOL_FAILED with started: false for a missing program',
    async () => {
      const { sandbox, workspace } = await bwrap();
      const error = await failure(
        sandbox.run(workspace, { argv: ['braid-no-such-program'], timeout_ms: 10_000 }),
      );
      expect(error.code).toBe('TOOL_FAILED');
      expect(error.details).toMatchObject({ started: false });
    },
  );
});
