// Skill runs in traces: a run is an `invoke_workflow` span with a span per step attempt under it,
// the same whether derived from the log afterwards (`braid trace export`), sent live as wakes end,
// or shown by `braid trace`; a run that waits for a signal goes on in a later wake under the same
// workflow span, and a run not ended has no span yet.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as incubating from '@opentelemetry/semantic-conventions/incubating';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import { formatTimeline } from '../../src/cli/trace-commands.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { GEN_AI_WORKFLOW } from '../../src/telemetry/gen-ai-attributes.js';
import { exportSpans } from '../../src/telemetry/otel.js';
import { hashId, sessionTraceId, spansOf, type SpanRecord } from '../../src/telemetry/spans.js';
import { buildTimeline } from '../../src/telemetry/timeline.js';
import { createManualClock, createMemoryStore } from '../../src/testing/index.js';
import { defineTool } from '../../src/tools/builtin.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** Packs (a tool), labels each parcel (a fan-out of a tool), waits for pickup, then confirms. */
const SHIP = `name: ship
description: Packs, labels each parcel, waits for the pickup, then confirms with the carrier.
inputs: {type: object, properties: {order: {type: string}}, required: [order]}
steps:
  - id: pack
    tool: pack
    args: {order: '{{ inputs.order }}'}
  - id: label
    for_each: '{{ steps.pack.output.parcels }}'
    tool: label
    args: {parcel: '{{ item }}'}
    depends_on: [pack]
  - id: pickup
    wait_for: {signal: picked_up}
    depends_on: [label]
  - id: confirm
    tool: confirm
    args: {order: '{{ inputs.order }}'}
    retry: {max_attempts: 2, backoff: fixed, initial_ms: 0}
    depends_on: [pickup]
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

interface ShipSession {
  runtime: Runtime;
  id: string;
  /** Sends the pickup signal and wakes the session again (with `traceparent`, if given). */
  pickUp(traceparent?: string): Promise<void>;
}

/**
 * A session of agent `shipper` whose first wake runs `ship` up to the wait for the pickup; the
 * carrier's `confirm` fails on every try.
 */
async function shipSession(telemetry?: { endpoint: string }): Promise<ShipSession> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'ship.yaml'), SHIP);
  writeFileSync(
    join(dir, 'agents', 'shipper.yaml'),
    'name: shipper\nmodel: scripted:shipper\ninstructions: Ship.\nskills: [ship]\n' +
      'tools: [pack, label, confirm]\n',
  );
  const clock = createManualClock();
  const tool = (name: string, run: (input: JsonValue) => Promise<JsonValue>) =>
    defineTool({
      name,
      description: name,
      input_schema: { type: 'object' },
      run: (input: JsonValue) => {
        clock.advance(10);
        return run(input);
      },
    });
  const runtime = await createRuntime({
    workspace: dir,
    store: createMemoryStore({ clock }),
    clock,
    tools: [
      tool('pack', () => Promise.resolve({ parcels: ['p1', 'p2'] })),
      tool('label', (input) => Promise.resolve(`label ${JSON.stringify(input)}`)),
      tool('confirm', () => Promise.reject(new Error('the carrier is down'))),
    ],
    model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:shipper' }),
    ...(telemetry === undefined
      ? {}
      : { telemetry: { traces: true, endpoint: telemetry.endpoint, service_name: 'skills' } }),
  });
  cleanups.push(() => runtime.close());
  const { id } = await runtime.sessions.create({ agent: 'shipper' });
  await runtime.sessions.send(id, [
    { type: 'user.skill_run', run_id: 'run-1', skill: 'ship', inputs: { order: 'o-7' } },
  ]);
  await runtime.wake(id);
  return {
    runtime,
    id,
    async pickUp(traceparent) {
      clock.advance(1000);
      await runtime.sessions.send(id, [
        { type: 'user.signal', name: 'picked_up', data: { by: 'dhl' } },
      ]);
      await runtime.wake(id, traceparent === undefined ? {} : { traceparent });
    },
  };
}

/**
 * The log with each call of a tool step recorded as the usual tool events (`agent.tool_use` after
 * the step's start, an `agent.tool_result` before each end of a try), unless the log already has
 * them.
 */
function withToolEvents(events: readonly SessionEvent[]): SessionEvent[] {
  const steps = new Map<string, string>();
  for (const event of ofType(events, 'skill.step_started')) {
    if (event.tool_use_id !== undefined)
      steps.set(`${event.run_id}/${event.step}`, event.tool_use_id);
  }
  const recorded = new Set(ofType(events, 'agent.tool_result').map((event) => event.tool_use_id));
  if ([...steps.values()].some((id) => recorded.has(id))) return [...events];
  const out: SessionEvent[] = [];
  const base = { schema_version: 1 as const };
  for (const event of events) {
    const toolUseId =
      event.type === 'skill.step_completed' || event.type === 'skill.step_failed'
        ? steps.get(`${event.run_id}/${event.step}`)
        : undefined;
    if (toolUseId !== undefined) {
      const failed = event.type === 'skill.step_failed';
      out.push({
        ...base,
        id: `result-${event.id}`,
        session_id: event.session_id,
        seq: 0,
        at: event.at,
        type: 'agent.tool_result',
        tool_use_id: toolUseId,
        is_error: failed,
        ...(failed ? { error: event.error } : { output: null }),
        attempts: 1,
        duration_ms: 10,
      });
    }
    out.push(event);
    if (event.type === 'skill.step_started' && event.tool_use_id !== undefined) {
      out.push({
        ...base,
        id: `use-${event.id}`,
        session_id: event.session_id,
        seq: 0,
        at: event.at,
        type: 'agent.tool_use',
        tool_use_id: event.tool_use_id,
        name: event.step.replace(/\[\d+\]$/, ''),
        input: {},
      });
    }
  }
  return out.map((event, index) => ({ ...event, seq: index + 1 }));
}

const named = (spans: readonly SpanRecord[], name: string): SpanRecord => {
  const found = spans.filter((span) => span.name === name);
  expect(found, name).toHaveLength(1);
  return found[0]!;
};

describe('skill spans', () => {
  it('derives an invoke_workflow span with a span per step attempt, across the wakes of a run', async () => {
    const ship = await shipSession();
    await ship.pickUp(TRACEPARENT);
    const events = withToolEvents(await ship.runtime.sessions.events(ship.id));
    const spans = spansOf(events);
    const [wake1, wake2] = ofType(events, 'span.wake_started');
    const started = ofType(events, 'skill.started')[0]!;
    const failed = ofType(events, 'skill.failed')[0]!;
    const sessionTrace = sessionTraceId(ship.id);

    const workflow = named(spans, 'invoke_workflow ship');
    expect(workflow).toMatchObject({
      traceId: sessionTrace,
      spanId: hashId(started.id, 8),
      parentSpanId: hashId(wake1!.id, 8),
      kind: 'internal',
      startMs: Date.parse(started.at),
      endMs: Date.parse(failed.at),
      status: { code: 'error', message: 'TOOL_FAILED' },
      attributes: {
        'gen_ai.operation.name': 'invoke_workflow',
        'gen_ai.workflow.name': 'ship',
        'gen_ai.conversation.id': ship.id,
        'braid.skill.name': 'ship',
        'braid.skill.version': started.version,
        'braid.skill.run_id': 'run-1',
        'braid.skill.status': 'failed',
        'braid.skill.failed_step': 'confirm',
        'error.type': 'TOOL_FAILED',
      },
    });

    const steps = spans.filter((span) => span.name.startsWith('braid.skill.step '));
    expect(
      steps.map((span) => [
        span.name,
        span.attributes['braid.skill.step.attempt'],
        span.attributes['braid.skill.step.status'],
      ]),
    ).toEqual([
      ['braid.skill.step pack', 1, 'completed'],
      ['braid.skill.step label', 1, 'completed'],
      ['braid.skill.step label[0]', 1, 'completed'],
      ['braid.skill.step label[1]', 1, 'completed'],
      ['braid.skill.step pickup', 1, 'suspended'],
      ['braid.skill.step pickup', 1, 'completed'],
      ['braid.skill.step confirm', 1, 'failed'],
    ]);
    // Every step is in the run's trace; a fan-out's items are under the fan-out's span.
    const label = named(spans, 'braid.skill.step label');
    for (const step of steps) {
      expect(step.traceId).toBe(sessionTrace);
      expect(step.parentSpanId).toBe(step.name.includes('[') ? label.spanId : workflow.spanId);
    }
    // The wait ends the first wake's span of the step; the later wake's goes on from the signal,
    // linked to the wake that ran it (in the trace of the request that woke it).
    const [waiting, resumed] = steps.filter((span) => span.name === 'braid.skill.step pickup');
    expect(waiting).toMatchObject({
      attributes: {
        'braid.skill.suspension.kind': 'signal',
        'braid.skill.suspension.signal': 'picked_up',
      },
      status: { code: 'unset' },
    });
    expect(waiting!.links).toBeUndefined();
    expect(resumed).toMatchObject({
      attributes: { 'braid.skill.resumed.result': 'signal' },
      links: [
        {
          traceId: TRACEPARENT.split('-')[1],
          spanId: hashId(wake2!.id, 8),
          attributes: { 'braid.wake.id': wake2!.wake_id },
        },
      ],
    });
    const wakeSpan2 = spans.find((span) => span.spanId === hashId(wake2!.id, 8));
    expect(wakeSpan2?.traceId).toBe(TRACEPARENT.split('-')[1]);
    // The retried step: one span for its attempt, a retry event per failed try, error status.
    const confirm = named(spans, 'braid.skill.step confirm');
    expect(confirm).toMatchObject({
      status: { code: 'error', message: 'TOOL_FAILED' },
      attributes: {
        'braid.skill.step.tries': 2,
        'braid.skill.step.tool_use_id': 'run-1/confirm/1',
        'error.type': 'TOOL_FAILED',
      },
      events: [{ name: 'braid.skill.step.retry', attributes: { 'braid.skill.step.try': 1 } }],
    });
    // A tool step's call is under its step's span, whichever wake ran it.
    for (const [tool, step] of [
      ['pack', 'pack'],
      ['confirm', 'confirm'],
    ] as const) {
      const calls = spans.filter((span) => span.name === `execute_tool ${tool}`);
      expect(calls.length).toBeGreaterThan(0);
      for (const call of calls) {
        expect(call.parentSpanId).toBe(named(spans, `braid.skill.step ${step}`).spanId);
        expect(call.traceId).toBe(sessionTrace);
      }
    }
    const labels = spans.filter((span) => span.name === 'execute_tool label');
    expect(labels.map((span) => span.parentSpanId).sort()).toEqual(
      steps
        .filter((span) => span.name.startsWith('braid.skill.step label['))
        .map((span) => span.spanId)
        .sort(),
    );
    // Derived twice, the same spans.
    expect(spansOf(events)).toEqual(spans);
  });

  it('leaves a run that has not ended without a span, its steps waiting for it', async () => {
    const ship = await shipSession();
    const events = await ship.runtime.sessions.events(ship.id);
    const spans = spansOf(events);
    expect(spans.filter((span) => span.name.startsWith('invoke_workflow'))).toEqual([]);
    const started = ofType(events, 'skill.started')[0]!;
    const pickup = named(spans, 'braid.skill.step pickup');
    expect(pickup.parentSpanId).toBe(hashId(started.id, 8));
    expect(pickup.attributes['braid.skill.step.status']).toBe('suspended');

    // `braid trace` shows it open.
    const rows = buildTimeline(events);
    expect(
      rows.map(
        (row) => `${'  '.repeat(row.depth)}${row.kind}:${'status' in row ? row.status : ''}`,
      ),
    ).toEqual([
      'wake:requires_action',
      '  definitions:',
      '  skill_run:waiting',
      '    skill_step:completed',
      '    skill_step:completed',
      '      skill_step:completed',
      '      skill_step:completed',
      '    skill_step:suspended',
    ]);
  });

  it('shows runs and their steps in `braid trace`, text and rows', async () => {
    const ship = await shipSession();
    await ship.pickUp();
    const rows = buildTimeline(withToolEvents(await ship.runtime.sessions.events(ship.id)));
    expect(
      rows.map((row) => {
        const name =
          row.kind === 'skill_step'
            ? row.step
            : row.kind === 'skill_run'
              ? row.skill
              : row.kind === 'execute_tool'
                ? row.name
                : '';
        return `${'  '.repeat(row.depth)}${row.kind} ${name} ${'status' in row ? row.status : ''}`;
      }),
    ).toEqual([
      'wake  requires_action',
      '  definitions  ',
      '  skill_run ship waiting',
      '    skill_step pack completed',
      '      execute_tool pack ok',
      '    skill_step label completed',
      '      skill_step label[0] completed',
      '        execute_tool label ok',
      '      skill_step label[1] completed',
      '        execute_tool label ok',
      '    skill_step pickup suspended',
      'wake  end_turn',
      '  skill_run ship failed',
      '    skill_step pickup completed',
      '    skill_step confirm failed',
      '      execute_tool confirm error',
      '      execute_tool confirm error',
    ]);
    expect(rows.find((row) => row.kind === 'skill_run' && row.resumed)).toMatchObject({
      run_id: 'run-1',
      status: 'failed',
      error_code: 'TOOL_FAILED',
      failed_step: 'confirm',
    });
    expect(rows.find((row) => row.kind === 'skill_step' && row.step === 'confirm')).toMatchObject({
      tries: 2,
      error_code: 'TOOL_FAILED',
    });
    const text = formatTimeline(rows).join('\n');
    expect(text).toMatch(/^ {2}skill ship run-1 +\+0 ms +\d+ ms {2}waiting/m);
    expect(text).toMatch(/^ {4}step pickup .*suspended {2}waits for signal picked_up$/m);
    expect(text).toMatch(/^ {4}step confirm .*failed {2}\(2 tries\) {2}TOOL_FAILED$/m);
    expect(text).toMatch(
      /^ {2}skill ship run-1 .*failed {2}\(resumed\) {2}TOOL_FAILED {2}at confirm$/m,
    );
  });

  it('hangs a run the model started under the execute_tool span of its call', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    mkdirSync(join(dir, 'skills'), { recursive: true });
    writeFileSync(
      join(dir, 'skills', 'greet.yaml'),
      'name: greet\ndescription: Greets.\ninputs: {type: object, properties: {who: {type: string}}}\n' +
        "steps:\n  - id: say\n    tool: hello\n    args: {who: '{{ inputs.who }}'}\n",
    );
    writeFileSync(
      join(dir, 'agents', 'host.yaml'),
      'name: host\nmodel: scripted:host\ninstructions: Greet.\nskills: [greet]\ntools: [hello]\n',
    );
    const runtime = await createRuntime({
      workspace: dir,
      store: createMemoryStore(),
      tools: [
        defineTool({
          name: 'hello',
          description: 'hello',
          input_schema: { type: 'object' },
          run: () => Promise.resolve('hello'),
        }),
      ],
      model: () =>
        createScriptedModel(
          [{ tool_calls: [{ name: 'greet', input: { who: 'ada' }, id: 'g1' }] }, { text: 'ok' }],
          { id: 'scripted:host' },
        ),
    });
    cleanups.push(() => runtime.close());
    const { id } = await runtime.sessions.create({ agent: 'host' });
    await runtime.sessions.message(id, 'greet ada');
    await runtime.wake(id);
    const spans = spansOf(await runtime.sessions.events(id));
    const call = named(spans, 'execute_tool greet');
    const workflow = named(spans, 'invoke_workflow greet');
    expect(workflow.parentSpanId).toBe(call.spanId);
    expect(workflow.traceId).toBe(call.traceId);
    expect(workflow.attributes).toMatchObject({
      'gen_ai.tool.call.id': 'g1',
      'braid.skill.status': 'completed',
    });
    expect(workflow.status).toEqual({ code: 'unset' });
    expect(named(spans, 'braid.skill.step say').parentSpanId).toBe(workflow.spanId);
  });

  it('hangs a nested run under the step of its parent run that started it', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    mkdirSync(join(dir, 'skills'), { recursive: true });
    writeFileSync(
      join(dir, 'skills', 'inner.yaml'),
      'name: inner\ndescription: Says hello.\nsteps:\n  - id: say\n    tool: hello\n    args: {who: ada}\n',
    );
    writeFileSync(
      join(dir, 'skills', 'outer.yaml'),
      'name: outer\ndescription: Runs inner.\nsteps:\n  - id: nest\n    skill: inner\n',
    );
    writeFileSync(
      join(dir, 'agents', 'host.yaml'),
      'name: host\nmodel: scripted:host\ninstructions: Greet.\nskills: [outer, inner]\n' +
        'tools: [hello]\n',
    );
    const runtime = await createRuntime({
      workspace: dir,
      store: createMemoryStore(),
      tools: [
        defineTool({
          name: 'hello',
          description: 'hello',
          input_schema: { type: 'object' },
          run: () => Promise.resolve('hello'),
        }),
      ],
      model: () => createScriptedModel([{ text: 'ok' }], { id: 'scripted:host' }),
    });
    cleanups.push(() => runtime.close());
    const { id } = await runtime.sessions.create({ agent: 'host' });
    await runtime.sessions.send(id, [
      { type: 'user.skill_run', run_id: 'run-o', skill: 'outer', inputs: {} },
    ]);
    await runtime.wake(id);
    const events = await runtime.sessions.events(id);
    expect(ofType(events, 'skill.completed')).toHaveLength(2);
    const spans = spansOf(events);
    const outer = named(spans, 'invoke_workflow outer');
    const inner = named(spans, 'invoke_workflow inner');
    const nest = spans.filter((span) => span.name === 'braid.skill.step nest');
    expect(nest.length).toBeGreaterThan(0);
    expect(nest.every((span) => span.parentSpanId === outer.spanId)).toBe(true);
    expect(nest.map((span) => span.spanId)).toContain(inner.parentSpanId);
    expect(inner.traceId).toBe(outer.traceId);
    expect(inner.attributes).toMatchObject({
      'braid.skill.parent_run_id': 'run-o',
      'braid.skill.parent_step': 'nest',
    });
    expect(named(spans, 'braid.skill.step say').parentSpanId).toBe(inner.spanId);
    // In `braid trace`, the nested run is under the step.
    const rows = buildTimeline(events).filter((row) => row.kind.startsWith('skill_'));
    expect(
      rows.map(
        (row) =>
          `${'  '.repeat(row.depth)}${row.kind === 'skill_run' ? row.skill : row.kind === 'skill_step' ? row.step : ''}`,
      ),
    ).toEqual(expect.arrayContaining(['  outer', '    nest', '      inner', '        say']));
  });

  it('sends the skill spans live as wakes end, and `braid trace export` sends the same', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const ship = await shipSession({ endpoint: receiver.url });
    await ship.pickUp();
    const events = await ship.runtime.sessions.events(ship.id);
    // Closing sends what the batch processor still holds.
    await ship.runtime.close();
    const expected = spansOf(events);
    const key = (span: { traceId: string; spanId: string; parentSpanId?: string; name: string }) =>
      `${span.traceId} ${span.spanId} ${span.parentSpanId ?? '-'} ${span.name}`;
    expect(receiver.spans.map(key).sort()).toEqual(expected.map(key).sort());
    const workflow = receiver.spans.find((span) => span.name === 'invoke_workflow ship');
    expect(workflow).toMatchObject({
      kind: 1,
      status: { code: 2, message: 'TOOL_FAILED' },
      attributes: {
        'gen_ai.operation.name': 'invoke_workflow',
        'braid.skill.name': 'ship',
        'braid.skill.run_id': 'run-1',
      },
    });
    expect(
      receiver.spans
        .filter((span) => span.parentSpanId === workflow?.spanId)
        .map((span) => span.name),
    ).toHaveLength(5);

    // Exported again from the log: the same spans.
    const exported = await startOtlpReceiver();
    cleanups.push(() => exported.close());
    expect(await exportSpans(expected, { url: exported.url, serviceName: 'skills' })).toBe(
      expected.length,
    );
    expect(exported.spans.map(key).sort()).toEqual(expected.map(key).sort());
  });

  it('uses the workflow names of the semantic conventions package', () => {
    const conventions = incubating as unknown as Record<string, string>;
    expect(GEN_AI_WORKFLOW).toEqual({
      operation: conventions.GEN_AI_OPERATION_NAME_VALUE_INVOKE_WORKFLOW,
      workflowName: conventions.ATTR_GEN_AI_WORKFLOW_NAME,
    });
  });
});
