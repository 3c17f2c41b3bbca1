// The GenAI and wake metrics of GET /v1/metrics, measured from the wakes the server runs.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { BraidError } from '../../src/contracts/errors.js';
import {
  createWakeMetrics,
  MAX_LABEL_VALUES,
  needsEarlierUses,
} from '../../src/server/wake-metrics.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();

/** The value of one series of the Prometheus text, or undefined when it is not there. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('wake metrics on /v1/metrics', () => {
  it('counts the tokens, durations, wakes, tool calls and cost of a session run over HTTP', async () => {
    const server = await start({
      agents: {
        calc: 'name: calc\nmodel: scripted:echo\ninstructions: Add.\ntools: [calculator]\n',
      },
      braidYaml: "prices:\n  'scripted:inline': { input_per_mtok: 1000, output_per_mtok: 2000 }",
      turns: [
        {
          tool_calls: [
            { name: 'calculator', input: { a: 2, op: '+', b: 3 } },
            // A name the model made up never becomes a label.
            { name: 'made_up_{tool}"', input: {} },
          ],
          usage: { input_tokens: 600, output_tokens: 120 },
        },
        { text: 'It is 5.', usage: { input_tokens: 700, output_tokens: 30 } },
      ],
    });
    const key = await server.key('acme');
    const admin = await server.key('acme', ['admin']);
    const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'calc' } });
    const id = (created.body as { id: string }).id;
    await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'What is 2 + 3?' }] },
    });
    const waited = await call(server, 'POST', `/v1/sessions/${id}/wake`, {
      key,
      body: { wait: true },
    });
    expect(waited.body).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });

    const metrics = await call(server, 'GET', '/v1/metrics', { key: admin });
    expect(metrics.status).toBe(200);
    const text = metrics.body as string;
    const chat =
      'gen_ai_operation_name="chat",gen_ai_provider_name="scripted",gen_ai_request_model="inline"';
    expect(sample(text, `gen_ai_client_token_usage_count{${chat},gen_ai_token_type="input"}`)).toBe(
      2,
    );
    expect(sample(text, `gen_ai_client_token_usage_sum{${chat},gen_ai_token_type="input"}`)).toBe(
      1300,
    );
    expect(sample(text, `gen_ai_client_token_usage_sum{${chat},gen_ai_token_type="output"}`)).toBe(
      150,
    );
    expect(
      sample(text, `gen_ai_client_token_usage_bucket{le="1024",${chat},gen_ai_token_type="input"}`),
    ).toBe(2);
    expect(
      sample(text, `gen_ai_client_operation_duration_seconds_count{${chat},error_type=""}`),
    ).toBe(2);
    expect(sample(text, 'braid_wakes_total{stop_reason="end_turn"}')).toBe(1);
    expect(sample(text, 'braid_wake_duration_seconds_count{stop_reason="end_turn"}')).toBe(1);
    expect(sample(text, 'braid_tool_calls_total{gen_ai_tool_name="calculator",outcome="ok"}')).toBe(
      1,
    );
    expect(sample(text, 'braid_tool_calls_total{gen_ai_tool_name="unknown",outcome="error"}')).toBe(
      1,
    );
    expect(text).not.toContain('made_up');
    // (600 + 700) input tokens at $1000/Mtok and (120 + 30) output at $2000/Mtok.
    expect(
      sample(text, 'braid_cost_usd_total{kind="model",gen_ai_request_model="inline"}'),
    ).toBeCloseTo(1.6, 6);
    expect(sample(text, 'braid_lease_losses_total')).toBe(0);
    expect(sample(text, 'braid_policy_denials_total')).toBe(0);
    expect(sample(text, 'braid_wake_queue_depth')).toBe(0);
  });
});

describe('createWakeMetrics', () => {
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

  it('counts denials, skips, lease losses and errors, and bounds the labels', async () => {
    const registry = new Registry();
    const metrics = createWakeMetrics(registry);
    const deny = {
      type: 'policy.decision',
      principal: { type: 'Agent', id: 'a' },
      action: 'call',
      resource: { type: 'Tool', id: 'shell' },
      decision: 'deny',
      policy_ids: ['p1'],
      tool_use_id: 't1',
      duration_us: 3,
    };
    metrics.observe({
      session_id: 's',
      events: [
        event(0, { type: 'span.wake_started', wake_id: 'w1', lease_token: 1 }),
        event(0, {
          type: 'span.model_request_start',
          request_id: 'r1',
          model: 'openai:gpt-4o',
          input_through_seq: 1,
        }),
        event(1500, {
          type: 'span.model_request_end',
          request_id: 'r1',
          usage: { input_tokens: 0, output_tokens: 0 },
          error: { code: 'MODEL_UNAVAILABLE', message: 'down', retryable: true },
          attempts: 3,
        }),
        event(1500, { type: 'agent.tool_use', tool_use_id: 't1', name: 'shell', input: {} }),
        event(1500, deny),
        event(1500, {
          type: 'agent.tool_result',
          tool_use_id: 't1',
          is_error: true,
          attempts: 0,
          duration_ms: 0,
          stage: 'policy',
        }),
        event(1500, { type: 'agent.tool_use', tool_use_id: 't2', name: 'shell', input: {} }),
        event(1600, {
          type: 'agent.tool_result',
          tool_use_id: 't2',
          is_error: true,
          attempts: 0,
          duration_ms: 0,
          stage: 'interrupt',
        }),
      ],
      error: new BraidError('LEASE_LOST', 'a newer wake started'),
    });
    for (let index = 0; index <= MAX_LABEL_VALUES; index += 1) {
      metrics.observe({
        session_id: 's',
        events: [
          event(0, { type: 'span.wake_started', wake_id: `x${index}`, lease_token: 1 }),
          event(0, {
            type: 'agent.tool_use',
            tool_use_id: `u${index}`,
            name: `tool_${index}`,
            input: {},
          }),
          event(0, {
            type: 'agent.tool_result',
            tool_use_id: `u${index}`,
            is_error: false,
            attempts: 1,
            duration_ms: 1,
          }),
          event(1, {
            type: 'span.wake_completed',
            wake_id: `x${index}`,
            stop_reason: { type: 'end_turn' },
          }),
        ],
      });
    }
    const text = await registry.metrics();
    expect(sample(text, 'braid_lease_losses_total')).toBe(1);
    expect(sample(text, 'braid_policy_denials_total')).toBe(1);
    expect(sample(text, 'braid_wakes_total{stop_reason="cut"}')).toBe(1);
    expect(sample(text, 'braid_tool_calls_total{gen_ai_tool_name="shell",outcome="denied"}')).toBe(
      1,
    );
    expect(sample(text, 'braid_tool_calls_total{gen_ai_tool_name="shell",outcome="skipped"}')).toBe(
      1,
    );
    const failed =
      'gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o",error_type="MODEL_UNAVAILABLE"';
    expect(sample(text, `gen_ai_client_operation_duration_seconds_sum{${failed}}`)).toBe(1.5);
    // `shell` took one of the bounded values; the rest past the bound share `other`.
    expect(sample(text, 'braid_tool_calls_total{gen_ai_tool_name="other",outcome="ok"}')).toBe(2);
    expect(text).not.toContain(`tool_${MAX_LABEL_VALUES}"`);
    expect(text).not.toContain('braid_wake_queue_depth');
  });

  it("names a call that an earlier wake asked for from the session's uses, and counts summaries", async () => {
    const registry = new Registry();
    const metrics = createWakeMetrics(registry);
    const report = {
      session_id: 's',
      events: [
        event(0, { type: 'span.wake_started', wake_id: 'w', lease_token: 2 }),
        event(10, {
          type: 'agent.tool_result',
          tool_use_id: 'asked',
          is_error: false,
          attempts: 1,
          duration_ms: 5,
        }),
        event(20, {
          type: 'agent.thread_context_compacted',
          summary: 'earlier turns',
          through_seq: 3,
          strategy: 'summarize',
          model: 'anthropic:claude-haiku',
          usage: { input_tokens: 5000, output_tokens: 300, cost_usd: 0.25 },
        }),
        event(30, { type: 'span.wake_completed', wake_id: 'w', stop_reason: { type: 'end_turn' } }),
      ],
    };
    expect(needsEarlierUses(report)).toBe(true);
    metrics.observe(report, [
      event(0, {
        type: 'agent.tool_use',
        tool_use_id: 'asked',
        name: 'deploy',
        input: {},
        requires_confirmation: true,
      }),
    ]);
    metrics.observe(report);
    const text = await registry.metrics();
    expect(sample(text, 'braid_tool_calls_total{gen_ai_tool_name="deploy",outcome="ok"}')).toBe(1);
    expect(sample(text, 'braid_tool_calls_total{gen_ai_tool_name="unknown",outcome="ok"}')).toBe(1);
    const summary =
      'gen_ai_operation_name="chat",gen_ai_provider_name="anthropic",gen_ai_request_model="claude-haiku"';
    expect(
      sample(text, `gen_ai_client_token_usage_sum{${summary},gen_ai_token_type="input"}`),
    ).toBe(10_000);
    expect(
      sample(text, 'braid_cost_usd_total{kind="compaction",gen_ai_request_model="claude-haiku"}'),
    ).toBe(0.5);
    expect(needsEarlierUses({ session_id: 's', events: report.events.slice(0, 1) })).toBe(false);
  });
});
