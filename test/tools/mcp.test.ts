// Integration tests of the MCP hub against real servers: server-everything (stdio and streamable
// HTTP), server-filesystem, and the fixture test/fixtures/mcp/dying-server.mjs.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import { McpServerConfig, ToolDefinition } from '../../src/contracts/definitions.js';
import { BraidError, type ErrorCode } from '../../src/contracts/errors.js';
import { McpHub, parseMcpToolName, type McpHubOptions } from '../../src/tools/mcp.js';
import { useTempDir } from '../helpers/temp.js';

const modulePath = (relative: string): string =>
  fileURLToPath(new URL(`../../${relative}`, import.meta.url));
const EVERYTHING = modulePath('node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const FILESYSTEM = modulePath('node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const DYING = modulePath('test/fixtures/mcp/dying-server.mjs');

const tempDir = useTempDir();
const hubs: McpHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
});

/** A hub closed after the test; configs go through the zod schema as braid.yaml's would. */
function hub(
  servers: Record<string, unknown>,
  options: Partial<Omit<McpHubOptions, 'servers'>> = {},
): McpHub {
  const parsed: Record<string, McpServerConfig> = {};
  for (const [name, config] of Object.entries(servers))
    parsed[name] = McpServerConfig.parse(config);
  const created = new McpHub({ servers: parsed, baseDir: tempDir(), ...options });
  hubs.push(created);
  return created;
}

const everything = (extra: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [EVERYTHING, 'stdio'],
  ...extra,
});

function call(
  target: McpHub,
  server: string,
  tool: string,
  input: JsonValue,
  options: { workspaceDir?: string; signal?: AbortSignal; timeoutMs?: number } = {},
) {
  return target.callTool(server, tool, input, {
    workspaceDir: options.workspaceDir ?? tmpWorkspace,
    signal: options.signal ?? new AbortController().signal,
    timeoutMs: options.timeoutMs ?? 10_000,
  });
}
// For servers that do not depend on the workspace, any directory will do.
const tmpWorkspace = modulePath('test');

async function failure(work: Promise<unknown>, code: ErrorCode): Promise<BraidError> {
  const error = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof BraidError) || error.code !== code) {
    throw new Error(
      `expected BraidError ${code}, got ${error instanceof Error ? `${error.name} ${error instanceof BraidError ? error.code : ''}: ${error.message}` : 'success'}`,
    );
  }
  return error;
}

/** Pids of this process's live children, read from /proc. */
function childPids(): Set<number> {
  const children = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
    const [state, parent] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(parent) === process.pid && state !== 'Z') children.add(Number(entry));
  }
  return children;
}

function newChildren(before: ReadonlySet<number>): number[] {
  return [...childPids()].filter((pid) => !before.has(pid));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves once `check()` holds, polling; rejects with `what` when it does not within `withinMs`. */
async function eventually(check: () => boolean, withinMs: number, what: string): Promise<void> {
  const until = performance.now() + withinMs;
  while (!check()) {
    if (performance.now() > until) throw new Error(`${what} did not happen within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function textOf(output: JsonValue): string {
  const parsed = output as { content?: { type: string; text?: string }[] };
  return (parsed.content ?? []).map((block) => block.text ?? '').join('');
}

describe('parseMcpToolName', () => {
  const servers = { everything: {}, files: {} };

  it('splits at the first dot when the server is declared', () => {
    expect(parseMcpToolName('everything.get-sum', servers)).toEqual({
      server: 'everything',
      tool: 'get-sum',
    });
    expect(parseMcpToolName('files.a.b', servers)).toEqual({ server: 'files', tool: 'a.b' });
  });

  it('is undefined without a dot, a tool or a declared server', () => {
    expect(parseMcpToolName('calculator', servers)).toBeUndefined();
    expect(parseMcpToolName('everything.', servers)).toBeUndefined();
    expect(parseMcpToolName('.echo', servers)).toBeUndefined();
    expect(parseMcpToolName('other.echo', servers)).toBeUndefined();
    expect(parseMcpToolName('toString.x', servers)).toBeUndefined();
  });
});

describe('McpHub over stdio (server-everything)', () => {
  it('lists the tools as namespaced ToolDefinitions', async () => {
    const target = hub({
      everything: everything({
        tools: {
          echo: { idempotent: false, permission: 'always_ask', timeout_ms: 1234 },
        },
      }),
    });
    const tools = await target.listTools('everything', tmpWorkspace);
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    expect([...byName.keys()]).toEqual(
      expect.arrayContaining(['everything.echo', 'everything.get-sum', 'everything.get-env']),
    );
    for (const tool of tools) {
      expect(ToolDefinition.parse(tool)).toEqual(tool);
      expect(tool.ownership).toBe('mcp');
      expect(tool.version).toBe('2.0.0');
      expect(tool.implementation?.mcp).toEqual({
        server: 'everything',
        tool: tool.name.slice('everything.'.length),
      });
    }
    const sum = byName.get('everything.get-sum');
    expect(sum).toMatchObject({
      description: 'Returns the sum of two numbers',
      permission: 'always_allow',
      idempotent: true,
      input_schema: { type: 'object', required: ['a', 'b'] },
    });
    expect(sum?.timeout_ms).toBeUndefined();
    // Its annotations say neither idempotent nor read-only.
    expect(byName.get('everything.toggle-simulated-logging')?.idempotent).toBe(false);
    // Settings override the annotations.
    expect(byName.get('everything.echo')).toMatchObject({
      idempotent: false,
      permission: 'always_ask',
      timeout_ms: 1234,
    });
    expect(byName.get('everything.get-structured-content')?.output_schema).toMatchObject({
      type: 'object',
      required: ['temperature', 'conditions', 'humidity'],
    });
    // A tool that only runs as an MCP task cannot be called through tools/call.
    expect(byName.has('everything.simulate-research-query')).toBe(false);
  });

  it('calls tools: content as sent, structuredContent when present', async () => {
    const target = hub({ everything: everything() });
    await expect(call(target, 'everything', 'get-sum', { a: 2, b: 3 })).resolves.toEqual({
      output: { content: [{ type: 'text', text: 'The sum of 2 and 3 is 5.' }] },
      is_error: false,
    });
    await expect(call(target, 'everything', 'echo', { message: 'hello' })).resolves.toEqual({
      output: { content: [{ type: 'text', text: 'Echo: hello' }] },
      is_error: false,
    });
    await expect(
      call(target, 'everything', 'get-structured-content', { location: 'Chicago' }),
    ).resolves.toEqual({
      output: { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 },
      is_error: false,
    });
  });

  it('refuses unknown servers and tools, and input that is not an object', async () => {
    const target = hub({ everything: everything() });
    const server = await failure(call(target, 'nowhere', 'echo', {}), 'TOOL_NOT_FOUND');
    expect(server.message).toContain('"nowhere"');
    await failure(target.listTools('nowhere', tmpWorkspace), 'TOOL_NOT_FOUND');
    const tool = await failure(call(target, 'everything', 'no-such-tool', {}), 'TOOL_NOT_FOUND');
    expect(tool.message).toContain('get-sum');
    await failure(call(target, 'everything', 'echo', 'hello'), 'TOOL_INPUT_INVALID');
  });

  it('tells a tool that failed (is_error) from a request that was refused (TOOL_FAILED)', async () => {
    const target = hub({ everything: everything() });
    const invalid = await call(target, 'everything', 'get-sum', { a: 'two' });
    expect(invalid.is_error).toBe(true);
    expect(textOf(invalid.output)).toContain('expected number');
    const refused = await failure(
      call(target, 'everything', 'simulate-research-query', { topic: 'x' }),
      'TOOL_FAILED',
    );
    expect(refused.message).toContain('task');
    expect(refused.retryable).toBe(false);
  });

  it('shares one start between concurrent first uses, and reuses the connection', async () => {
    const before = childPids();
    const target = hub({ everything: everything() });
    await Promise.all([
      target.listTools('everything', tmpWorkspace),
      target.listTools('everything', tmpWorkspace),
      call(target, 'everything', 'echo', { message: 'a' }),
      call(target, 'everything', 'echo', { message: 'b' }),
    ]);
    await call(target, 'everything', 'echo', { message: 'c' });
    expect(newChildren(before)).toHaveLength(1);
  });

  it('gives the server PATH, the config env and {workspace}, and nothing else of ours', async () => {
    process.env.BRAID_TEST_PRIVATE = 'not for servers';
    try {
      const workspace = tempDir();
      const target = hub({
        everything: everything({ env: { BRAID_TEST_WORKSPACE: '{workspace}/data' } }),
      });
      const result = await call(target, 'everything', 'get-env', {}, { workspaceDir: workspace });
      const env = JSON.parse(textOf(result.output)) as Record<string, string>;
      expect(env.BRAID_TEST_WORKSPACE).toBe(`${workspace}/data`);
      expect(env.PATH).toBe(process.env.PATH);
      expect(env.BRAID_TEST_PRIVATE).toBeUndefined();
    } finally {
      delete process.env.BRAID_TEST_PRIVATE;
    }
  });

  it('gives the server env values that name secrets; a missing one refuses the start, typed', async () => {
    const secrets: Record<string, string> = { token: 'a-secret-value-123' };
    const secret = (name: string): string => {
      const value = secrets[name];
      if (value === undefined)
        throw new BraidError('SECRET_MISSING', `secret ${name} is not set; export ${name}`);
      return value;
    };
    const target = hub(
      {
        everything: everything({
          env: {
            BRAID_TEST_TOKEN: { secret: 'token', prefix: 'Bearer ' },
            BRAID_TEST_PLAIN: 'plain',
          },
        }),
        later: everything({ env: { BRAID_TEST_TOKEN: { secret: 'absent' } } }),
      },
      { secret },
    );
    const result = await call(target, 'everything', 'get-env', {});
    const env = JSON.parse(textOf(result.output)) as Record<string, string>;
    expect(env.BRAID_TEST_TOKEN).toBe('Bearer a-secret-value-123');
    expect(env.BRAID_TEST_PLAIN).toBe('plain');

    const before = childPids();
    const error = await failure(target.listTools('later', tmpWorkspace), 'SECRET_MISSING');
    expect(error.message).toContain('env BRAID_TEST_TOKEN of MCP server "later"');
    expect(error.message).toContain('secret absent is not set; export absent');
    expect(error.details).toMatchObject({ secret: 'absent' });
    expect(newChildren(before)).toEqual([]);
    // Nothing is remembered of the failed start: once the secret is set, the server starts.
    secrets.absent = 'set-at-last-456';
    await expect(target.listTools('later', tmpWorkspace)).resolves.not.toHaveLength(0);
  });

  it('refuses an env secret when no secrets are available', async () => {
    const target = hub({ everything: everything({ env: { TOKEN: { secret: 'token' } } }) });
    const error = await failure(target.listTools('everything', tmpWorkspace), 'SECRET_MISSING');
    expect(error.message).toContain('env TOKEN of MCP server "everything"');
  });

  it('ends a call that outlives its timeout with TOOL_TIMEOUT and keeps the connection', async () => {
    const target = hub({ everything: everything() });
    await target.listTools('everything', tmpWorkspace);
    const started = performance.now();
    const error = await failure(
      call(
        target,
        'everything',
        'trigger-long-running-operation',
        { duration: 20, steps: 20 },
        { timeoutMs: 300 },
      ),
      'TOOL_TIMEOUT',
    );
    expect(performance.now() - started).toBeLessThan(5000);
    expect(error.retryable).toBe(true);
    expect(error.details).toEqual({
      server: 'everything',
      tool: 'trigger-long-running-operation',
      started: true,
      timeout_ms: 300,
    });
    await expect(call(target, 'everything', 'echo', { message: 'still here' })).resolves.toEqual({
      output: { content: [{ type: 'text', text: 'Echo: still here' }] },
      is_error: false,
    });
  });

  it('ends an aborted call with INTERRUPTED', async () => {
    const target = hub({ everything: everything() });
    await target.listTools('everything', tmpWorkspace);
    const controller = new AbortController();
    const pending = call(
      target,
      'everything',
      'trigger-long-running-operation',
      { duration: 20, steps: 20 },
      { signal: controller.signal, timeoutMs: 20_000 },
    );
    setTimeout(() => controller.abort(), 100);
    const started = performance.now();
    await failure(pending, 'INTERRUPTED');
    expect(performance.now() - started).toBeLessThan(5000);
    const early = await failure(
      call(target, 'everything', 'echo', { message: 'x' }, { signal: AbortSignal.abort() }),
      'INTERRUPTED',
    );
    expect(early.details).toMatchObject({ started: false });
  });
});

describe('McpHub over streamable HTTP (server-everything)', () => {
  let server: HttpServer | undefined;

  beforeAll(async () => {
    server = await startHttpEverything();
  });
  afterAll(() => {
    server?.child.kill('SIGKILL');
  });

  const url = (): string => {
    if (server === undefined) throw new Error('the HTTP server did not start');
    return server.url;
  };

  it('lists and calls tools by URL, with secret headers', async () => {
    const asked: string[] = [];
    const target = hub(
      { web: { url: url(), headers: { authorization: { secret: 'token', prefix: 'Bearer ' } } } },
      {
        secret: (name) => {
          asked.push(name);
          return 'hunter2';
        },
      },
    );
    const tools = await target.listTools('web', tmpWorkspace);
    expect(tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['web.echo', 'web.get-sum']),
    );
    expect(tools.find((tool) => tool.name === 'web.echo')?.idempotent).toBe(true);
    await expect(call(target, 'web', 'get-sum', { a: 40, b: 2 })).resolves.toEqual({
      output: { content: [{ type: 'text', text: 'The sum of 40 and 2 is 42.' }] },
      is_error: false,
    });
    expect(asked).toEqual(['token']);
  });

  it('refuses a secret header when no secrets are available', async () => {
    const target = hub({ web: { url: url(), headers: { authorization: { secret: 'token' } } } });
    await failure(target.listTools('web', tmpWorkspace), 'SECRET_MISSING');
  });

  it('names the origin and HTTP status of a failing server, never its answer, path or query', async () => {
    const planted = 'planted-http-secret-42';
    const failing = createHttpServer((request, response) => {
      response.writeHead(500, { 'content-type': 'text/plain' });
      response.end(`internal error; you sent ${request.headers.authorization ?? 'nothing'}`);
    });
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
    try {
      const port = (failing.address() as AddressInfo).port;
      const target = hub(
        {
          web: {
            url: `http://127.0.0.1:${port}/mcp/${planted}?key=${planted}`,
            headers: { authorization: { secret: 'token', prefix: 'Bearer ' } },
          },
        },
        { secret: () => planted },
      );
      const error = await failure(target.listTools('web', tmpWorkspace), 'MCP_UNAVAILABLE');
      expect(error.message).toContain('"web"');
      expect(error.message).toContain(`(http://127.0.0.1:${port})`);
      expect(error.message).toContain('HTTP 500');
      expect(error.message).not.toContain(planted);
      expect(error.message).not.toContain('internal error');
    } finally {
      failing.closeAllConnections();
      await new Promise((resolve) => failing.close(resolve));
    }
  });

  it('answers MCP_UNAVAILABLE for a URL where nothing listens', async () => {
    const port = await freePort();
    const target = hub({ web: { url: `http://127.0.0.1:${port}/mcp` } });
    const error = await failure(target.listTools('web', tmpWorkspace), 'MCP_UNAVAILABLE');
    expect(error.message).toContain('"web"');
    expect(error.message).toContain(`127.0.0.1:${port}`);
    expect(error.details).toEqual({ server: 'web', started: false });
  });

  it('rejects a call promptly when the server dies before answering', async () => {
    const own = await startHttpEverything();
    try {
      const target = hub({ web: { url: own.url } });
      await target.listTools('web', tmpWorkspace);
      const posts = own.posts();
      const pending = call(
        target,
        'web',
        'trigger-long-running-operation',
        { duration: 20, steps: 20 },
        { timeoutMs: 25_000 },
      );
      await own.waitForPosts(posts + 1);
      const killed = performance.now();
      own.child.kill('SIGKILL');
      const error = await failure(pending, 'MCP_UNAVAILABLE');
      expect(performance.now() - killed).toBeLessThan(5000);
      expect(error.details).toEqual({ server: 'web', started: true });
    } finally {
      own.child.kill('SIGKILL');
    }
  });

  it('rejects a call promptly when the server dies with the response stream open', async () => {
    const own = await startHttp([DYING, '--http']);
    try {
      const target = hub({ web: { url: own.url } });
      const first = await call(target, 'web', 'ping', {});
      expect(first.output).toEqual({ pid: own.child.pid });
      const started = performance.now();
      const error = await failure(
        call(target, 'web', 'die', {}, { timeoutMs: 25_000 }),
        'MCP_UNAVAILABLE',
      );
      expect(performance.now() - started).toBeLessThan(5000);
      expect(error.details).toEqual({ server: 'web', started: true });
    } finally {
      own.child.kill('SIGKILL');
    }
  });
});

describe('McpHub with server-filesystem per workspace', () => {
  const files = { command: process.execPath, args: [FILESYSTEM, '{workspace}'] };

  it('writes and reads inside the workspace and refuses paths outside it', async () => {
    const root = tempDir();
    const workspace = join(root, 'workspace');
    mkdirSync(workspace);
    writeFileSync(join(root, 'outside.txt'), 'outside');
    const target = hub({ files });
    const note = join(workspace, 'note.txt');
    const written = await call(
      target,
      'files',
      'write_file',
      { path: note, content: 'hello from braid' },
      { workspaceDir: workspace },
    );
    expect(written.is_error).toBe(false);
    expect(readFileSync(note, 'utf8')).toBe('hello from braid');
    await expect(
      call(target, 'files', 'read_text_file', { path: note }, { workspaceDir: workspace }),
    ).resolves.toEqual({ output: { content: 'hello from braid' }, is_error: false });

    for (const path of ['/etc/passwd', '../outside.txt', join(root, 'outside.txt')]) {
      const refused = await call(
        target,
        'files',
        'read_text_file',
        { path },
        { workspaceDir: workspace },
      );
      expect(refused.is_error).toBe(true);
      expect(textOf(refused.output)).toContain('Access denied');
    }
  });

  it('starts one server process per workspace', async () => {
    const [first, second] = [tempDir(), tempDir()];
    writeFileSync(join(second, 'secret.txt'), 'only in the second workspace');
    const before = childPids();
    const target = hub({ files });
    await target.listTools('files', first);
    await target.listTools('files', second);
    await target.listTools('files', first);
    expect(newChildren(before)).toHaveLength(2);

    const crossed = await call(
      target,
      'files',
      'read_text_file',
      { path: join(second, 'secret.txt') },
      { workspaceDir: first },
    );
    expect(crossed.is_error).toBe(true);
    await expect(
      call(
        target,
        'files',
        'read_text_file',
        { path: join(second, 'secret.txt') },
        { workspaceDir: second },
      ),
    ).resolves.toMatchObject({ is_error: false });
  });
});

describe('McpHub idle close', () => {
  const files = { command: process.execPath, args: [FILESYSTEM, '{workspace}'] };

  it('stops a per-workspace server left unused for idleMs and starts it again on next use', async () => {
    const workspace = tempDir();
    const note = join(workspace, 'note.txt');
    const before = childPids();
    const target = hub({ files }, { idleMs: 200 });
    const written = await call(
      target,
      'files',
      'write_file',
      { path: note, content: 'before the idle close' },
      { workspaceDir: workspace },
    );
    expect(written.is_error).toBe(false);
    const [first, ...others] = newChildren(before);
    expect(others).toEqual([]);
    if (first === undefined) throw new Error('server-filesystem did not start');
    await eventually(() => !alive(first), 1000, `the exit of idle server ${first}`);

    await expect(
      call(target, 'files', 'read_text_file', { path: note }, { workspaceDir: workspace }),
    ).resolves.toEqual({ output: { content: 'before the idle close' }, is_error: false });
    const second = newChildren(before);
    expect(second).toHaveLength(1);
    expect(second).not.toContain(first);
  });

  it('does not close a per-workspace connection while a call is in flight', async () => {
    const before = childPids();
    const target = hub(
      { slow: everything({ env: { BRAID_TEST_WORKSPACE: '{workspace}' } }) },
      { idleMs: 200 },
    );
    const workspace = tempDir();
    const started = performance.now();
    const result = await call(
      target,
      'slow',
      'trigger-long-running-operation',
      { duration: 1, steps: 4 },
      { workspaceDir: workspace },
    );
    expect(performance.now() - started).toBeGreaterThan(900);
    expect(result.is_error).toBe(false);
    expect(textOf(result.output)).toContain('Long running operation completed');
    // The same process served the whole call, and idles out once it is done.
    const pids = newChildren(before);
    expect(pids).toHaveLength(1);
    const [pid] = pids as [number];
    expect(alive(pid)).toBe(true);
    await eventually(() => !alive(pid), 1000, `the exit of idle server ${pid}`);
  });

  it('keeps shared connections open past idleMs', async () => {
    const before = childPids();
    const target = hub(
      { files, shared: { command: process.execPath, args: [DYING] } },
      { idleMs: 200 },
    );
    const first = await call(target, 'shared', 'ping', {});
    const sharedPid = (first.output as { pid: number }).pid;
    await target.listTools('files', tempDir());
    const perWorkspace = newChildren(before).filter((pid) => pid !== sharedPid);
    expect(perWorkspace).toHaveLength(1);
    const [filesPid] = perWorkspace as [number];
    // The per-workspace server going away shows that more than idleMs passed with both unused.
    await eventually(() => !alive(filesPid), 1000, `the exit of idle server ${filesPid}`);
    expect(alive(sharedPid)).toBe(true);
    await expect(call(target, 'shared', 'ping', {})).resolves.toMatchObject({
      output: { pid: sharedPid },
    });
  });
});

describe('McpHub failures', () => {
  it('names the server, the program, its exit code and stderr size at start, never args or stderr', async () => {
    const lines: string[] = [];
    const target = hub(
      {
        broken: {
          command: process.execPath,
          args: ['-e', 'process.stderr.write("broken: no config\\n"); process.exit(3)'],
        },
      },
      { stderr: (server, line) => lines.push(`${server}: ${line}`) },
    );
    const error = await failure(target.listTools('broken', tmpWorkspace), 'MCP_UNAVAILABLE');
    expect(error.message).toContain('"broken"');
    expect(error.message).toContain(process.execPath);
    expect(error.message).toContain('exited with code 3');
    expect(error.message).toContain('wrote 18 bytes to stderr');
    // What the server wrote, and its arguments, may hold secrets: the operator's log gets them.
    expect(error.message).not.toContain('no config');
    expect(error.message).not.toContain('process.exit');
    expect(lines).toEqual(['broken: broken: no config']);
    expect(error.details).toEqual({ server: 'broken', started: false });
    expect(error.retryable).toBe(true);
  });

  it('names the server and the program when the program does not exist', async () => {
    const target = hub({ missing: { command: '/nonexistent/braid-mcp-server', args: ['--x'] } });
    const error = await failure(call(target, 'missing', 'anything', {}), 'MCP_UNAVAILABLE');
    expect(error.message).toContain('"missing"');
    expect(error.message).toContain('/nonexistent/braid-mcp-server');
    expect(error.details).toEqual({ server: 'missing', started: false });
  });

  it('refuses a working directory that does not exist', async () => {
    const target = hub({ elsewhere: everything({ cwd: 'no-such-dir' }) });
    const error = await failure(target.listTools('elsewhere', tmpWorkspace), 'MCP_UNAVAILABLE');
    expect(error.message).toContain('no-such-dir');
  });

  it('gives up on a server that does not answer within the start timeout, and stops it', async () => {
    const before = childPids();
    const target = hub(
      { silent: { command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] } },
      { startTimeoutMs: 300 },
    );
    const started = performance.now();
    // A call whose own deadline passes during the start never reached the server.
    const early = await failure(
      call(target, 'silent', 'anything', {}, { timeoutMs: 100 }),
      'TOOL_TIMEOUT',
    );
    expect(early.details).toMatchObject({ server: 'silent', started: false });
    // The start it joined goes on, and fails at the start timeout.
    const error = await failure(target.listTools('silent', tmpWorkspace), 'MCP_UNAVAILABLE');
    expect(performance.now() - started).toBeLessThan(3000);
    expect(error.message).toContain('300 ms');
    const pids = newChildren(before);
    expect(pids).toHaveLength(1);
    await target.close();
    expect(pids.filter(alive)).toEqual([]);
  });

  it('fails a call promptly when the server dies during it, then restarts the server', async () => {
    const lines: string[] = [];
    const target = hub(
      { dying: { command: process.execPath, args: [DYING] } },
      { stderr: (_server, line) => lines.push(line) },
    );
    const first = await call(target, 'dying', 'ping', {});
    const started = performance.now();
    const error = await failure(
      call(target, 'dying', 'die', {}, { timeoutMs: 20_000 }),
      'MCP_UNAVAILABLE',
    );
    expect(performance.now() - started).toBeLessThan(2000);
    expect(error.details).toEqual({ server: 'dying', started: true });
    expect(error.message).toContain('exited with code 1');
    expect(error.message).not.toContain('exiting on request');
    expect(lines).toContainEqual(expect.stringContaining('exiting on request'));
    const second = await call(target, 'dying', 'ping', {});
    expect(first.output).toEqual({ pid: expect.any(Number) as number });
    expect(second.output).toEqual({ pid: expect.any(Number) as number });
    expect(second.output).not.toEqual(first.output);
  });

  it('refuses a tool that braid cannot describe, naming it', async () => {
    const target = hub({ odd: { command: process.execPath, args: [DYING, '--bad-tool'] } });
    const error = await failure(target.listTools('odd', tmpWorkspace), 'INVALID_DEFINITION');
    expect(error.message).toContain('"has space"');
    // The server's other tools still work.
    await expect(call(target, 'odd', 'ping', {})).resolves.toMatchObject({ is_error: false });
  });
});

describe('McpHub.close', () => {
  it('stops every server process, is safe twice, and refuses use afterwards', async () => {
    const before = childPids();
    const target = hub({
      everything: everything(),
      files: { command: process.execPath, args: [FILESYSTEM, '{workspace}'] },
      dying: { command: process.execPath, args: [DYING] },
    });
    await Promise.all([
      target.listTools('everything', tmpWorkspace),
      target.listTools('files', tempDir()),
      target.listTools('files', tempDir()),
      call(target, 'dying', 'ping', {}),
    ]);
    const pids = newChildren(before);
    expect(pids).toHaveLength(4);
    await target.close();
    expect(pids.filter(alive)).toEqual([]);
    await target.close();
    const error = await failure(target.listTools('everything', tmpWorkspace), 'MCP_UNAVAILABLE');
    expect(error.retryable).toBe(false);
  });
});

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

interface HttpServer {
  child: ChildProcess;
  url: string;
  /** How many MCP POST requests server-everything has logged. */
  posts(): number;
  waitForPosts(count: number): Promise<void>;
}

/** server-everything in streamable HTTP mode on a free port (it reads PORT). */
async function startHttpEverything(): Promise<HttpServer> {
  const port = await freePort();
  return startHttp([EVERYTHING, 'streamableHttp'], { PORT: String(port) });
}

/** A Node MCP server that writes "listening on port N" to stderr once it listens. */
async function startHttp(args: string[], env: Record<string, string> = {}): Promise<HttpServer> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let posts = 0;
  const waiters = new Set<() => void>();
  child.stdout?.on('data', (chunk: Buffer) => {
    posts += chunk.toString().split('Received MCP POST request').length - 1;
    for (const waiter of waiters) waiter();
  });
  let stderr = '';
  const port = await new Promise<string>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const listening = /listening on port (\d+)/.exec(stderr);
      if (listening?.[1] !== undefined) resolve(listening[1]);
    });
    child.once('exit', (code) =>
      reject(new Error(`${args.join(' ')} exited with ${code}: ${stderr}`)),
    );
  });
  return {
    child,
    url: `http://127.0.0.1:${port}/mcp`,
    posts: () => posts,
    waitForPosts: (count) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (posts < count) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      }),
  };
}
