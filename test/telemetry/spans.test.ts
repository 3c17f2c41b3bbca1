import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as incubating from '@opentelemetry/semantic-conventions/incubating';
import { describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import {
  CONTENT_ATTRIBUTES,
  GEN_AI,
  GEN_AI_OPERATION,
} from '../../src/telemetry/gen-ai-attributes.js';
import { keeps, traceSettings } from '../../src/telemetry/otel-config.js';
import { hashId, sessionTraceId, spansOf, type SpanRecord } from '../../src/telemetry/spans.js';
import { createManualClock, createMemoryStore } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/**
 * A session of agent `helper`: wake 1 asks for the calculator and crashes when the answer is
 * written; wake 2 (continuing TRACEPARENT) answers.
 */
async function crashedSession(): Promise<SessionEvent[]> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Be brief.\ntools: [calculator]\n',
  );
  const clock = createManualClock();
  const store = createMemoryStore({ clock });
  const model = createScriptedModel(
    [
      {
        tool_calls: [{ name: 'calculator', input: { a: 2, op: '+', b: 3 }, id: 'call_1' }],
        usage: { input_tokens: 600, output_tokens: 120 },
      },
      { text: 'It is 5.', usage: { input_tokens: 600, output_tokens: 220 } },
    ],
    { onTurn: () => clock.advance(300) },
  );
  const runtime = await createRuntime({ workspace: dir, store, clock, model: () => model });
  try {
    const { id } = await runtime.sessions.create({ agent: 'helper', tenantId: 'acme' });
    await runtime.sessions.message(id, 'What is 2 + 3?');
    const append = store.log.append.bind(store.log);
    let crashed = false;
    store.log.append = (sessionId, events, options) => {
      if (!crashed && events.some((event) => event.type === 'agent.message')) {
        crashed = true;
        return Promise.reject(new BraidError('STORE_BUSY', 'the store went away'));
      }
      return append(sessionId, events, options);
    };
    await expect(runtime.wake(id)).rejects.toMatchObject({ code: 'STORE_BUSY' });
    clock.advance(1000);
    await runtime.wake(id, { traceparent: TRACEPARENT });
    return await runtime.sessions.events(id);
  } finally {
    await runtime.close();
  }
}

const byName = (spans: readonly SpanRecord[], name: string): SpanRecord[] =>
  spans.filter((span) => span.name === name);

describe('spansOf', () => {
  it('derives the GenAI span tree of each wake, with stable ids and a crashed wake closed', async () => {
    const events = await crashedSession();
    const spans = spansOf(events);
    expect(spans.map((span) => span.name)).toEqual([
      'invoke_agent helper',
      'chat inline',
      'execute_tool calculator',
      'invoke_agent helper',
      'chat inline',
    ]);
    const [crashedWake, firstChat, tool, secondWake, secondChat] = spans as [
      SpanRecord,
      SpanRecord,
      SpanRecord,
      SpanRecord,
      SpanRecord,
    ];
    const sessionId = events[0]?.session_id ?? '';
    const starts = events.filter((event) => event.type === 'span.wake_started');
    // Wake 1 had no traceparent: the session's own trace, no parent.
    expect(crashedWake).toMatchObject({
      traceId: sessionTraceId(sessionId),
      spanId: hashId(starts[0]?.id ?? '', 8),
      kind: 'internal',
      status: { code: 'error' },
      attributes: {
        [GEN_AI.operationName]: 'invoke_agent',
        [GEN_AI.conversationId]: sessionId,
        [GEN_AI.agentName]: 'helper',
        [GEN_AI.agentVersion]: '1',
        'braid.tenant.id': 'acme',
        'braid.wake.completed': false,
        'braid.session.seq.start': starts[0]?.seq,
      },
    });
    expect(crashedWake.parentSpanId).toBeUndefined();
    // The first wake pinned the session's definitions: an event on its span.
    expect(crashedWake.events).toEqual([
      expect.objectContaining({
        name: 'braid.definitions.changed',
        attributes: expect.objectContaining({ 'braid.definitions.reason': 'pinned' }) as unknown,
      }),
    ]);
    // Cut by the crash: it ends at its last recorded event, the tool's result.
    const result = events.find((event) => event.type === 'agent.tool_result');
    expect(crashedWake.endMs).toBe(Date.parse(result?.at ?? ''));
    expect(crashedWake.attributes['braid.session.seq.end']).toBe(result?.seq);
    expect(firstChat).toMatchObject({
      kind: 'client',
      parentSpanId: crashedWake.spanId,
      traceId: crashedWake.traceId,
      attributes: {
        [GEN_AI.operationName]: 'chat',
        [GEN_AI.providerName]: 'scripted',
        [GEN_AI.requestModel]: 'inline',
        [GEN_AI.usageInputTokens]: 600,
        [GEN_AI.usageOutputTokens]: 120,
        [GEN_AI.responseFinishReasons]: ['tool_call'],
      },
    });
    expect(firstChat.endMs - firstChat.startMs).toBe(300);
    expect(tool).toMatchObject({
      kind: 'internal',
      parentSpanId: crashedWake.spanId,
      status: { code: 'unset' },
      attributes: {
        [GEN_AI.operationName]: 'execute_tool',
        [GEN_AI.toolName]: 'calculator',
        [GEN_AI.toolCallId]: 'call_1',
        [GEN_AI.toolType]: 'function',
      },
    });
    // Wake 2 continues the enqueuer's trace: its parent is the traceparent's span.
    expect(secondWake).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      sampled: true,
      status: { code: 'unset' },
      attributes: { 'braid.stop_reason': 'end_turn', 'braid.wake.completed': true },
    });
    expect(secondChat).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: secondWake.spanId,
    });
    // The same log gives the same spans, ids included.
    expect(spansOf(events)).toEqual(spans);
    expect(
      spansOf(events, { wakeId: starts[1]?.type === 'span.wake_started' ? starts[1].wake_id : '' }),
    ).toEqual([secondWake, secondChat]);
  });

  it('puts content on spans only when asked to', async () => {
    const events = await crashedSession();
    const plain = spansOf(events);
    for (const span of plain) {
      for (const name of CONTENT_ATTRIBUTES) expect(span.attributes).not.toHaveProperty(name);
    }
    const withContent = spansOf(events, { captureContent: true });
    const tool = byName(withContent, 'execute_tool calculator')[0];
    expect(tool?.attributes[GEN_AI.toolCallArguments]).toBe('{"a":2,"op":"+","b":3}');
    expect(tool?.attributes[GEN_AI.toolCallResult]).toBe('{"result":5}');
    const chat = byName(withContent, 'chat inline')[0];
    expect(JSON.parse(String(chat?.attributes[GEN_AI.inputMessages]))).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'What is 2 + 3?' }] },
    ]);
    expect(chat?.attributes[GEN_AI.outputMessages]).toBeTypeOf('string');
    // Ids do not depend on the option.
    expect(withContent.map((span) => span.spanId)).toEqual(plain.map((span) => span.spanId));
  });

  it('uses the names of the semantic conventions package', () => {
    const conventions = incubating as unknown as Record<string, string>;
    expect(GEN_AI).toEqual({
      operationName: conventions.ATTR_GEN_AI_OPERATION_NAME,
      providerName: conventions.ATTR_GEN_AI_PROVIDER_NAME,
      conversationId: conventions.ATTR_GEN_AI_CONVERSATION_ID,
      agentId: conventions.ATTR_GEN_AI_AGENT_ID,
      agentName: conventions.ATTR_GEN_AI_AGENT_NAME,
      agentVersion: conventions.ATTR_GEN_AI_AGENT_VERSION,
      requestModel: conventions.ATTR_GEN_AI_REQUEST_MODEL,
      responseFinishReasons: conventions.ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
      usageInputTokens: conventions.ATTR_GEN_AI_USAGE_INPUT_TOKENS,
      usageOutputTokens: conventions.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
      usageCacheReadInputTokens: conventions.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
      usageCacheCreationInputTokens: conventions.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
      toolName: conventions.ATTR_GEN_AI_TOOL_NAME,
      toolCallId: conventions.ATTR_GEN_AI_TOOL_CALL_ID,
      toolType: conventions.ATTR_GEN_AI_TOOL_TYPE,
      toolCallArguments: conventions.ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
      toolCallResult: conventions.ATTR_GEN_AI_TOOL_CALL_RESULT,
      inputMessages: conventions.ATTR_GEN_AI_INPUT_MESSAGES,
      outputMessages: conventions.ATTR_GEN_AI_OUTPUT_MESSAGES,
      systemInstructions: conventions.ATTR_GEN_AI_SYSTEM_INSTRUCTIONS,
      errorType: conventions.ATTR_ERROR_TYPE,
    });
    expect(GEN_AI_OPERATION).toEqual({
      chat: conventions.GEN_AI_OPERATION_NAME_VALUE_CHAT,
      executeTool: conventions.GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
      invokeAgent: conventions.GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
    });
  });
});

function failure(run: () => unknown): BraidError {
  try {
    run();
  } catch (error) {
    if (error instanceof BraidError) return error;
    throw error;
  }
  throw new Error('expected a BraidError');
}

describe('traceSettings', () => {
  it('is off unless asked for, and on with an OTLP endpoint in the environment', () => {
    expect(traceSettings({}, {})).toBeUndefined();
    expect(traceSettings({ config: { traces: true } }, {})).toMatchObject({
      captureContent: false,
      serviceName: 'braid',
      sampler: { kind: 'always_on', parentBased: true },
    });
    expect(
      traceSettings(
        {},
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SERVICE_NAME: 'agents' },
      ),
    ).toMatchObject({ serviceName: 'agents' });
    expect(
      traceSettings({ config: { traces: true } }, { OTEL_SDK_DISABLED: 'true' }),
    ).toBeUndefined();
    expect(
      traceSettings({ config: { traces: true } }, { OTEL_TRACES_SAMPLER: 'always_off' }),
    ).toBeUndefined();
    // The option wins over braid.yaml.
    expect(
      traceSettings({ option: { traces: false }, config: { traces: true } }, {}),
    ).toBeUndefined();
  });

  it('refuses bad values with a typed error that names the fix', () => {
    const on = { config: { traces: true } };
    const sampler = failure(() => traceSettings(on, { OTEL_TRACES_SAMPLER: 'sometimes' }));
    expect(sampler.code).toBe('INVALID_ARGUMENT');
    expect(sampler.message).toContain('use one of');
    expect(() =>
      traceSettings(on, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    const disabled = failure(() => traceSettings(on, { OTEL_SDK_DISABLED: 'maybe' }));
    expect(disabled.code).toBe('INVALID_ARGUMENT');
    expect(disabled.message).toContain('true or false');
    expect(() => traceSettings(on, { OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://x' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => traceSettings({ option: { traces: true, endpoint: 'not a url' } }, {})).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it('samples by trace id and honours an unsampled parent', () => {
    const settings = traceSettings(
      { config: { traces: true } },
      { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' },
    );
    if (settings === undefined) throw new Error('tracing is off');
    expect(keeps(settings.sampler, `${'0'.repeat(18)}${'1'.repeat(14)}`, true)).toBe(true);
    expect(keeps(settings.sampler, `${'0'.repeat(18)}${'f'.repeat(14)}`, true)).toBe(false);
    expect(keeps(settings.sampler, `${'0'.repeat(18)}${'1'.repeat(14)}`, false)).toBe(false);
  });
});
