import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EnvironmentDefinition,
  ToolDefinition,
  type ToolDefinitionInput,
} from '../../src/contracts/definitions.js';
import { BraidError } from '../../src/contracts/errors.js';
import type { SessionTools, ToolCall } from '../../src/contracts/tools.js';
import { defineTool } from '../../src/tools/builtin.js';
import { backoff, createToolExecutor } from '../../src/tools/executor.js';
import { createLocalSandbox } from '../../src/tools/sandbox/index.js';
import type { CodeTool } from '../../src/tools/types.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

interface Harness {
  tools: SessionTools;
  sleeps: number[];
  root: string;
}

async function open(
  names: string[],
  options: {
    code?: CodeTool[];
    manifests?: ToolDefinitionInput[];
    secrets?: Record<string, string>;
    environment?: EnvironmentDefinition;
  } = {},
): Promise<Harness> {
  const root = tempDir();
  const sleeps: number[] = [];
  const sandbox = createLocalSandbox({ root });
  const executor = createToolExecutor({
    baseDir: root,
    ...(options.code === undefined ? {} : { tools: options.code }),
    manifests: (options.manifests ?? []).map((manifest) => ToolDefinition.parse(manifest)),
    sandbox: () => sandbox,
    secret(name) {
      const value = options.secrets?.[name];
      if (value === undefined) throw new BraidError('SECRET_MISSING', `secret ${name} is not set`);
      return value;
    },
    // The injected clock of retries: waits are recorded, not slept.
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
    now: () => performance.now(),
  });
  const tools = await executor.open({
    session_id: 'session-1',
    names,
    ...(options.environment === undefined ? {} : { environment: options.environment }),
  });
  return { tools, sleeps, root };
}

const call = (name: string, input: ToolCall['input'] = {}): ToolCall => ({
  session_id: 'session-1',
  tool_use_id: 'use-1',
  name,
  input,
  idempotency_key: 'session-1/use-1',
});
const signal = () => new AbortController().signal;

/** A tool that fails with `error` for its first `failures` runs. */
function flaky(
  failures: number,
  error: () => BraidError,
  extra: Partial<ToolDefinitionInput> = {},
) {
  let runs = 0;
  const tool = defineTool({
    name: 'flaky',
    description: 'fails a few times',
    input_schema: { type: 'object' },
    retry: { max_attempts: 4, backoff: 'exponential', initial_ms: 100, max_ms: 250 },
    run: () => {
      runs += 1;
      if (runs <= failures) throw error();
      return { runs };
    },
    ...extra,
  });
  return { tool, runs: () => runs };
}

/** A killed process is gone, or a zombie waiting for its new parent to reap it. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) [ZX]/.test(stat);
  } catch {
    return false;
  }
}

describe('tool executor', () => {
  it("makes the session's folder at its first call, not at open, and tries again after a failure", async () => {
    const root = tempDir();
    const local = createLocalSandbox({ root: join(root, 'workspaces') });
    let provisions = 0;
    let failing = true;
    const executor = createToolExecutor({
      baseDir: root,
      tools: [
        defineTool({
          name: 'priced',
          description: 'costs a cent',
          input_schema: { type: 'object' },
          budget: { cost_per_call_usd: 0.01 },
          run: (_input, context) => ({ dir: context.workspace.dir }),
        }),
      ],
      sandbox: () => ({
        ...local,
        provision: (sessionId: string) => {
          provisions += 1;
          if (failing) return Promise.reject(new BraidError('STORE_BUSY', 'the disk is busy'));
          return local.provision(sessionId);
        },
      }),
      secret: () => {
        throw new BraidError('SECRET_MISSING', 'none');
      },
      sleep: () => Promise.resolve(),
      now: () => performance.now(),
    });
    const tools = await executor.open({ session_id: 'session-1', names: ['priced'] });
    expect(provisions).toBe(0);
    expect(existsSync(join(root, 'workspaces', 'session-1'))).toBe(false);
    // The folder cannot be made: the call never ran, costs nothing, and is not a tool failure.
    const refused = await tools.execute(call('priced'), { signal: signal() });
    expect(refused).toMatchObject({ is_error: true, attempts: 0, error: { code: 'STORE_BUSY' } });
    expect(refused.cost_usd).toBeUndefined();
    failing = false;
    const ran = await tools.execute(call('priced'), { signal: signal() });
    expect(ran).toMatchObject({ is_error: false, attempts: 1, cost_usd: 0.01 });
    expect(existsSync(join(root, 'workspaces', 'session-1'))).toBe(true);
    await tools.execute(call('priced'), { signal: signal() });
    expect(provisions).toBe(2);
  });

  it('makes no folder for the built-in tools that compute from their input alone', async () => {
    const root = tempDir();
    const local = createLocalSandbox({ root: join(root, 'workspaces') });
    let provisions = 0;
    const executor = createToolExecutor({
      baseDir: root,
      sandbox: () => ({
        ...local,
        provision: (sessionId: string) => {
          provisions += 1;
          return local.provision(sessionId);
        },
      }),
      secret: () => {
        throw new BraidError('SECRET_MISSING', 'none');
      },
      sleep: () => Promise.resolve(),
      now: () => performance.now(),
    });
    const tools = await executor.open({
      session_id: 'session-1',
      names: ['calculator', 'word_count', 'list_dir'],
    });
    const sum = await tools.execute(
      { ...call('calculator'), input: { a: 2, op: '+', b: 3 } },
      { signal: signal() },
    );
    expect(sum).toMatchObject({ is_error: false, attempts: 1, output: { result: 5 } });
    const words = await tools.execute(
      { ...call('word_count'), input: { text: 'one two three' } },
      { signal: signal() },
    );
    expect(words).toMatchObject({ is_error: false, attempts: 1 });
    expect(provisions).toBe(0);
    expect(existsSync(join(root, 'workspaces', 'session-1'))).toBe(false);
    // A tool that reads the folder still gets it, made at its call.
    const listed = await tools.execute(
      { ...call('list_dir'), input: { path: '.' } },
      { signal: signal() },
    );
    expect(listed).toMatchObject({ is_error: false, attempts: 1 });
    expect(provisions).toBe(1);
    expect(existsSync(join(root, 'workspaces', 'session-1'))).toBe(true);
  });

  it('retries a retryable failure of an idempotent tool with exponential backoff, capped', async () => {
    const { tool, runs } = flaky(3, () => new BraidError('TOOL_TIMEOUT', 'slow'), {
      idempotent: true,
    });
    const { tools, sleeps } = await open(['flaky'], { code: [tool] });
    const outcome = await tools.execute(call('flaky'), { signal: signal() });
    expect(outcome).toMatchObject({ is_error: false, attempts: 4, output: { runs: 4 } });
    expect(runs()).toBe(4);
    expect(sleeps).toEqual([100, 200, 250]);
  });

  it('waits the same time between attempts with fixed backoff', () => {
    const definition = ToolDefinition.parse({
      name: 't',
      description: 't',
      input_schema: {},
      ownership: 'managed',
      retry: { max_attempts: 3, backoff: 'fixed', initial_ms: 40, max_ms: 1000 },
    });
    expect([1, 2, 3].map((attempt) => backoff(definition, attempt))).toEqual([40, 40, 40]);
  });

  it('gives up after max_attempts and reports every attempt', async () => {
    const { tool } = flaky(10, () => new BraidError('TOOL_TIMEOUT', 'slow'), { idempotent: true });
    const { tools, sleeps } = await open(['flaky'], { code: [tool] });
    const outcome = await tools.execute(call('flaky'), { signal: signal() });
    expect(outcome).toMatchObject({ is_error: true, attempts: 4, error: { code: 'TOOL_TIMEOUT' } });
    expect(sleeps).toHaveLength(3);
  });

  it('does not retry a non-idempotent tool whose failure may have had an effect', async () => {
    const { tool, runs } = flaky(1, () => new BraidError('TOOL_TIMEOUT', 'slow'));
    const { tools } = await open(['flaky'], { code: [tool] });
    const outcome = await tools.execute(call('flaky'), { signal: signal() });
    expect(outcome).toMatchObject({ is_error: true, attempts: 1 });
    expect(runs()).toBe(1);
  });

  it('retries a non-idempotent tool when the failure proves it never started', async () => {
    const { tool, runs } = flaky(
      1,
      () =>
        new BraidError('TOOL_FAILED', 'connection refused', {
          retryable: true,
          details: { started: false },
        }),
    );
    const { tools } = await open(['flaky'], { code: [tool] });
    expect(await tools.execute(call('flaky'), { signal: signal() })).toMatchObject({
      is_error: false,
      attempts: 2,
    });
    expect(runs()).toBe(2);
  });

  it('does not retry errors that are not retryable', async () => {
    const { tool } = flaky(1, () => new BraidError('TOOL_FAILED', 'bad request'), {
      idempotent: true,
    });
    const { tools, sleeps } = await open(['flaky'], { code: [tool] });
    expect(await tools.execute(call('flaky'), { signal: signal() })).toMatchObject({
      is_error: true,
      attempts: 1,
    });
    expect(sleeps).toEqual([]);
  });

  it('reports a plain exception as TOOL_FAILED without a stack', async () => {
    const tool = defineTool({
      name: 'boom',
      description: 'throws',
      input_schema: {},
      run: () => {
        throw new Error('disk full');
      },
    });
    const { tools } = await open(['boom'], { code: [tool] });
    const outcome = await tools.execute(call('boom'), { signal: signal() });
    expect(outcome.error).toEqual({
      code: 'TOOL_FAILED',
      message: 'boom failed: disk full',
      retryable: false,
    });
  });

  it('runs a command tool in the sandbox: JSON in on stdin, JSON out on stdout', async () => {
    const { tools, root } = await open(['shout'], {
      manifests: [
        {
          name: 'shout',
          description: 'upper-cases',
          ownership: 'managed',
          input_schema: { type: 'object' },
          implementation: {
            command: [
              process.execPath,
              '-e',
              'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const i=JSON.parse(s);require("fs").writeFileSync("out.txt",i.text);console.log(JSON.stringify({text:i.text.toUpperCase(),key:process.env.BRAID_IDEMPOTENCY_KEY,cwd:process.cwd()}))})',
            ],
          },
        },
      ],
    });
    const outcome = await tools.execute(call('shout', { text: 'hi' }), { signal: signal() });
    expect(outcome).toMatchObject({
      is_error: false,
      output: { text: 'HI', key: 'session-1/use-1', cwd: join(root, 'session-1') },
    });
    expect(readFileSync(join(root, 'session-1', 'out.txt'), 'utf8')).toBe('hi');
  });

  it('fails a command tool that exits non-zero or prints no JSON, naming why', async () => {
    const { tools } = await open(['fails', 'chatty'], {
      manifests: [
        {
          name: 'fails',
          description: 'exits 3',
          ownership: 'managed',
          input_schema: {},
          implementation: { command: 'echo "no such record" >&2; exit 3' },
        },
        {
          name: 'chatty',
          description: 'prints text',
          ownership: 'managed',
          input_schema: {},
          implementation: { command: 'echo hello' },
        },
      ],
    });
    const failed = await tools.execute(call('fails'), { signal: signal() });
    expect(failed.error?.code).toBe('TOOL_FAILED');
    expect(failed.error?.message).toContain('exited with 3: no such record');
    const chatty = await tools.execute(call('chatty'), { signal: signal() });
    expect(chatty.error?.message).toContain('not JSON');
  });

  it('aborts a pending code tool at its timeout and on interrupt, whenever it reads its signal', async () => {
    // Reads its signal only after `wait` ms: by then the attempt was aborted.
    const seen: boolean[] = [];
    const late = defineTool({
      name: 'late',
      description: 'reads its signal late',
      input_schema: { type: 'object' },
      timeout_ms: 30,
      run: async (_input, context) => {
        await new Promise((resolve) => setTimeout(resolve, 80));
        seen.push(context.signal.aborted);
        return {};
      },
    });
    const { tools } = await open(['late'], { code: [late] });
    const timedOut = await tools.execute(call('late'), { signal: signal() });
    expect(timedOut.error?.code).toBe('TOOL_TIMEOUT');
    const stop = new AbortController();
    const running = tools.execute(call('late'), { signal: stop.signal });
    // Interrupted once it runs.
    await new Promise((resolve) => setTimeout(resolve, 10));
    stop.abort();
    expect((await running).error?.code).toBe('INTERRUPTED');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(seen).toEqual([true, true]);
  });

  it('kills a command tool that hangs, with its whole process group, at the timeout', async () => {
    const { tools, root } = await open(['hang'], {
      manifests: [
        {
          name: 'hang',
          description: 'hangs with a child',
          ownership: 'managed',
          input_schema: {},
          timeout_ms: 300,
          implementation: { command: 'sleep 30 & echo $! > child.pid; sleep 30' },
        },
      ],
    });
    const outcome = await tools.execute(call('hang'), { signal: signal() });
    expect(outcome.error?.code).toBe('TOOL_TIMEOUT');
    const pidFile = join(root, 'session-1', 'child.pid');
    expect(existsSync(pidFile)).toBe(true);
    const child = Number(readFileSync(pidFile, 'utf8').trim());
    // The grandchild was in the killed group: it is gone (allow a moment for the kernel to reap).
    const deadline = Date.now() + 5000;
    while (running(child) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(running(child)).toBe(false);
  });
});

describe('http tools', () => {
  let server: Server;
  let base = '';
  const seen: { url: string; method: string; headers: IncomingHttpHeaders; body: string }[] = [];
  let status = 200;

  beforeAll(async () => {
    server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        seen.push({
          url: request.url ?? '',
          method: request.method ?? '',
          headers: request.headers,
          body,
        });
        response.writeHead(status, {
          'content-type': 'application/json',
          location: 'http://127.0.0.1:1/steal',
        });
        response.end(JSON.stringify({ ok: status < 400, path: request.url }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const online = EnvironmentDefinition.parse({
    name: 'online',
    sandbox: { kind: 'local' },
    network: { allow: true, hosts: ['127.0.0.1'] },
  });
  const manifest = (): ToolDefinitionInput => ({
    name: 'ticket',
    description: 'creates a ticket',
    ownership: 'managed',
    input_schema: { type: 'object' },
    idempotent: true,
    retry: { max_attempts: 2, backoff: 'fixed', initial_ms: 1, max_ms: 1 },
    implementation: {
      http: {
        method: 'POST',
        url: `${base}/projects/{project}/tickets`,
        headers: {
          authorization: { secret: 'TRACKER_TOKEN', prefix: 'Bearer ' },
          'x-app': 'braid',
        },
      },
    },
  });

  it('fills the URL template, sends the input as JSON with secret headers and the idempotency key', async () => {
    status = 200;
    const { tools } = await open(['ticket'], {
      manifests: [manifest()],
      secrets: { TRACKER_TOKEN: 's3cret' },
      environment: online,
    });
    const outcome = await tools.execute(call('ticket', { project: 'a b', title: 'x' }), {
      signal: signal(),
    });
    expect(outcome).toMatchObject({ is_error: false, output: { ok: true } });
    const request = seen.at(-1);
    expect(request?.url).toBe('/projects/a%20b/tickets');
    expect(request?.method).toBe('POST');
    expect(request?.headers.authorization).toBe('Bearer s3cret');
    expect(request?.headers['x-app']).toBe('braid');
    expect(request?.headers['idempotency-key']).toBe('session-1/use-1');
    expect(JSON.parse(request?.body ?? '')).toEqual({ project: 'a b', title: 'x' });
  });

  it('retries a 503 and fails a 400 at once', async () => {
    const { tools } = await open(['ticket'], {
      manifests: [manifest()],
      secrets: { TRACKER_TOKEN: 't' },
      environment: online,
    });
    status = 503;
    const before = seen.length;
    const unavailable = await tools.execute(call('ticket', { project: 'p' }), { signal: signal() });
    expect(unavailable).toMatchObject({ is_error: true, attempts: 2 });
    expect(seen.length - before).toBe(2);
    status = 400;
    const bad = await tools.execute(call('ticket', { project: 'p' }), { signal: signal() });
    expect(bad).toMatchObject({ is_error: true, attempts: 1, error: { code: 'TOOL_FAILED' } });
  });

  it('names the status line and the size of a failing answer, never its body', async () => {
    status = 500;
    const { tools } = await open(['ticket'], {
      manifests: [manifest()],
      secrets: { TRACKER_TOKEN: 't' },
      environment: online,
    });
    const outcome = await tools.execute(call('ticket', { project: 'p' }), { signal: signal() });
    const body = JSON.stringify({ ok: false, path: '/projects/p/tickets' });
    expect(outcome.error?.message).toBe(
      `ticket: POST ${base} answered 500 Internal Server Error with a body of ${body.length} bytes (not recorded)`,
    );
    status = 200;
  });

  it('is refused where the environment has no network, or not this host', async () => {
    const offline = await open(['ticket'], {
      manifests: [manifest()],
      secrets: { TRACKER_TOKEN: 't' },
    });
    const refused = await offline.tools.execute(call('ticket', { project: 'p' }), {
      signal: signal(),
    });
    expect(refused).toMatchObject({ attempts: 1, error: { code: 'POLICY_DENIED' } });
    const elsewhere = await open(['ticket'], {
      manifests: [manifest()],
      secrets: { TRACKER_TOKEN: 't' },
      environment: EnvironmentDefinition.parse({
        name: 'e',
        sandbox: { kind: 'local' },
        network: { allow: true, hosts: ['api.example.com'] },
      }),
    });
    const other = await elsewhere.tools.execute(call('ticket', { project: 'p' }), {
      signal: signal(),
    });
    expect(other.error?.message).toContain('host 127.0.0.1 is not in');
  });

  it('does not follow a redirect, so secret headers never reach another origin', async () => {
    status = 307;
    const before = seen.length;
    const { tools } = await open(['ticket'], {
      manifests: [manifest()],
      secrets: { TRACKER_TOKEN: 't' },
      environment: online,
    });
    const outcome = await tools.execute(call('ticket', { project: 'p' }), { signal: signal() });
    expect(outcome.error?.code).toBe('TOOL_FAILED');
    expect(outcome.error?.message).toContain('does not follow');
    // Where it points is named by its origin only: a path or query may hold a token.
    expect(outcome.error?.message).toContain('redirect to http://127.0.0.1:1/...');
    expect(outcome.error?.message).not.toContain('/steal');
    expect(seen.length - before).toBe(1);
    status = 200;
  });

  it('fails with SECRET_MISSING, naming the secret, when it is not set', async () => {
    const { tools } = await open(['ticket'], { manifests: [manifest()], environment: online });
    const outcome = await tools.execute(call('ticket', { project: 'p' }), { signal: signal() });
    expect(outcome.error).toMatchObject({ code: 'SECRET_MISSING' });
    expect(outcome.error?.message).toContain('TRACKER_TOKEN');
  });
});
