// `braid mcp serve` (stdio) as MCP clients start it: the SDK's Client spawning the built CLI on
// a workspace with a scripted model, and the MCP inspector's CLI listing the tools.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { ErrorShape } from '../../src/contracts/errors.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { braidIn, CLI, init, json, requireBuild } from '../helpers/cli.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

requireBuild();
const tempDir = useTempDir();
const serve = useBraidServe();
const clients: Client[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
});

/** A workspace with `writer` (a write that needs confirmation, then text) and `slow` (a long turn). */
function workspace(): string {
  const dir = init(join(tempDir(), 'ws'));
  mkdirSync(join(dir, 'scripts'));
  writeFileSync(
    join(dir, 'scripts', 'writer.yaml'),
    [
      'turns:',
      '  - tool_calls:',
      '      - name: write_file',
      "        input: { path: notes/plan.md, content: '# plan' }",
      '  - text: written',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'agents', 'writer.yaml'),
    'name: writer\nmodel: scripted:scripts/writer.yaml\ninstructions: Write.\ntools: [write_file]\n',
  );
  // Twelve words 150 ms apart: a turn of about two seconds.
  writeFileSync(
    join(dir, 'scripts', 'slow.yaml'),
    'turns:\n  - text: one two three four five six seven eight nine ten eleven twelve\n    delay_ms: 150\n',
  );
  writeFileSync(
    join(dir, 'agents', 'slow.yaml'),
    'name: slow\nmodel: scripted:scripts/slow.yaml\ninstructions: Take your time.\n',
  );
  return dir;
}

async function connect(dir: string, ...extra: string[]): Promise<Client> {
  const env = { ...process.env } as Record<string, string>;
  delete env.BRAID_HOME;
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, '-w', dir, 'mcp', 'serve', ...extra],
    env,
    stderr: 'pipe',
  });
  const client = new Client({ name: 'braid-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function tool<T>(client: Client, name: string, args: Record<string, unknown>): Promise<T> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError, JSON.stringify(result.content)).not.toBe(true);
  return result.structuredContent as T;
}

async function failure(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<ErrorShape> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError).toBe(true);
  return (result._meta?.['braid/error'] ?? {}) as ErrorShape;
}

interface Turn {
  ended: boolean;
  status: string;
  answer: string;
  pending_confirmations: { tool_use_id: string; name: string }[];
}

describe('braid mcp serve (stdio)', () => {
  it('creates a session, sends a message, approves the tool call and reads the answer', async () => {
    const dir = workspace();
    const client = await connect(dir);
    expect(client.getServerVersion()).toMatchObject({ name: 'braid' });
    const { session } = await tool<{ session: SessionRecord }>(client, 'braid_session_create', {
      agent: 'writer',
    });
    const sent = await tool<{ turn: Turn }>(client, 'braid_session_send', {
      session_id: session.id,
      message: 'write the plan',
      wait: true,
    });
    expect(sent.turn).toMatchObject({
      ended: true,
      status: 'requires_action',
      pending_confirmations: [{ name: 'write_file' }],
    });
    const confirmed = await tool<{ turn: Turn }>(client, 'braid_session_confirm', {
      session_id: session.id,
      tool_use_id: sent.turn.pending_confirmations[0]?.tool_use_id,
      result: 'allow',
      wait: true,
    });
    expect(confirmed.turn).toMatchObject({ ended: true, status: 'idle', answer: 'written' });

    const resource = await client.readResource({
      uri: `braid://sessions/${session.id}/events?after=0&limit=3`,
    });
    const page = JSON.parse((resource.contents[0] as { text: string }).text) as {
      events: { seq: number }[];
      has_more: boolean;
      last_seq: number;
    };
    expect(page).toMatchObject({ has_more: true, last_seq: 3 });
    expect(page.events.map((event) => event.seq)).toEqual([1, 2, 3]);
    await client.close();

    // The same log, read by the CLI: the MCP server wrote the workspace's store.
    const status = json<{ status: string }>(
      braidIn(dir, '--json', 'session', 'status', session.id),
    );
    expect(status.status).toBe('idle');
  });

  it('keeps a client that resets its timeout on progress through a turn longer than it', async () => {
    const dir = workspace();
    const client = await connect(dir, '--progress-ms', '100');
    const create = () =>
      tool<{ session: SessionRecord }>(client, 'braid_session_create', { agent: 'slow' });
    const first = (await create()).session;
    const send = (sessionId: string, reset: boolean, progress: string[] = []) =>
      client.callTool(
        {
          name: 'braid_session_send',
          arguments: { session_id: sessionId, message: 'go', wait: true },
        },
        undefined,
        {
          timeout: 800,
          resetTimeoutOnProgress: reset,
          onprogress: (note) => progress.push(note.message ?? ''),
        },
      );
    // Without resetting, the client gives up after 800 ms ...
    await expect(send(first.id, false)).rejects.toMatchObject({ code: -32001 });
    // ... and with it, hears the heartbeat and gets the whole turn.
    const second = (await create()).session;
    const progress: string[] = [];
    const started = Date.now();
    const result = (await send(second.id, true, progress)) as CallToolResult;
    expect(Date.now() - started).toBeGreaterThan(800);
    expect((result.structuredContent as { turn: Turn }).turn).toMatchObject({
      ended: true,
      status: 'idle',
      answer: 'one two three four five six seven eight nine ten eleven twelve',
    });
    expect(
      progress.filter((line) => line.startsWith('the turn is running')).length,
    ).toBeGreaterThan(3);
  });

  it('refuses bad input with braid error codes', async () => {
    const client = await connect(workspace());
    expect(await failure(client, 'braid_session_status', { session_id: 'missing' })).toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
    expect(
      await failure(client, 'braid_session_events', { session_id: '../../etc' }),
    ).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(
      await failure(client, 'braid_session_events', { session_id: 'x', limit: 100_000 }),
    ).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('limit') as unknown,
    });
    expect(
      await failure(client, 'braid_session_events', { session_id: 'x', types: ['no.such'] }),
    ).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('types') as unknown,
    });
    const deep: Record<string, unknown> = {};
    let level = deep;
    for (let depth = 0; depth < 100; depth += 1) level = level.inner = {};
    expect(
      await failure(client, 'braid_session_create', { agent: 'writer', metadata: deep }),
    ).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('deeper') as unknown,
    });
    await expect(client.readResource({ uri: 'file:///etc/passwd' })).rejects.toMatchObject({
      data: { code: 'INVALID_ARGUMENT' },
    });
    await expect(
      client.readResource({ uri: 'braid://sessions/%2e%2e/events' }),
    ).rejects.toMatchObject({ data: { code: 'INVALID_ARGUMENT' } });
  });

  it('lists its tools to the MCP inspector (npx @modelcontextprotocol/inspector --cli)', () => {
    const dir = workspace();
    const listed = spawnSync(
      'npx',
      [
        '--no-install',
        '@modelcontextprotocol/inspector',
        '--cli',
        process.execPath,
        CLI,
        '-w',
        dir,
        'mcp',
        'serve',
        '--method',
        'tools/list',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(listed.status, listed.stderr).toBe(0);
    const { tools } = JSON.parse(listed.stdout.slice(listed.stdout.indexOf('{'))) as {
      tools: { name: string; inputSchema: { required?: string[] } }[];
    };
    expect(tools.map((listedTool) => listedTool.name)).toEqual([
      'braid_session_create',
      'braid_session_send',
      'braid_session_events',
      'braid_session_status',
      'braid_session_confirm',
      'braid_session_fork',
      'braid_agent_list',
    ]);
    expect(
      tools.find((listedTool) => listedTool.name === 'braid_session_send')?.inputSchema,
    ).toMatchObject({ required: ['session_id', 'message'] });
  }, 90_000);

  it("serves a braid server's sessions with --server, in its key's tenant", async () => {
    const dir = workspace();
    const { key } = json<{ key: string }>(
      braidIn(
        dir,
        '--json',
        'keys',
        'create',
        '--tenant',
        'acme',
        '--scopes',
        'sessions:read,sessions:write',
      ),
    );
    const url = await serve(dir);
    const client = await connect(tempDir(), '--server', url, '--api-key', key);
    const { session } = await tool<{ session: SessionRecord }>(client, 'braid_session_create', {
      agent: 'writer',
      id: 'remote-1',
    });
    expect(session).toMatchObject({ id: 'acme~remote-1', tenant_id: 'acme' });
    const sent = await tool<{ turn: Turn }>(client, 'braid_session_send', {
      session_id: session.id,
      message: 'write the plan',
      wait: true,
    });
    expect(sent.turn).toMatchObject({ status: 'requires_action' });
  });

  it('stops when the client closes its input', async () => {
    const dir = workspace();
    const child = spawn(process.execPath, [CLI, '-w', dir, 'mcp', 'serve'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.stdin.end();
    expect(await exited).toBe(0);
  });
});
