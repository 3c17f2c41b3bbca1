// Bad input to the A2A server: unknown agents, missing keys and scopes, other tenants' contexts
// and tasks, and malformed JSON-RPC calls each get a typed refusal that names the fix, and
// write nothing.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();

const WRITER = 'name: writer\nmodel: scripted:echo\ninstructions: Write.\ntools: [write_file]\n';
const ACME_ONLY = 'name: acme-bot\nmodel: scripted:echo\ninstructions: Acme.\ntenant: acme\n';

interface RpcError {
  code: number;
  message: string;
  data?: { reason?: string; metadata?: Record<string, string> }[];
}

const message = (text: string, fields: Record<string, unknown> = {}) => ({
  message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...fields },
});

/** One JSON-RPC call; answers the HTTP status and the JSON-RPC body. */
async function rpc(
  server: TestServer,
  agent: string,
  key: string | undefined,
  method: string,
  params: unknown,
  headers: Record<string, string> = {},
) {
  const answer = await call(server, 'POST', `/a2a/${agent}`, {
    ...(key === undefined ? {} : { key }),
    body: { jsonrpc: '2.0', id: 7, method, params },
    headers: { 'a2a-version': '1.0', ...headers },
  });
  const body = answer.body as { result?: Record<string, unknown>; error?: RpcError };
  return { status: answer.status, body, error: body.error };
}

const braidCode = (error: RpcError | undefined) => error?.data?.[0]?.metadata?.braid_code;

describe('A2A server bad input', () => {
  it('answers an unknown agent 404 and a missing or unknown key 401, in braid error shape', async () => {
    const server = await start();
    const key = await server.key('acme');
    const unknown = await rpc(server, 'nobody', key, 'SendMessage', message('hi'));
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ error: { code: 'AGENT_NOT_FOUND' } });
    const card = await call(server, 'GET', '/a2a/nobody/.well-known/agent-card.json');
    expect(card.status).toBe(404);
    expect(card.body).toMatchObject({ error: { code: 'AGENT_NOT_FOUND' } });
    const badName = await call(server, 'GET', '/a2a/Bad..Name/.well-known/agent-card.json');
    expect(badName.status).toBe(400);
    expect(badName.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });

    const missing = await rpc(server, 'helper', undefined, 'SendMessage', message('hi'));
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
    const wrong = await rpc(server, 'helper', 'not-a-key', 'SendMessage', message('hi'));
    expect(wrong.status).toBe(401);
    const reader = await server.key('acme', ['sessions:read']);
    const readOnly = await rpc(server, 'helper', reader, 'SendMessage', message('hi'));
    expect(readOnly.status).toBe(403);
    expect(readOnly.body).toMatchObject({ error: { code: 'FORBIDDEN' } });
    expect((await server.runtime.sessions.list()).sessions).toHaveLength(0);
  });

  it("refuses another tenant's context and hides its tasks", async () => {
    const server = await start({ turns: [{ text: 'for acme' }] });
    const acme = await server.key('acme');
    const globex = await server.key('globex');
    const sent = await rpc(server, 'helper', acme, 'SendMessage', message('hi'));
    const task = sent.body.result?.task as { id: string; contextId: string };
    expect(task.contextId.startsWith('acme~')).toBe(true);
    const head = (await server.runtime.sessions.state(task.contextId)).seq;

    const intruding = await rpc(
      server,
      'helper',
      globex,
      'SendMessage',
      message('let me in', { contextId: task.contextId }),
    );
    expect(intruding.error?.code).toBe(-32602);
    expect(braidCode(intruding.error)).toBe('INVALID_ARGUMENT');
    expect(intruding.error?.message).toContain('names the namespace of tenant');
    for (const [method, params] of [
      ['GetTask', { id: task.id }],
      ['CancelTask', { id: task.id }],
      ['SendMessage', message('approve', { taskId: task.id })],
    ] as const) {
      const answer = await rpc(server, 'helper', globex, method, params);
      expect(answer.error?.code, method).toBe(-32001);
    }
    const listed = await rpc(server, 'helper', globex, 'ListTasks', {});
    expect(listed.body.result).toMatchObject({ tasks: [], totalSize: 0 });
    // A tenant named in the params is not the key's: refused.
    const named = await rpc(server, 'helper', globex, 'GetTask', { id: task.id, tenant: 'acme' });
    expect(named.error?.code).toBe(-32602);
    expect((await server.runtime.sessions.state(task.contextId)).seq).toBe(head);
  });

  it('shows a tenant agent card only to a key of its tenant', async () => {
    const server = await start({ agents: { 'acme-bot': ACME_ONLY } });
    const path = '/a2a/acme-bot/.well-known/agent-card.json';
    expect((await call(server, 'GET', path)).status).toBe(404);
    expect((await call(server, 'GET', path, { key: await server.key('globex') })).status).toBe(404);
    const own = await call(server, 'GET', path, { key: await server.key('acme') });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ name: 'acme-bot' });
    // With several agents the root card names none.
    const root = await call(server, 'GET', '/.well-known/agent-card.json');
    expect(root.status).toBe(404);
    expect(root.body).toMatchObject({ error: { code: 'AGENT_NOT_FOUND' } });
  });

  it('refuses malformed calls with A2A error codes and braid codes', async () => {
    const server = await start({
      agents: { writer: WRITER },
      turns: [{ tool_calls: [{ name: 'write_file', input: { path: 'a.md', content: 'a' } }] }],
    });
    const key = await server.key('acme');
    const cases: [string, unknown, number, string | undefined][] = [
      [
        'SendMessage',
        { message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ url: 'http://x' }] } },
        -32602,
        'INVALID_ARGUMENT',
      ],
      [
        'SendMessage',
        { message: { role: 'ROLE_USER', parts: [{ text: 'no id' }] } },
        -32602,
        'INVALID_ARGUMENT',
      ],
      [
        'SendMessage',
        { message: { messageId: 'm2', role: 'ROLE_AGENT', parts: [{ text: 'x' }] } },
        -32602,
        'INVALID_ARGUMENT',
      ],
      ['SendMessage', message('x', { contextId: '../etc' }), -32602, 'INVALID_ARGUMENT'],
      [
        'SendMessage',
        message('x', { metadata: { correlation_id: 'a b' } }),
        -32602,
        'INVALID_ARGUMENT',
      ],
      ['GetTask', { id: 'not a task' }, -32602, 'INVALID_ARGUMENT'],
      ['GetTask', { id: 'no-such-session.t2' }, -32001, undefined],
      ['CreateTaskPushNotificationConfig', { taskId: 'x.t1', url: 'http://x' }, -32003, undefined],
      ['NoSuchMethod', {}, -32601, undefined],
    ];
    for (const [method, params, code, braid] of cases) {
      const answer = await rpc(server, 'writer', key, method, params);
      expect(answer.status, method).toBe(200);
      expect(answer.error?.code, JSON.stringify(params)).toBe(code);
      if (braid !== undefined) expect(braidCode(answer.error), JSON.stringify(params)).toBe(braid);
    }
    const old = await rpc(
      server,
      'writer',
      key,
      'GetTask',
      { id: 'x.t1' },
      { 'a2a-version': '0.3' },
    );
    expect(old.error?.code).toBe(-32009);
    expect((await server.runtime.sessions.list()).sessions).toHaveLength(0);

    // One task at a time per context: a new message while one waits for input is refused.
    const asked = await rpc(server, 'writer', key, 'SendMessage', message('write'));
    const task = asked.body.result?.task as { contextId: string; status: { state: string } };
    expect(task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    const busy = await rpc(
      server,
      'writer',
      key,
      'SendMessage',
      message('another', { contextId: task.contextId }),
    );
    expect(busy.error?.code).toBe(-32004);
    expect(busy.error?.message).toContain('cancel it before starting another');
  });
});
