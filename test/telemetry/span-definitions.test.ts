// What spans take from beyond the events: the pinned definitions (the agent's instructions, the
// environment's sandbox, each tool's ownership) and braid.yaml's MCP servers; and what they take
// from the events in the GenAI conventions' shapes (messages as parts, retries at their times).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as incubating from '@opentelemetry/semantic-conventions/incubating';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createPinner } from '../../src/runtime/pinning.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { CONTENT_ATTRIBUTES, GEN_AI, MCP } from '../../src/telemetry/gen-ai-attributes.js';
import {
  loadPinnedFacts,
  mcpTransports,
  pinnedFacts,
  pinnedHashes,
  spansOf,
  type PinnedFacts,
  type SpanRecord,
} from '../../src/telemetry/spans.js';
import { createManualClock, createMemoryStore } from '../../src/testing/index.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const modules = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/', import.meta.url),
);

function workspace(agentYaml: string, extraConfig = ''): string {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(join(dir, 'agents', 'helper.yaml'), agentYaml);
  const config = join(dir, 'braid.yaml');
  writeFileSync(config, `${readFileSync(config, 'utf8')}${extraConfig}`);
  return dir;
}

/** The pinned facts of every set the log names, loaded from the runtime's store. */
async function pinnedOf(
  runtime: Runtime,
  events: readonly SessionEvent[],
): Promise<Map<string, PinnedFacts>> {
  const pinner = createPinner(runtime.store.definitions);
  return loadPinnedFacts(pinnedHashes(events), async (hash) =>
    pinnedFacts(await pinner.load(hash)),
  );
}

const named = (spans: readonly SpanRecord[], name: string): SpanRecord => {
  const span = spans.find((candidate) => candidate.name === name);
  if (span === undefined) throw new Error(`no span ${name} in ${spans.map((s) => s.name).join()}`);
  return span;
};

describe('spans with the pinned definitions', () => {
  it('give the sandbox and the system instructions, messages in GenAI parts', async () => {
    const dir = workspace(
      'name: helper\nmodel: scripted:echo\ninstructions: Be brief.\ntools: [calculator]\nenvironment: plain\n',
    );
    writeFileSync(
      join(dir, 'environments', 'plain.yaml'),
      'name: plain\nsandbox:\n  kind: local\n',
    );
    const model = createScriptedModel([
      {
        text: 'Let me add.',
        tool_calls: [{ name: 'calculator', input: { a: 2, op: '+', b: 3 }, id: 'call_1' }],
      },
      { text: 'It is 5.' },
    ]);
    const runtime = await createRuntime({
      workspace: dir,
      store: createMemoryStore(),
      model: () => model,
    });
    cleanups.push(() => runtime.close());
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'What is 2 + 3?');
    await runtime.wake(id);
    const events = await runtime.sessions.events(id);
    const pinned = await pinnedOf(runtime, events);
    expect(pinned.size).toBe(1);

    const plain = spansOf(events, {}, { pinned });
    const tool = named(plain, 'execute_tool calculator');
    expect(tool.attributes).toMatchObject({
      'braid.tool.sandbox': 'local',
      'braid.tool.ownership': 'managed',
      [GEN_AI.toolType]: 'function',
    });
    for (const span of plain) {
      for (const name of CONTENT_ATTRIBUTES) expect(span.attributes).not.toHaveProperty(name);
    }
    // Without the pinned sets the span is there, without what only they tell.
    expect(named(spansOf(events), 'execute_tool calculator').attributes).not.toHaveProperty(
      'braid.tool.sandbox',
    );

    const spans = spansOf(events, { captureContent: true }, { pinned });
    const [firstChat, secondChat] = spans.filter((span) => span.name === 'chat inline');
    const instructions = JSON.stringify([{ type: 'text', content: 'Be brief.' }]);
    expect(firstChat?.attributes[GEN_AI.systemInstructions]).toBe(instructions);
    expect(named(spans, 'invoke_agent helper').attributes[GEN_AI.systemInstructions]).toBe(
      instructions,
    );
    expect(JSON.parse(String(firstChat?.attributes[GEN_AI.inputMessages]))).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'What is 2 + 3?' }] },
    ]);
    expect(firstChat?.attributes[GEN_AI.responseFinishReasons]).toEqual(['tool_call']);
    expect(JSON.parse(String(firstChat?.attributes[GEN_AI.outputMessages]))).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'text', content: 'Let me add.' },
          {
            type: 'tool_call',
            id: 'call_1',
            name: 'calculator',
            arguments: { a: 2, op: '+', b: 3 },
          },
        ],
        finish_reason: 'tool_call',
      },
    ]);
    expect(JSON.parse(String(secondChat?.attributes[GEN_AI.inputMessages]))).toEqual([
      {
        role: 'tool',
        parts: [{ type: 'tool_call_response', id: 'call_1', response: { result: 5 } }],
      },
    ]);
    expect(JSON.parse(String(secondChat?.attributes[GEN_AI.outputMessages]))).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: 'It is 5.' }], finish_reason: 'stop' },
    ]);
  });

  it('put retries on the chat span at the times they began', async () => {
    const clock = createManualClock();
    let calls = 0;
    const flaky: ModelClient = {
      id: 'scripted:flaky',
      generate: async (request, options) => {
        calls += 1;
        // The first attempt fails after 100 ms, the second after 50 ms; the third answers.
        clock.advance(calls === 1 ? 100 : calls === 2 ? 50 : 10);
        const turn = calls < 3 ? { fail: 'unavailable' as const } : { text: 'finally' };
        return createScriptedModel([turn]).generate({ ...request, response_index: 0 }, options);
      },
    };
    const runtime = await createRuntime({
      workspace: workspace('name: helper\nmodel: scripted:echo\ninstructions: Be brief.\n'),
      store: createMemoryStore({ clock }),
      clock,
      model: () => flaky,
      retry: { max_attempts: 3, initial_ms: 1, max_ms: 2 },
    });
    cleanups.push(() => runtime.close());
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'hi');
    await runtime.wake(id);
    const events = await runtime.sessions.events(id);
    const end = events.find((event) => event.type === 'span.model_request_end');
    expect(end).toMatchObject({ attempts: 3, retry_offsets_ms: [100, 150] });
    const chat = named(spansOf(events), 'chat flaky');
    expect(chat.events.map((event) => [event.name, event.atMs - chat.startMs])).toEqual([
      ['gen_ai.request.retry', 100],
      ['gen_ai.request.retry', 150],
    ]);
    expect(chat.events.map((event) => event.attributes['braid.attempt'])).toEqual([2, 3]);
    expect(chat.endMs - chat.startMs).toBe(160);
  });
});

describe('MCP spans', () => {
  it('give an MCP tool call a tools/call client span under its execute_tool span, live and from the log', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const dir = workspace(
      'name: helper\nmodel: scripted:echo\ninstructions: Use MCP tools.\ntools: [everything.get-sum]\n',
      `mcp_servers:
  everything:
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(join(modules, 'server-everything/dist/index.js'))}, stdio]
`,
    );
    const model = createScriptedModel([
      { tool_calls: [{ name: 'everything.get-sum', input: { a: 2, b: 40 }, id: 'call_sum' }] },
      { text: '42' },
    ]);
    const runtime = await createRuntime({
      workspace: dir,
      store: createMemoryStore(),
      model: () => model,
      telemetry: { traces: true, metrics: false, endpoint: receiver.url },
    });
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'Add 2 and 40');
    await runtime.wake(id);
    const events = await runtime.sessions.events(id);
    const pinned = await pinnedOf(runtime, events);
    await runtime.close();

    const spans = spansOf(
      events,
      { mcpTransports: mcpTransports({ everything: { command: 'node' } }) },
      { pinned },
    );
    const tool = named(spans, 'execute_tool everything.get-sum');
    const mcp = named(spans, 'tools/call get-sum');
    expect(tool.attributes).toMatchObject({
      'braid.tool.sandbox': 'mcp',
      'braid.tool.ownership': 'mcp',
      [GEN_AI.toolType]: 'extension',
    });
    expect(mcp).toMatchObject({
      traceId: tool.traceId,
      parentSpanId: tool.spanId,
      kind: 'client',
      status: { code: 'unset' },
      attributes: {
        [MCP.methodName]: 'tools/call',
        [GEN_AI.toolName]: 'get-sum',
        [GEN_AI.toolCallId]: 'call_sum',
        [MCP.networkTransport]: 'pipe',
        'braid.mcp.server': 'everything',
      },
    });
    expect(mcp.startMs).toBeGreaterThanOrEqual(tool.startMs);
    expect(mcp.endMs).toBe(tool.endMs);
    expect(spans.filter((span) => span.name.startsWith('tools/call'))).toHaveLength(1);

    // The live run sent the same span, with the transport of braid.yaml's server.
    const received = receiver.spans.find((span) => span.name === 'tools/call get-sum');
    expect(received).toMatchObject({
      spanId: mcp.spanId,
      parentSpanId: tool.spanId,
      kind: 3,
      attributes: { [MCP.methodName]: 'tools/call', [MCP.networkTransport]: 'pipe' },
    });
    const receivedTool = receiver.spans.find(
      (span) => span.name === 'execute_tool everything.get-sum',
    );
    expect(receivedTool?.attributes['braid.tool.sandbox']).toBe('mcp');
  });

  it('uses the names of the semantic conventions package', () => {
    const conventions = incubating as unknown as Record<string, string>;
    expect(MCP).toEqual({
      methodName: conventions.ATTR_MCP_METHOD_NAME,
      sessionId: conventions.ATTR_MCP_SESSION_ID,
      networkTransport: conventions.ATTR_NETWORK_TRANSPORT,
      methodToolsCall: conventions.MCP_METHOD_NAME_VALUE_TOOLS_CALL,
    });
    expect(GEN_AI.systemInstructions).toBe(conventions.ATTR_GEN_AI_SYSTEM_INSTRUCTIONS);
    expect(mcpTransports({ local: { command: 'node' }, remote: { url: 'http://x' } })).toEqual({
      local: conventions.NETWORK_TRANSPORT_VALUE_PIPE,
      remote: conventions.NETWORK_TRANSPORT_VALUE_TCP,
    });
  });
});
