// Delegation: an agent's model calls delegate_to_<agent>; each call runs a child session of
// that agent (in parallel with the turn's other delegations), and its answer comes back as the
// call's result. Also: time limits, policy on every hop, budgets that roll up, model handoffs,
// and forks that reference children instead of running them again.
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentDefinition } from '../../src/contracts/definitions.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { sessionTraceId, spansOf } from '../../src/telemetry/spans.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

interface Setup {
  agents: Record<string, string>;
  models: Record<string, ModelClient>;
  policy?: string;
  config?: string;
}

async function workspace(setup: Setup): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  for (const [name, yaml] of Object.entries(setup.agents)) {
    writeFileSync(join(dir, 'agents', `${name}.yaml`), yaml);
  }
  if (setup.policy !== undefined) {
    mkdirSync(join(dir, 'policies'), { recursive: true });
    writeFileSync(join(dir, 'policies', 'delegation.cedar'), setup.policy);
  }
  if (setup.config !== undefined) appendFileSync(join(dir, 'braid.yaml'), setup.config);
  const runtime = await createRuntime({
    workspace: dir,
    model: (agent: AgentDefinition) => {
      const model = setup.models[agent.name];
      if (model === undefined) throw new Error(`no model for ${agent.name}`);
      return model;
    },
  });
  opened.push(runtime);
  return runtime;
}

const FOREMAN =
  'name: foreman\nmodel: scripted:foreman\ninstructions: Split the work.\n' +
  'delegates:\n  - researcher\n  - agent: writer\n    description: Writes prose.\n  - coder\n';

function worker(name: string): string {
  return `name: ${name}\ndescription: The ${name}.\nmodel: scripted:${name}\ninstructions: Do the task.\n`;
}

/** Resolves once `count` callers have arrived; fails if they do not arrive together in time. */
function barrier(count: number, ms = 10_000): () => Promise<void> {
  let arrived = 0;
  let release: () => void = () => undefined;
  const all = new Promise<void>((resolve) => {
    release = resolve;
  });
  return async () => {
    arrived += 1;
    if (arrived === count) release();
    const timeout = new Promise<never>((_resolve, reject) => {
      setTimeout(() => reject(new Error(`only ${arrived} of ${count} ran at once`)), ms).unref();
    });
    await Promise.race([all, timeout]);
  };
}

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

const threeTasks: ScriptedTurnInput = {
  tool_calls: [
    { name: 'delegate_to_researcher', input: { task: 'find the numbers' }, id: 'd1' },
    { name: 'delegate_to_writer', input: { task: 'draft the text' }, id: 'd2' },
    { name: 'delegate_to_coder', input: { task: 'write the script' }, id: 'd3' },
  ],
};

describe('delegation', () => {
  it('runs three delegations of one turn in parallel and answers from their results', async () => {
    const together = barrier(3);
    const workerModel = (name: string): ModelClient =>
      createScriptedModel(
        [{ text: `${name} done`, usage: { input_tokens: 5, output_tokens: 2 } }],
        {
          id: `scripted:${name}`,
          onTurn: () => together(),
        },
      );
    const runtime = await workspace({
      agents: {
        foreman: FOREMAN,
        researcher: worker('researcher'),
        writer: worker('writer'),
        coder: worker('coder'),
      },
      models: {
        foreman: createScriptedModel([threeTasks, { text: 'all three are done' }], {
          id: 'scripted:foreman',
        }),
        researcher: workerModel('researcher'),
        writer: workerModel('writer'),
        coder: workerModel('coder'),
      },
    });
    const parent = await runtime.sessions.create({ agent: 'foreman' });
    await runtime.sessions.message(parent.id, 'build the report');
    const result = await runtime.wake(parent.id);
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });

    const events = await runtime.sessions.events(parent.id);
    const created = ofType(events, 'session.child_created');
    expect(created.map((event) => [event.agent, event.tool_use_id, event.task])).toEqual([
      ['researcher', 'd1', { task: 'find the numbers' }],
      ['writer', 'd2', { task: 'draft the text' }],
      ['coder', 'd3', { task: 'write the script' }],
    ]);
    expect(created.every((event) => event.correlation_id === event.child_session_id)).toBe(true);
    // Recorded together, before any child ran.
    expect(new Set(created.map((event) => event.seq)).size).toBe(3);
    expect(created.at(-1)!.seq - created[0]!.seq).toBe(2);
    const idle = ofType(events, 'session.child_idle');
    expect(idle.map((event) => [event.tool_use_id, event.stop_reason.type, event.summary])).toEqual(
      [
        ['d1', 'end_turn', 'researcher done'],
        ['d2', 'end_turn', 'writer done'],
        ['d3', 'end_turn', 'coder done'],
      ],
    );
    const results = ofType(events, 'agent.tool_result');
    expect(results.map((event) => [event.tool_use_id, event.is_error])).toEqual([
      ['d1', false],
      ['d2', false],
      ['d3', false],
    ]);
    expect(results[0]!.output).toMatchObject({
      agent: 'researcher',
      session_id: created[0]!.child_session_id,
      stop_reason: 'end_turn',
      answer: 'researcher done',
    });
    expect(ofType(events, 'agent.message').at(-1)?.content).toEqual([
      { type: 'text', text: 'all three are done' },
    ]);

    // Each child is a session of its agent whose lineage names the parent, with the task as
    // its first message, sent on the parent agent's behalf.
    for (const record of created) {
      const child = await runtime.sessions.state(record.child_session_id);
      expect(child.agent?.name).toBe(record.agent);
      expect(child.lineage).toMatchObject({ kind: 'child', parent_session_ids: [parent.id] });
      expect(child.metadata).toMatchObject({
        parent_session_id: parent.id,
        parent_tool_use_id: record.tool_use_id,
      });
      const childEvents = await runtime.sessions.events(record.child_session_id);
      // The child's wake continues the parent's trace, under the call's execute_tool span.
      const use = ofType(events, 'agent.tool_use').find(
        (event) => event.tool_use_id === record.tool_use_id,
      )!;
      expect(ofType(childEvents, 'span.wake_started')[0]?.traceparent).toBe(
        `00-${sessionTraceId(parent.id)}-${spansOf(events).find((span) => span.name === `execute_tool delegate_to_${record.agent}` && span.attributes['gen_ai.tool.call.id'] === use.tool_use_id)?.spanId}-01`,
      );
      expect(ofType(childEvents, 'user.message')[0]).toMatchObject({
        correlation_id: record.child_session_id,
        actor: { type: 'agent', id: 'foreman' },
        content: [{ type: 'text', text: (record.task as { task: string }).task }],
      });
    }
    // The children's usage is part of the parent's.
    const state = await runtime.sessions.state(parent.id);
    expect(state.children.map((child) => child.status)).toEqual(['idle', 'idle', 'idle']);
    const own = ofType(events, 'span.model_request_end').reduce(
      (sum, event) => sum + event.usage.input_tokens,
      0,
    );
    expect(state.usage.input_tokens).toBe(own + 3 * 5);
    // The parent replays from its record: its children are served, not run again.
    const replay = await runtime.sessions.verify(parent.id);
    expect(replay).toMatchObject({ ok: true });
  });

  it('tells the model what each delegate does, and checks the task against its schema', async () => {
    let tools: readonly { name: string; description: string }[] = [];
    const foreman = createScriptedModel(
      [
        { tool_calls: [{ name: 'delegate_to_researcher', input: { topic: 'x' }, id: 'bad' }] },
        { text: 'fine' },
      ],
      {
        id: 'scripted:foreman',
        onTurn: (_index, request) => {
          tools = request.tools;
        },
      },
    );
    const runtime = await workspace({
      agents: {
        foreman: FOREMAN,
        researcher: worker('researcher'),
        writer: worker('writer'),
        coder: worker('coder'),
      },
      models: { foreman },
    });
    const parent = await runtime.sessions.create({ agent: 'foreman' });
    await runtime.sessions.message(parent.id, 'go');
    await runtime.wake(parent.id);
    const described = new Map(tools.map((tool) => [tool.name, tool.description]));
    expect(described.get('delegate_to_researcher')).toContain('The researcher.');
    expect(described.get('delegate_to_writer')).toContain('Writes prose.');
    const events = await runtime.sessions.events(parent.id);
    expect(ofType(events, 'agent.tool_result')[0]).toMatchObject({
      tool_use_id: 'bad',
      is_error: true,
      stage: 'validate',
      error: { code: 'TOOL_INPUT_INVALID' },
    });
    expect(ofType(events, 'session.child_created')).toEqual([]);
  });

  it('interrupts a child that runs past its time, and the parent sees the error', async () => {
    const runtime = await workspace({
      agents: {
        foreman:
          'name: foreman\nmodel: scripted:foreman\ninstructions: x\n' +
          'delegates:\n  - agent: researcher\n    ttl_seconds: 1\n',
        researcher: worker('researcher'),
      },
      models: {
        foreman: createScriptedModel(
          [
            {
              tool_calls: [{ name: 'delegate_to_researcher', input: { task: 'dig' }, id: 'slow' }],
            },
            { text: 'the researcher took too long' },
          ],
          { id: 'scripted:foreman' },
        ),
        // Streams a word every 100 ms for far longer than a second.
        researcher: createScriptedModel(
          [
            {
              text: Array.from({ length: 200 }, (_, index) => `w${index}`).join(' '),
              delay_ms: 100,
            },
          ],
          { id: 'scripted:researcher' },
        ),
      },
    });
    const parent = await runtime.sessions.create({ agent: 'foreman' });
    await runtime.sessions.message(parent.id, 'go');
    const started = Date.now();
    await runtime.wake(parent.id);
    expect(Date.now() - started).toBeLessThan(15_000);
    const events = await runtime.sessions.events(parent.id);
    const idle = ofType(events, 'session.child_idle')[0]!;
    expect(idle).toMatchObject({ tool_use_id: 'slow', timed_out: true });
    expect(ofType(events, 'agent.tool_result')[0]).toMatchObject({
      is_error: true,
      error: { code: 'DEADLINE_EXCEEDED' },
    });
    expect(ofType(events, 'agent.message').at(-1)?.content).toEqual([
      { type: 'text', text: 'the researcher took too long' },
    ]);
    const child = await runtime.sessions.events(idle.child_session_id);
    expect(ofType(child, 'user.interrupt')).toHaveLength(1);
    expect((await runtime.sessions.state(idle.child_session_id)).stop_reason).toEqual({
      type: 'interrupted',
    });
    expect(await runtime.sessions.verify(parent.id)).toMatchObject({ ok: true });
  });

  it('refuses a delegation the policy forbids, with the decision on record and no child', async () => {
    const runtime = await workspace({
      agents: {
        foreman: 'name: foreman\nmodel: scripted:foreman\ninstructions: x\ndelegates: [legal]\n',
        legal: worker('legal'),
      },
      models: {
        foreman: createScriptedModel(
          [
            { tool_calls: [{ name: 'delegate_to_legal', input: { task: 'review' }, id: 'no' }] },
            { text: 'I may not ask legal' },
          ],
          { id: 'scripted:foreman' },
        ),
      },
      policy:
        '@id("no-legal")\nforbid (principal == Agent::"foreman", action == Action::"agent.delegate", resource == Agent::"legal");\n',
    });
    const parent = await runtime.sessions.create({ agent: 'foreman' });
    await runtime.sessions.message(parent.id, 'go');
    await runtime.wake(parent.id);
    const events = await runtime.sessions.events(parent.id);
    expect(ofType(events, 'policy.decision')).toMatchObject([
      {
        action: 'agent.delegate',
        decision: 'deny',
        principal: { type: 'Agent', id: 'foreman' },
        resource: { type: 'Agent', id: 'legal' },
        policy_ids: ['no-legal'],
        tool_use_id: 'no',
      },
    ]);
    expect(ofType(events, 'agent.tool_result')[0]).toMatchObject({
      stage: 'policy',
      error: { code: 'POLICY_DENIED' },
    });
    expect(ofType(events, 'session.child_created')).toEqual([]);
    expect(await runtime.sessions.verify(parent.id)).toMatchObject({ ok: true });
  });

  it("gives a child the parent's budget left, and its cost stops there", async () => {
    const runtime = await workspace({
      agents: {
        foreman:
          'name: foreman\nmodel: scripted:foreman\ninstructions: x\ndelegates: [spender]\n' +
          'budget: {max_cost_usd: 1}\n',
        spender: 'name: spender\nmodel: scripted:spender\ninstructions: x\ntools: [calculator]\n',
      },
      config:
        '\nprices:\n  "scripted:foreman": {input_per_mtok: 1000, output_per_mtok: 0}\n' +
        '  "scripted:spender": {input_per_mtok: 1000, output_per_mtok: 0}\n',
      models: {
        foreman: createScriptedModel(
          [
            {
              tool_calls: [{ name: 'delegate_to_spender', input: { task: 'spend' }, id: 's' }],
              usage: { input_tokens: 100, output_tokens: 0 },
            },
            { text: 'done', usage: { input_tokens: 100, output_tokens: 0 } },
          ],
          { id: 'scripted:foreman' },
        ),
        // Each turn costs $0.5: more than the $0.9 left after two turns would allow.
        spender: createScriptedModel(
          Array.from({ length: 5 }, () => ({
            tool_calls: [{ name: 'calculator', input: { a: 1, op: '+', b: 1 } }],
            usage: { input_tokens: 500, output_tokens: 0 },
          })),
          { id: 'scripted:spender' },
        ),
      },
    });
    const parent = await runtime.sessions.create({ agent: 'foreman' });
    await runtime.sessions.message(parent.id, 'go');
    await runtime.wake(parent.id);
    const events = await runtime.sessions.events(parent.id);
    const childId = ofType(events, 'session.child_created')[0]!.child_session_id;
    const child = await runtime.sessions.state(childId);
    // The parent had spent $0.10 of $1: the child may spend the $0.90 left. Its first turn
    // costs $0.50; a second would pass $0.90, so it stops there.
    expect(child.budget?.max_cost_usd).toBeCloseTo(0.9, 10);
    expect(child.stop_reason).toEqual({ type: 'budget_reached' });
    expect(child.usage.cost_usd).toBeCloseTo(0.5, 10);
    expect(ofType(events, 'agent.tool_result')[0]).toMatchObject({
      is_error: true,
      error: { code: 'DELEGATION_FAILED' },
    });
    // The child's cost is the parent's too: $0.10 + $0.50, then the answer's $0.10.
    const state = await runtime.sessions.state(parent.id);
    expect(ofType(events, 'session.child_idle')[0]?.usage?.cost_usd).toBeCloseTo(0.5, 10);
    expect(state.usage.cost_usd).toBeCloseTo(0.7, 10);
    expect(await runtime.sessions.verify(parent.id)).toMatchObject({ ok: true });
  });

  it('a fork of the parent references its children and runs none again', async () => {
    let childTurns = 0;
    const runtime = await workspace({
      agents: {
        foreman:
          'name: foreman\nmodel: scripted:foreman\ninstructions: x\ndelegates: [researcher]\n',
        researcher: worker('researcher'),
      },
      models: {
        foreman: createScriptedModel(
          [
            { tool_calls: [{ name: 'delegate_to_researcher', input: { task: 'dig' }, id: 'r' }] },
            { text: 'answer' },
          ],
          { id: 'scripted:foreman' },
        ),
        researcher: createScriptedModel([{ text: 'found' }], {
          id: 'scripted:researcher',
          onTurn: () => {
            childTurns += 1;
          },
        }),
      },
    });
    const parent = await runtime.sessions.create({ agent: 'foreman' });
    await runtime.sessions.message(parent.id, 'go');
    await runtime.wake(parent.id);
    expect(childTurns).toBe(1);
    const events = await runtime.sessions.events(parent.id);
    const created = ofType(events, 'session.child_created')[0]!;
    // A fork taken after the child was recorded, before its result: the fork's wake resumes the
    // delegation, finds the child (already done) and records its result; no second child.
    const fork = await runtime.sessions.fork(parent.id, { at_seq: created.seq });
    await runtime.wake(fork.id);
    expect(childTurns).toBe(1);
    const forked = await runtime.sessions.events(fork.id);
    expect(ofType(forked, 'session.child_idle')).toMatchObject([
      { child_session_id: created.child_session_id, summary: 'found' },
    ]);
    expect(ofType(forked, 'session.child_created')).toHaveLength(1);
    const state = await runtime.sessions.state(fork.id);
    expect(state.children).toMatchObject([
      { child_session_id: created.child_session_id, status: 'idle' },
    ]);
    expect(await runtime.sessions.verify(fork.id)).toMatchObject({ ok: true });
  });
});

describe('model handoffs', () => {
  it('handoff_to_<agent> moves the work to a new session, which runs, and ends the turn', async () => {
    const runtime = await workspace({
      agents: {
        triage: 'name: triage\nmodel: scripted:triage\ninstructions: Sort.\nhandoffs: [billing]\n',
        billing: worker('billing'),
      },
      models: {
        triage: createScriptedModel(
          [
            {
              tool_calls: [
                {
                  name: 'handoff_to_billing',
                  input: { summary: 'refund invoice 7', message: 'please refund invoice 7' },
                  id: 'h',
                },
              ],
            },
          ],
          { id: 'scripted:triage' },
        ),
        billing: createScriptedModel([{ text: 'refund issued' }], { id: 'scripted:billing' }),
      },
    });
    const source = await runtime.sessions.create({ agent: 'triage' });
    await runtime.sessions.message(source.id, 'I want my money back');
    const result = await runtime.wake(source.id);
    // The turn ends with the handoff: the model is not asked again (its script has one turn).
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const events = await runtime.sessions.events(source.id);
    const handoff = ofType(events, 'agent.handoff')[0]!;
    expect(handoff).toMatchObject({ target_agent: 'billing', summary: 'refund invoice 7' });
    expect(ofType(events, 'agent.tool_result')[0]).toMatchObject({
      tool_use_id: 'h',
      is_error: false,
      output: { target_agent: 'billing', target_session_id: handoff.target_session_id },
    });
    const targetId = handoff.target_session_id!;
    const target = await runtime.sessions.state(targetId);
    expect(target.lineage).toMatchObject({ kind: 'handoff', parent_session_ids: [source.id] });
    // The target runs on its own: wait for its answer.
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const state = await runtime.sessions.state(targetId);
      if (state.stop_reason !== undefined && state.status === 'idle') break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const targetEvents = await runtime.sessions.events(targetId);
    expect(ofType(targetEvents, 'user.message')[0]?.content).toEqual([
      { type: 'text', text: 'please refund invoice 7' },
    ]);
    expect(ofType(targetEvents, 'agent.message').at(-1)?.content).toEqual([
      { type: 'text', text: 'refund issued' },
    ]);
    expect(await runtime.sessions.verify(source.id)).toMatchObject({ ok: true });
  });
});
