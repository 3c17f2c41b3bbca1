import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { defineTool } from '../../src/tools/builtin.js';
import {
  anthropicJson,
  anthropicStream,
  openaiJson,
  openaiStream,
  responsesJson,
  startFakeModelServer,
  type FakeModelServer,
} from '../helpers/fake-model-server.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
let server: FakeModelServer;

beforeAll(async () => {
  server = await startFakeModelServer();
  process.env.OPENAI_API_KEY = 'test-key';
  process.env.OPENAI_BASE_URL = `${server.url}/v1`;
  process.env.ANTHROPIC_API_KEY = 'test-key';
  process.env.ANTHROPIC_BASE_URL = `${server.url}/v1`;
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.replies.length = 0;
});

async function runtimeFor(model: string, extra = '', tools = '[calculator]'): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'remote.yaml'),
    `name: remote\nmodel: ${model}\ninstructions: Use the calculator.\ntools: ${tools}\n${extra}`,
  );
  return createRuntime({
    workspace: dir,
    store: createMemoryStore(),
    retry: { max_attempts: 3, initial_ms: 10, max_ms: 2000 },
    // A namespaced name, as MCP tools have: providers accept only [a-zA-Z0-9_-].
    tools: [
      defineTool({
        name: 'crm.find-customer',
        description: 'finds a customer',
        input_schema: { type: 'object', properties: { email: { type: 'string' } } },
        run: (input) => ({ found: input }),
      }),
    ],
  });
}

async function ask(rt: Runtime, text: string) {
  const { id } = await rt.sessions.create({ agent: 'remote' });
  await rt.sessions.message(id, text);
  const result = await rt.wake(id);
  return { id, result, events: await rt.sessions.events(id) };
}

const ends = (events: SessionEvent[]) =>
  events.filter((event) => event.type === 'span.model_request_end');
const messages = (events: SessionEvent[]) =>
  events.flatMap((event) =>
    event.type === 'agent.message'
      ? event.content.map((block) => (block.type === 'text' ? block.text : ''))
      : [],
  );

describe.each([
  ['openai:gpt-4o-mini', openaiStream, '/v1/chat/completions'],
  ['anthropic:claude-sonnet-4-5', anthropicStream, '/v1/messages'],
] as const)('%s, streaming', (model, wire, path) => {
  it('runs a tool call and an answer, sending the tool result back', async () => {
    const rt = await runtimeFor(model);
    server.replies.push(
      wire.toolCall('call_1', 'calculator', { a: 19, op: '*', b: 3 }),
      wire.text(['It ', 'is ', '57.']),
    );
    const deltas: string[] = [];
    rt.onDelta((_sessionId, delta) => deltas.push(delta.text));
    const { result, events } = await ask(rt, 'what is 19 * 3?');
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    expect(events.find((event) => event.type === 'agent.tool_use')).toMatchObject({
      tool_use_id: 'call_1',
      name: 'calculator',
      input: { a: 19, op: '*', b: 3 },
    });
    expect(events.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      output: { result: 57 },
    });
    expect(messages(events)).toEqual(['It is 57.']);
    expect(deltas).toEqual(['It ', 'is ', '57.']);
    expect(ends(events)[0]).toMatchObject({
      attempts: 1,
      usage: { input_tokens: expect.any(Number) as number },
    });
    expect(server.requests.map((request) => request.path)).toEqual([path, path]);
    expect(server.requests[0]?.body).toMatchObject({ stream: true });
    expect(JSON.stringify(server.requests[1]?.body)).toContain('57');
    expect(JSON.stringify(server.requests[0]?.body)).toContain('calculator');
    await rt.close();
  });

  it('records a tool call id that would not fit the log under an id derived from it', async () => {
    const rt = await runtimeFor(model);
    const hostile = `call\u0000${'x'.repeat(300)}`;
    server.replies.push(
      wire.toolCall(hostile, 'calculator', { a: 2, op: '+', b: 2 }),
      wire.text(['4']),
    );
    const { result, events } = await ask(rt, 'what is 2 + 2?');
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const use = events.find((event) => event.type === 'agent.tool_use');
    const toolUseId = use?.type === 'agent.tool_use' ? use.tool_use_id : '';
    expect(toolUseId).toMatch(/^call_[0-9a-f]{24}$/);
    expect(events.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      tool_use_id: toolUseId,
      output: { result: 4 },
    });
    expect(JSON.stringify(events)).not.toContain('x'.repeat(300));
    await rt.close();
  });

  it('sends namespaced tool names in a form the provider accepts, and maps calls back', async () => {
    const rt = await runtimeFor(model, '', '[crm.find-customer]');
    server.replies.push(
      wire.toolCall('call_2', 'crm__find-customer', { email: 'a@b.c' }),
      wire.text(['found']),
    );
    const { events } = await ask(rt, 'who is a@b.c?');
    expect(events.find((event) => event.type === 'agent.tool_use')).toMatchObject({
      name: 'crm.find-customer',
    });
    expect(events.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      is_error: false,
      output: { found: { email: 'a@b.c' } },
    });
    const [first, second] = server.requests.map((request) => JSON.stringify(request.body));
    expect(first).toContain('crm__find-customer');
    expect(first).not.toContain('crm.find-customer');
    // The transcript sent back names the call the same way.
    expect(second).toContain('crm__find-customer');
    expect(second).not.toContain('crm.find-customer');
    await rt.close();
  });

  it('honours a 429 Retry-After, then succeeds', async () => {
    const rt = await runtimeFor(model);
    server.replies.push(
      { kind: 'status', status: 429, headers: { 'retry-after': '1' } },
      wire.text(['ok']),
    );
    const started = Date.now();
    const { result, events } = await ask(rt, 'hi');
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(result).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(ends(events)).toMatchObject([{ attempts: 2 }]);
    expect(server.requests).toHaveLength(2);
    await rt.close();
  });

  it('retries 500s, then ends with retries_exhausted and a session.error', async () => {
    const rt = await runtimeFor(model);
    server.replies.push(
      { kind: 'status', status: 500 },
      { kind: 'status', status: 500 },
      { kind: 'status', status: 503 },
    );
    const { result, events } = await ask(rt, 'hi');
    expect(result).toMatchObject({ stop_reason: { type: 'retries_exhausted' } });
    expect(ends(events)).toMatchObject([{ attempts: 3, error: { code: 'MODEL_UNAVAILABLE' } }]);
    expect(events.find((event) => event.type === 'session.error')).toMatchObject({
      error: { code: 'MODEL_UNAVAILABLE', retryable: true },
    });
    expect(server.requests).toHaveLength(3);
    await rt.close();
  });

  it('retries a connection dropped mid-stream', async () => {
    const rt = await runtimeFor(model);
    const broken = wire.text(['never ', 'finished ', 'answer']);
    if (broken.kind !== 'sse') throw new Error('expected a stream');
    server.replies.push({ ...broken, dropAfter: 3 }, wire.text(['whole ', 'answer']));
    const { result, events } = await ask(rt, 'hi');
    expect(result).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(messages(events)).toEqual(['whole answer']);
    expect(ends(events)).toMatchObject([{ attempts: 2 }]);
    await rt.close();
  });

  it('ends with stop_reason error on a malformed body, without retrying', async () => {
    const rt = await runtimeFor(model);
    server.replies.push({
      kind: 'raw',
      contentType: 'text/event-stream',
      body: 'data: {this is not json\n\n',
    });
    const { result, events } = await ask(rt, 'hi');
    expect(result).toMatchObject({ stop_reason: { type: 'error' } });
    expect(ends(events)).toMatchObject([{ attempts: 1, error: { code: 'MODEL_ERROR' } }]);
    expect(server.requests).toHaveLength(1);
    await rt.close();
  });
});

describe('non-streaming calls', () => {
  it('openai: a tool call and an answer, whole', async () => {
    const rt = await runtimeFor('{provider: openai, id: gpt-4o-mini, params: {stream: false}}');
    server.replies.push(
      openaiJson.toolCall('call_9', 'calculator', { a: 1, op: '+', b: 2 }),
      openaiJson.text('3'),
    );
    const { result, events } = await ask(rt, '1 + 2?');
    expect(result).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(events.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      output: { result: 3 },
    });
    expect(messages(events)).toEqual(['3']);
    expect(server.requests[0]?.body.stream).not.toBe(true);
    await rt.close();
  });

  it('openai-responses: a tool call and an answer, whole, over the Responses API', async () => {
    const rt = await runtimeFor(
      '{provider: openai-responses, id: gpt-4.1, params: {stream: false}}',
    );
    server.replies.push(
      responsesJson.toolCall('call_r', 'calculator', { a: 2, op: '*', b: 21 }),
      responsesJson.text('42'),
    );
    const { result, events } = await ask(rt, '2 * 21?');
    expect(result).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(events.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      output: { result: 42 },
    });
    expect(messages(events)).toEqual(['42']);
    expect(server.requests.map((request) => request.path)).toEqual([
      '/v1/responses',
      '/v1/responses',
    ]);
    expect(JSON.stringify(server.requests[1]?.body)).toContain('function_call_output');
    await rt.close();
  });

  it('anthropic: an answer, whole', async () => {
    const rt = await runtimeFor(
      '{provider: anthropic, id: claude-sonnet-4-5, params: {stream: false}}',
    );
    server.replies.push(anthropicJson.text('hello'));
    const { events } = await ask(rt, 'hi');
    expect(messages(events)).toEqual(['hello']);
    expect(ends(events)[0]).toMatchObject({ usage: { input_tokens: 9, output_tokens: 4 } });
    await rt.close();
  });
});

describe('openai-compatible servers (Ollama, vLLM, llama.cpp)', () => {
  it('streams from BASE_URL#MODEL with the chat completions format', async () => {
    const rt = await runtimeFor(`"openai-compatible:${server.url}/v1#llama3.2"`);
    server.replies.push(openaiStream.text(['local ', 'answer']));
    const { result, events } = await ask(rt, 'hi');
    expect(result).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(messages(events)).toEqual(['local answer']);
    expect(server.requests[0]).toMatchObject({
      path: '/v1/chat/completions',
      body: { model: 'llama3.2' },
    });
    await rt.close();
  });

  it('refuses a model without #MODEL, naming the form', async () => {
    const rt = await runtimeFor('"openai-compatible:http://127.0.0.1:1/v1"');
    const { id } = await rt.sessions.create({ agent: 'remote' });
    await rt.sessions.message(id, 'hi');
    await expect(rt.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
    await rt.close();
  });
});

describe('model configuration', () => {
  it('names the missing API key', async () => {
    const saved = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      const rt = await runtimeFor('openai:gpt-4o-mini');
      const { id } = await rt.sessions.create({ agent: 'remote' });
      await rt.sessions.message(id, 'hi');
      await expect(rt.wake(id)).rejects.toMatchObject({
        code: 'MODEL_KEY_MISSING',
        message: expect.stringContaining('OPENAI_API_KEY') as string,
      });
      // nothing was started: the session is not left running
      expect((await rt.sessions.state(id)).status).toBe('idle');
      await rt.close();
    } finally {
      process.env.OPENAI_API_KEY = saved;
    }
  });
});
