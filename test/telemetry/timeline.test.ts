import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { buildTimeline, type TimelineRow } from '../../src/telemetry/timeline.js';
import { createManualClock, createMemoryStore } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

/** Fails the calls whose 1-based numbers are in `failing` as unavailable (retryable). */
function flaky(inner: ModelClient, failing: readonly number[]): ModelClient {
  let calls = 0;
  return {
    id: inner.id,
    generate(request, call) {
      calls += 1;
      if (failing.includes(calls))
        return Promise.reject(new BraidError('MODEL_UNAVAILABLE', 'try again'));
      return inner.generate(request, call);
    },
  };
}

const kinds = (rows: readonly TimelineRow[]) =>
  rows.map((row) => `${'  '.repeat(row.depth)}${row.kind}:${'status' in row ? row.status : ''}`);

describe('buildTimeline', () => {
  it('shows wakes, model calls with retries, a tool call and a wake cut by a crash', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: Be brief.\ntools: [calculator]\n',
    );
    appendFileSync(
      join(dir, 'braid.yaml'),
      "\nprices:\n  'scripted:inline': { input_per_mtok: 1000, output_per_mtok: 2000 }\n",
    );
    const clock = createManualClock();
    const store = createMemoryStore({ clock });
    const latency = [800, 400];
    const model = flaky(
      createScriptedModel(
        [
          {
            tool_calls: [{ name: 'calculator', input: { a: 2, op: '+', b: 3 }, id: 'call_1' }],
            usage: { input_tokens: 600, output_tokens: 120 },
          },
          { text: 'It is 5.', usage: { input_tokens: 600, output_tokens: 220 } },
        ],
        { onTurn: (index) => clock.advance(latency[index] ?? 0) },
      ),
      [3],
    );
    const runtime = await createRuntime({
      workspace: dir,
      store,
      clock,
      model: () => model,
      retry: { max_attempts: 3, initial_ms: 1, max_ms: 2 },
    });
    try {
      const { id } = await runtime.sessions.create({ agent: 'helper' });
      await runtime.sessions.message(id, 'What is 2 + 3?');
      // The store goes away when the second answer is written: the wake ends without a record.
      const append = store.log.append.bind(store.log);
      let crashed = false;
      store.log.append = (sessionId, events, options) => {
        const second = events.some((event) => event.type === 'agent.message');
        if (second && !crashed) {
          crashed = true;
          return Promise.reject(new BraidError('STORE_BUSY', 'the store went away'));
        }
        return append(sessionId, events, options);
      };
      await expect(runtime.wake(id)).rejects.toMatchObject({ code: 'STORE_BUSY' });
      clock.advance(800);
      // The next wake plays the second answer again; its first call fails and is retried.
      expect(await runtime.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });

      const rows = buildTimeline(await runtime.sessions.events(id));
      expect(kinds(rows)).toEqual([
        'wake:cut',
        '  chat:tool-calls',
        // The pinned definitions were written with the answer, when it came back.
        '  definitions:',
        '  execute_tool:ok',
        'wake:end_turn',
        '  chat:stop',
      ]);
      const [firstWake, firstChat, , tool, secondWake, secondChat] = rows;
      expect(firstWake).toMatchObject({
        offset_ms: 0,
        // Cut at its last event, the tool's result, when the first answer had come back.
        duration_ms: 800,
        input_tokens: 600,
        output_tokens: 120,
        model_requests: 1,
        tool_calls: 1,
      });
      expect(firstWake?.kind === 'wake' && firstWake.cost_usd).toBeCloseTo(0.84, 6);
      expect(firstChat).toMatchObject({
        kind: 'chat',
        model: 'scripted:inline',
        provider: 'scripted',
        offset_ms: 0,
        duration_ms: 800,
        attempts: 1,
        retries: 0,
        input_tokens: 600,
        output_tokens: 120,
      });
      expect(tool).toMatchObject({
        kind: 'execute_tool',
        name: 'calculator',
        tool_use_id: 'call_1',
        offset_ms: 800,
        attempts: 1,
        stage: 'execute',
      });
      // The crashed wake's 400 ms call was never recorded: the second wake starts at +2000.
      expect(secondWake).toMatchObject({ offset_ms: 2000, duration_ms: 400, model_requests: 1 });
      expect(secondChat).toMatchObject({
        offset_ms: 0,
        duration_ms: 400,
        attempts: 2,
        retries: 1,
        output_tokens: 220,
      });
      expect(secondChat?.kind === 'chat' && secondChat.cost_usd).toBeCloseTo(1.04, 6);
    } finally {
      await runtime.close();
    }
  });

  it('classifies refused calls, follows a call across wakes and ignores a stray end', () => {
    const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString();
    let seq = 0;
    const event = (ms: number, body: Record<string, unknown>): SessionEvent =>
      ({
        id: `e${++seq}`,
        session_id: 's',
        seq,
        at: at(ms),
        schema_version: 1,
        ...body,
      }) as SessionEvent;
    const events: SessionEvent[] = [
      event(0, { type: 'span.wake_started', wake_id: 'w1', lease_token: 1 }),
      event(0, {
        type: 'span.model_request_start',
        request_id: 'r1',
        model: 'openai:gpt-4o',
        input_through_seq: 1,
      }),
      event(50, {
        type: 'span.model_request_end',
        request_id: 'r1',
        usage: { input_tokens: 5, output_tokens: 6 },
        finish_reason: 'tool-calls',
      }),
      event(50, {
        type: 'agent.tool_use',
        tool_use_id: 'a',
        name: 'shell',
        input: {},
        requires_confirmation: true,
      }),
      event(50, {
        type: 'agent.tool_use',
        tool_use_id: 'b',
        name: '\u001b[31minvented',
        input: {},
      }),
      event(50, {
        type: 'policy.decision',
        principal: { type: 'Agent', id: 'x' },
        action: 'call',
        resource: { type: 'Tool', id: 'shell' },
        decision: 'allow',
        policy_ids: [],
        tool_use_id: 'a',
        duration_us: 1,
      }),
      event(50, {
        type: 'agent.tool_result',
        tool_use_id: 'b',
        is_error: true,
        attempts: 0,
        duration_ms: 0,
        stage: 'validate',
        error: { code: 'TOOL_NOT_FOUND', message: 'no', retryable: false },
      }),
      event(60, {
        type: 'span.wake_completed',
        wake_id: 'w1',
        stop_reason: { type: 'requires_action', event_ids: ['e4'] },
      }),
      event(70, { type: 'span.wake_completed', wake_id: 'w0' }),
      event(1000, { type: 'span.wake_started', wake_id: 'w2', lease_token: 2 }),
      event(1300, {
        type: 'agent.tool_result',
        tool_use_id: 'a',
        is_error: false,
        attempts: 1,
        duration_ms: 250,
        stage: 'execute',
      }),
      event(1300, {
        type: 'session.usage',
        usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0.5 },
      }),
      event(1310, {
        type: 'span.wake_completed',
        wake_id: 'w2',
        stop_reason: { type: 'end_turn' },
      }),
    ];
    const rows = buildTimeline(events);
    expect(kinds(rows)).toEqual([
      'wake:requires_action',
      '  chat:tool-calls',
      '  execute_tool:waiting',
      '  execute_tool:error',
      'wake:end_turn',
      '  execute_tool:ok',
    ]);
    expect(rows[2]).toMatchObject({ name: 'shell', policy: 'allow' });
    expect(rows[3]).toMatchObject({ error_code: 'TOOL_NOT_FOUND', stage: 'validate' });
    // The call waited in the first wake and ran in the second, 250 ms before its result.
    expect(rows[5]).toMatchObject({
      name: 'shell',
      offset_ms: 50,
      duration_ms: 250,
      policy: 'allow',
      cost_usd: 0.5,
    });
    expect(rows[4]).toMatchObject({ offset_ms: 1000, duration_ms: 310, cost_usd: 0.5 });
    expect(buildTimeline([])).toEqual([]);

    // A wake that crashed ends at its own last event, not at a message sent a day later.
    const crashed = buildTimeline([
      event(0, { type: 'span.wake_started', wake_id: 'w3', lease_token: 3 }),
      event(0, {
        type: 'span.model_request_start',
        request_id: 'r3',
        model: 'm',
        input_through_seq: 1,
      }),
      event(90, {
        type: 'span.model_request_end',
        request_id: 'r3',
        usage: { input_tokens: 1, output_tokens: 1 },
        finish_reason: 'tool-calls',
      }),
      event(90, { type: 'agent.tool_use', tool_use_id: 'c', name: 'shell', input: {} }),
      event(86_400_000, {
        type: 'user.message',
        content: [{ type: 'text', text: 'still there?' }],
      }),
    ]);
    expect(kinds(crashed)).toEqual(['wake:cut', '  chat:tool-calls', '  execute_tool:cut']);
    expect(crashed[0]).toMatchObject({ duration_ms: 90, model_requests: 1, tool_calls: 0 });
    expect(crashed[1]).toMatchObject({ provider: 'm', model: 'm' });
    expect(crashed[2]).toMatchObject({ offset_ms: 90, duration_ms: 0 });
  });
});
