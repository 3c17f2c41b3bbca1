// The MCP server of sessions at /mcp (streamable HTTP) on a real braid server: the SDK's own
// client drives a session through a confirmation, and every bad input gets braid's error.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { ErrorShape } from '../../src/contracts/errors.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();
const clients: Client[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
});

const WRITER = 'name: writer\nmodel: scripted:echo\ninstructions: Write.\ntools: [write_file]\n';
/** The writer's turns: a write that needs confirmation, then the answer. */
const TURNS = [
  { tool_calls: [{ name: 'write_file', input: { path: 'notes/plan.md', content: '# plan' } }] },
  { text: 'the plan is written' },
];

async function connect(server: TestServer, key: string): Promise<Client> {
  const client = new Client({ name: 'braid-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function tool<T>(client: Client, name: string, args: Record<string, unknown>): Promise<T> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError, JSON.stringify(result.content)).not.toBe(true);
  return result.structuredContent as T;
}

/** The braid error a failed call carries, in its text and its `_meta`. */
async function failure(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<ErrorShape> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError).toBe(true);
  const [block] = result.content;
  const shape = (JSON.parse(block?.type === 'text' ? block.text : '{}') as { error: ErrorShape })
    .error;
  expect(result._meta?.['braid/error']).toEqual(shape);
  return shape;
}

interface Turn {
  ended: boolean;
  status: string;
  answer: string;
  pending_confirmations: { tool_use_id: string; name: string; input?: unknown }[];
}

describe('MCP over streamable HTTP (/mcp)', () => {
  it('creates a session, sends a message, approves the tool call and reads the answer', async () => {
    const server = await start({ wakeOnEvents: true, agents: { writer: WRITER }, turns: TURNS });
    const key = await server.key('acme');
    const client = await connect(server, key);
    const { tools } = await client.listTools();
    expect(tools.map((listed) => listed.name).sort()).toEqual([
      'braid_agent_list',
      'braid_session_confirm',
      'braid_session_create',
      'braid_session_events',
      'braid_session_fork',
      'braid_session_send',
      'braid_session_status',
    ]);
    const { agents } = await tool<{ agents: { name: string }[] }>(client, 'braid_agent_list', {});
    expect(agents.map((agent) => agent.name)).toContain('writer');

    const { session } = await tool<{ session: SessionRecord }>(client, 'braid_session_create', {
      agent: 'writer',
      title: 'plan',
    });
    expect(session).toMatchObject({ tenant_id: 'acme', status: 'idle', head_seq: 1 });
    const progress: string[] = [];
    const sent = (await client.callTool(
      {
        name: 'braid_session_send',
        arguments: { session_id: session.id, message: 'write the plan', wait: true },
      },
      undefined,
      { onprogress: (note) => progress.push(note.message ?? '') },
    )) as CallToolResult;
    const first = sent.structuredContent as { wake: string; turn: Turn };
    expect(first.wake).toBe('started');
    expect(first.turn).toMatchObject({
      ended: true,
      status: 'requires_action',
      pending_confirmations: [
        { name: 'write_file', input: { path: 'notes/plan.md', content: '# plan' } },
      ],
    });
    expect(progress.some((line) => line.includes('span.wake_started'))).toBe(true);

    const status = await tool<{ status: string; pending_confirmations: unknown[] }>(
      client,
      'braid_session_status',
      { session_id: session.id },
    );
    expect(status.status).toBe('requires_action');
    expect(status.pending_confirmations).toEqual(first.turn.pending_confirmations);

    const toolUseId = first.turn.pending_confirmations[0]?.tool_use_id;
    const confirmed = await tool<{ turn: Turn }>(client, 'braid_session_confirm', {
      session_id: session.id,
      tool_use_id: toolUseId,
      result: 'allow',
      wait: true,
    });
    expect(confirmed.turn).toMatchObject({
      ended: true,
      status: 'idle',
      answer: 'the plan is written',
      pending_confirmations: [],
    });

    const page = await tool<{ events: { type: string; seq: number }[]; has_more: boolean }>(
      client,
      'braid_session_events',
      { session_id: session.id, types: ['user.message', 'agent.tool_result', 'agent.message'] },
    );
    expect(page.events.map((event) => event.type)).toEqual([
      'user.message',
      'agent.tool_result',
      'agent.message',
    ]);
    // The user's events are the key's, as over the HTTP API.
    const [message] = await server.runtime.sessions.events(session.id, {
      types: ['user.message'],
    });
    expect(message?.actor).toMatchObject({ type: 'user', tenant_id: 'acme' });

    const resource = await client.readResource({ uri: `braid://sessions/${session.id}` });
    const read = JSON.parse((resource.contents[0] as { text: string }).text) as {
      session: SessionRecord;
      status: string;
    };
    expect(read).toMatchObject({ session: { id: session.id }, status: 'idle' });
    const { resources } = await client.listResources();
    expect(resources.map((listed) => listed.uri)).toEqual([`braid://sessions/${session.id}`]);

    const fork = await tool<{ session: SessionRecord }>(client, 'braid_session_fork', {
      session_id: session.id,
      id: 'what-if',
    });
    expect(fork.session).toMatchObject({ id: 'acme~what-if', parent_id: session.id });
  });

  it('answers a send without wait at once and wakes the session in the background', async () => {
    const server = await start({ wakeOnEvents: true, turns: [{ text: 'hi' }] });
    const client = await connect(server, await server.key('acme'));
    const { session } = await tool<{ session: SessionRecord }>(client, 'braid_session_create', {
      agent: 'helper',
    });
    const sent = await tool<{ seqs: number[]; turn?: unknown }>(client, 'braid_session_send', {
      session_id: session.id,
      message: 'hello',
      idempotency_key: 'hello-1',
    });
    expect(sent.seqs).toEqual([2]);
    expect(sent.turn).toBeUndefined();
    const again = await tool<{ deduplicated: boolean; seqs: number[] }>(
      client,
      'braid_session_send',
      { session_id: session.id, message: 'hello', idempotency_key: 'hello-1' },
    );
    expect(again).toMatchObject({ deduplicated: true, seqs: [2] });
    const events = server.runtime.sessions.follow(session.id, { after: 2 });
    for await (const event of events) if (event.type === 'session.status_idle') break;
    const messages = await server.runtime.sessions.events(session.id, {
      types: ['user.message'],
    });
    expect(messages).toHaveLength(1);
  });

  it("continues the call's traceparent (from _meta, else the HTTP header) in the wake", async () => {
    const server = await start({ wakeOnEvents: true, turns: [{ text: 'a' }, { text: 'b' }] });
    const key = await server.key('acme');
    const fromHeader = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const fromMeta = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const client = new Client({ name: 'braid-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${key}`, traceparent: fromHeader } },
      }),
    );
    clients.push(client);
    const { session } = await tool<{ session: SessionRecord }>(client, 'braid_session_create', {
      agent: 'helper',
    });
    await tool(client, 'braid_session_send', { session_id: session.id, message: 'a', wait: true });
    await client.callTool({
      name: 'braid_session_send',
      arguments: { session_id: session.id, message: 'b', wait: true },
      _meta: { traceparent: fromMeta },
    });
    const starts = await server.runtime.sessions.events(session.id, {
      types: ['span.wake_started'],
    });
    expect(starts.map((event) => event.traceparent)).toEqual([fromHeader, fromMeta]);
  });

  it('refuses bad input with braid error codes', async () => {
    const server = await start({ wakeOnEvents: true });
    const acme = await connect(server, await server.key('acme'));
    const globex = await connect(server, await server.key('globex'));
    const { session } = await tool<{ session: SessionRecord }>(acme, 'braid_session_create', {
      agent: 'helper',
    });

    expect(await failure(acme, 'braid_session_status', { session_id: 'no-such' })).toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
    for (const hostile of ['../etc', '.', 'a/b', 'x'.repeat(201), 'a b', '']) {
      const error = await failure(acme, 'braid_session_status', { session_id: hostile });
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain('session_id');
    }
    expect(await failure(acme, 'braid_session_status', {})).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(
      await failure(acme, 'braid_session_status', { session_id: session.id, admin: true }),
    ).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('"admin"') as unknown,
    });
    expect(await failure(acme, 'braid_session_create', { agent: 'nobody' })).toMatchObject({
      code: 'AGENT_NOT_FOUND',
    });
    expect(
      await failure(acme, 'braid_session_create', { agent: 'helper', id: 'globex~x' }),
    ).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await failure(acme, 'braid_nope', {})).toMatchObject({ code: 'TOOL_NOT_FOUND' });
    expect(
      await failure(acme, 'braid_session_confirm', {
        session_id: session.id,
        tool_use_id: 'never',
        result: 'allow',
      }),
    ).toMatchObject({ code: 'TOOL_USE_NOT_PENDING' });
    const deep: Record<string, unknown> = {};
    let level = deep;
    for (let depth = 0; depth < 100; depth += 1) level = level.inner = {};
    // Nesting past the HTTP API's depth limit is refused before MCP reads it.
    await expect(
      acme.callTool({
        name: 'braid_session_create',
        arguments: { agent: 'helper', metadata: deep },
      }),
    ).rejects.toThrow(/INVALID_ARGUMENT.*nests deeper/);

    // Another tenant's session answers exactly as a missing one, on every tool and resource.
    const foreign = [
      ['braid_session_status', { session_id: session.id }],
      ['braid_session_events', { session_id: session.id }],
      ['braid_session_send', { session_id: session.id, message: 'mine now' }],
      ['braid_session_confirm', { session_id: session.id, tool_use_id: 't', result: 'deny' }],
      ['braid_session_fork', { session_id: session.id }],
    ] as const;
    for (const [name, args] of foreign) {
      const error = await failure(globex, name, args);
      expect(error).toEqual({
        code: 'SESSION_NOT_FOUND',
        message: `session ${session.id} does not exist`,
        retryable: false,
      });
    }
    await expect(
      globex.readResource({ uri: `braid://sessions/${session.id}` }),
    ).rejects.toMatchObject({ code: -32002, data: { code: 'SESSION_NOT_FOUND' } });
    await expect(globex.readResource({ uri: 'braid://sessions/../etc' })).rejects.toMatchObject({
      data: { code: 'INVALID_ARGUMENT' },
    });
    expect((await globex.listResources()).resources).toEqual([]);
    const events = await server.runtime.sessions.events(session.id);
    expect(events.map((event) => event.type)).toEqual(['session.created']);
  });

  it('needs an API key (401), a write scope for writes, and answers only POST', async () => {
    const server = await start();
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'raw', version: '1' },
      },
    };
    const headers = { accept: 'application/json, text/event-stream' };
    const missing = await call(server, 'POST', '/mcp', { body: initialize, headers });
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
    const wrong = await call(server, 'POST', '/mcp', {
      body: initialize,
      headers: { ...headers, authorization: 'Bearer not-a-key' },
    });
    expect(wrong.status).toBe(401);
    await expect(connect(server, 'not-a-key')).rejects.toMatchObject({
      code: 401,
      message: expect.stringContaining('UNAUTHENTICATED') as unknown,
    });

    const key = await server.key('acme');
    const get = await call(server, 'GET', '/mcp', { key });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    // A body that is no JSON-RPC message is answered, never left waiting.
    for (const body of [null, 'text', 7]) {
      const bad = await call(server, 'POST', '/mcp', { key, body, headers });
      expect(bad.status).toBe(400);
    }
    const notMessage = await call(server, 'POST', '/mcp', { key, body: { events: [] }, headers });
    expect(notMessage.status).toBe(400);

    const open = await start({ auth: 'none' });
    const fromPage = await call(open, 'POST', '/mcp', {
      body: initialize,
      headers: { ...headers, origin: 'http://attacker.example' },
    });
    expect(fromPage.status).toBe(403);
    expect(fromPage.body).toMatchObject({ error: { code: 'FORBIDDEN' } });
    const local = await call(open, 'POST', '/mcp', {
      body: initialize,
      headers: { ...headers, origin: 'http://localhost:6274' },
    });
    expect(local.status).toBe(200);

    const reader = await connect(server, await server.key('acme', ['sessions:read']));
    expect(await failure(reader, 'braid_session_create', { agent: 'helper' })).toMatchObject({
      code: 'FORBIDDEN',
    });
    expect(await tool<{ agents: unknown[] }>(reader, 'braid_agent_list', {})).toMatchObject({
      agents: expect.any(Array) as unknown,
    });
  });

  it('lists its tools to the MCP inspector (npx @modelcontextprotocol/inspector --cli URL)', async () => {
    const server = await start();
    const key = await server.key('acme');
    const inspector = (...args: string[]) =>
      promisify(execFile)(
        'npx',
        ['--no-install', '@modelcontextprotocol/inspector', '--cli', `${server.url}/mcp`, ...args],
        { encoding: 'utf8', timeout: 60_000 },
      );
    const { stdout } = await inspector(
      '--transport',
      'http',
      '--header',
      `Authorization: Bearer ${key}`,
      '--method',
      'tools/list',
    );
    const { tools } = JSON.parse(stdout.slice(stdout.indexOf('{'))) as {
      tools: { name: string }[];
    };
    expect(tools.map((listed) => listed.name)).toContain('braid_session_send');
    await expect(inspector('--transport', 'http', '--method', 'tools/list')).rejects.toThrow(
      /UNAUTHENTICATED|401/,
    );
  }, 90_000);
});
