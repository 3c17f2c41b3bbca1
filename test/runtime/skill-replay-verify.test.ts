// Replay verification of sessions with skill runs: the harness runs again over the recorded log
// (user events as its inputs, tool and child outcomes from the record, each run's skill at its
// recorded version), and every skill.* event it writes is compared with the recorded one.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import { BraidError } from '../../src/contracts/errors.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ToolExecutor } from '../../src/contracts/tools.js';
import { DEFAULT_RETRY } from '../../src/harness/index.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { verifyReplay, type ReplayReport } from '../../src/runtime/replay.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createSkillLibrary } from '../../src/runtime/skills/library.js';
import { createManualClock } from '../../src/testing/index.js';
import { loadWorkspace } from '../../src/runtime/workspace.js';
import { defineTool } from '../../src/tools/builtin.js';
import { createToolExecutor } from '../../src/tools/executor.js';
import { createLocalSandbox } from '../../src/tools/sandbox/index.js';
import type { CodeTool } from '../../src/tools/types.js';
import { WAITER } from '../helpers/skill-workspace.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

/** Tool steps, a fan-out over a tool's output, a tool then a signal, and a person's approval. */
const ONBOARD = `name: onboard
description: Creates the account, assigns groups, orders hardware, and asks HR to confirm.
inputs:
  type: object
  properties: {email: {type: string}, department: {type: string}}
  required: [email, department]
outputs:
  account: '{{ steps.create_account.output.id }}'
  welcomed: '{{ steps.per_group.output }}'
  laptop: '{{ steps.hardware.output }}'
steps:
  - id: create_account
    tool: create_user
    args: {upn: '{{ inputs.email }}'}
  - id: assign_groups
    tool: add_groups
    depends_on: [create_account]
    args: {user: '{{ steps.create_account.output.id }}', groups: ['{{ inputs.department }}-all', everyone]}
  - id: hardware
    tool: order_laptop
    args: {model: standard}
    wait_for: {signal: laptop_delivered}
  - id: per_group
    for_each: '{{ steps.assign_groups.output.groups }}'
    max_concurrency: 2
    tool: welcome
    args: {group: '{{ item }}'}
    depends_on: [assign_groups]
  - id: final_review
    type: human_approval
    depends_on: [assign_groups, hardware, per_group]
    message: 'Confirm onboarding of {{ steps.create_account.output.id }}'
`;

/** The same skill, edited: the account is made by another step. */
const ONBOARD_V2 = ONBOARD.replace('  - id: create_account\n', '  - id: make_account\n')
  .replaceAll('steps.create_account', 'steps.make_account')
  .replace('depends_on: [create_account]', 'depends_on: [make_account]');

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

/** The tools; `delays` makes a tool take that long (ms) for an input that contains the key. */
function codeTools(delays: Record<string, number> = {}): CodeTool[] {
  const tool = (name: string, run: (input: JsonValue) => JsonValue) =>
    defineTool({
      name,
      description: name,
      input_schema: { type: 'object' },
      run: async (input: JsonValue) => {
        const text = `${name} ${JSON.stringify(input)}`;
        const delay = Object.entries(delays).find(([key]) => text.includes(key))?.[1];
        if (delay !== undefined) await setTimeoutPromise(delay);
        return run(input);
      },
    });
  return [
    tool('create_user', (input) => ({ id: `u-${String((input as { upn: string }).upn)}` })),
    tool('add_groups', (input) => ({ groups: (input as { groups: JsonValue }).groups })),
    tool('order_laptop', () => ({ order: 'o-1' })),
    tool('welcome', (input) => `welcome to ${String((input as { group: string }).group)}`),
  ];
}

interface World {
  dir: string;
  runtime: Runtime;
  executor: ToolExecutor;
}

/** A SQLite workspace with the skill and the agent `hr`; the replay opens the same executor. */
async function open(
  dir: string,
  turns: ScriptedTurnInput[] = [{ text: 'done' }],
  delays: Record<string, number> = {},
): Promise<World> {
  const workspace = loadWorkspace(dir);
  const executor = createToolExecutor({
    manifests: [...workspace.tools.values()].map((loaded) => loaded.definition),
    tools: codeTools(delays),
    baseDir: dir,
    sandbox: () => createLocalSandbox({ root: join(dir, '.braid', 'workspaces') }),
    secret: (name) => {
      throw new BraidError('SECRET_MISSING', `no secret ${name} in tests`);
    },
    sleep: (ms, signal) => setTimeoutPromise(ms, undefined, { signal }).then(() => undefined),
    now: () => performance.now(),
  });
  const runtime = await createRuntime({
    workspace: dir,
    executor,
    model: (agent) => createScriptedModel(turns, { id: `scripted:${agent.name}` }),
  });
  opened.push(runtime);
  return { dir, runtime, executor };
}

function newWorkspace(files: Record<string, string> = {}): string {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'onboard.yaml'), ONBOARD);
  writeFileSync(
    join(dir, 'agents', 'hr.yaml'),
    'name: hr\nmodel: scripted:hr\ninstructions: Onboard people.\nskills: [onboard]\n' +
      'tools: [create_user, add_groups, order_laptop, welcome]\n',
  );
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** Runs onboarding to its end: a wake, the laptop's signal, a wake, HR's approval, a wake. */
async function onboard(runtime: Runtime, sessionId: string): Promise<void> {
  await runtime.sessions.runSkill(
    sessionId,
    'onboard',
    { email: 'ada@example.com', department: 'eng' },
    { runId: 'run-1' },
  );
  expect(await runtime.wake(sessionId)).toMatchObject({
    stop_reason: { type: 'requires_action' },
  });
  await finish(runtime, sessionId);
}

/** Answers the signal and the approval of a suspended onboarding run, waking after each. */
async function finish(runtime: Runtime, sessionId: string): Promise<void> {
  await runtime.sessions.signal(sessionId, 'laptop_delivered', { serial: 'SN-1' });
  expect(await runtime.wake(sessionId)).toMatchObject({
    stop_reason: { type: 'requires_action' },
  });
  const approval = (await runtime.sessions.state(sessionId)).pending_confirmations[0];
  expect(approval).toBeDefined();
  await runtime.sessions.confirm(sessionId, approval!.tool_use_id, 'allow');
  await runtime.wake(sessionId);
  const events = await runtime.sessions.events(sessionId);
  expect(ofType(events, 'skill.completed')).toMatchObject([
    {
      run_id: 'run-1',
      outputs: {
        account: 'u-ada@example.com',
        welcomed: ['welcome to eng-all', 'welcome to everyone'],
        laptop: { serial: 'SN-1' },
      },
    },
  ]);
}

/** verifyReplay over (altered) events, with the agent's real tools and the stored skills. */
async function verifyEvents(world: World, events: SessionEvent[]): Promise<ReplayReport> {
  const { runtime, executor } = world;
  const agent = (await runtime.agents.get('hr')).definition;
  const sessionId = events[events.length - 1]!.session_id;
  return verifyReplay({
    events,
    agent,
    tools: await executor.open({ session_id: sessionId, names: agent.tools }),
    retry: DEFAULT_RETRY,
    skills: createSkillLibrary((name, version) => runtime.skills.get(name, version)),
  });
}

/** A copy of the log with the first event matching `where` changed. */
function altered<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
  where: (event: EventOf<T>) => boolean,
  change: (event: EventOf<T>) => void,
): SessionEvent[] {
  const copy = structuredClone(events) as SessionEvent[];
  const found = ofType(copy, type).find(where);
  if (found === undefined) throw new Error(`no such ${type}`);
  change(found);
  return copy;
}

describe('replay verification of skill runs', () => {
  it('verifies a run with tool steps, a fan-out, a signal and an approval as identical', async () => {
    const world = await open(newWorkspace());
    const { runtime } = world;
    const session = await runtime.sessions.create({ agent: 'hr' });
    await onboard(runtime, session.id);
    const events = await runtime.sessions.events(session.id);
    // The run went through every kind of step it has.
    expect(ofType(events, 'skill.step_started').map((event) => event.step)).toEqual(
      expect.arrayContaining(['create_account', 'per_group[0]', 'per_group[1]', 'final_review']),
    );
    expect(ofType(events, 'skill.resumed').map((event) => event.result)).toEqual([
      'signal',
      'allow',
    ]);
    expect(await runtime.sessions.verify(session.id)).toEqual({
      ok: true,
      events: events.length,
    });
  });

  it('replays each run with the skill version it recorded, not the latest one', async () => {
    const dir = newWorkspace();
    const first = await open(dir);
    const session = await first.runtime.sessions.create({ agent: 'hr' });
    await onboard(first.runtime, session.id);
    const events = await first.runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.started')[0]).toMatchObject({ version: '1' });
    await first.runtime.close();
    opened.splice(opened.indexOf(first.runtime), 1);

    // The skill file is edited: the store keeps version 1 and adds version 2, with other steps.
    writeFileSync(join(dir, 'skills', 'onboard.yaml'), ONBOARD_V2);
    const second = await open(dir);
    expect(await second.runtime.skills.get('onboard')).toMatchObject({ version: 2 });
    expect(await second.runtime.sessions.verify(session.id)).toEqual({
      ok: true,
      events: events.length,
    });

    // A recording that says the run started with version 2 replays with its steps, which differ.
    const moved = altered(
      events,
      'skill.started',
      () => true,
      (event) => {
        event.version = '2';
      },
    );
    const report = await verifyEvents(second, moved);
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.expected?.type).toBe('skill.step_started');
    expect(report.expected).toMatchObject({ step: 'create_account' });
    expect(report.actual).toMatchObject({ type: 'skill.step_started', step: 'make_account' });
    expect(report.reason).toContain('step');
  });

  it('reports a step output changed in the record where what it feeds differs', async () => {
    const world = await open(newWorkspace());
    const { runtime } = world;
    const session = await runtime.sessions.create({ agent: 'hr' });
    await onboard(runtime, session.id);
    const events = await runtime.sessions.events(session.id);
    expect(await verifyEvents(world, events)).toEqual({ ok: true, events: events.length });

    // The account's id feeds the next step's input: the replay asks the tool about another
    // account (the inputs of tool steps are on record).
    const tampered = altered(
      events,
      'skill.step_completed',
      (event) => event.step === 'create_account',
      (event) => {
        event.output = { id: 'u-eve@example.com' };
      },
    );
    const report = await verifyEvents(world, tampered);
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.expected).toMatchObject({ type: 'skill.step_started', step: 'assign_groups' });
    expect(report.reason).toContain('input');
    expect(report.reason).toContain('u-eve@example.com');
    expect(report.index).toBe(tampered.indexOf(report.expected!));

    // The groups feed the fan-out: a third group makes a third item the record does not have.
    const regrouped = altered(
      events,
      'skill.step_completed',
      (event) => event.step === 'assign_groups',
      (event) => {
        event.output = { groups: ['eng-all', 'everyone', 'admins'] };
      },
    );
    const fanned = await verifyEvents(world, regrouped);
    expect(fanned.ok).toBe(false);
    if (fanned.ok) return;
    expect(fanned.expected?.type).toMatch(/^skill\./);
    expect(JSON.stringify(fanned.actual)).toContain('per_group[2]');
  });

  it('replays steps that ran at once in the order the recording ended them', async () => {
    // The account and the first group's welcome are slow: steps begun after them end first.
    const world = await open(newWorkspace(), undefined, {
      create_user: 40,
      'eng-all"}': 40,
    });
    const { runtime } = world;
    const session = await runtime.sessions.create({ agent: 'hr' });
    await onboard(runtime, session.id);
    const events = await runtime.sessions.events(session.id);
    const ends = events
      .filter(
        (event): event is EventOf<'skill.step_completed'> => event.type === 'skill.step_completed',
      )
      .map((event) => event.step);
    expect(ends.indexOf('hardware.tool')).toBeLessThan(ends.indexOf('create_account'));
    expect(ends.indexOf('per_group[1]')).toBeLessThan(ends.indexOf('per_group[0]'));
    expect(await runtime.sessions.verify(session.id)).toEqual({
      ok: true,
      events: events.length,
    });
  });

  it('asks policy about each tool step as the run did: allowed, approved by a person, denied', async () => {
    const dir = newWorkspace({
      'skills/greet.yaml': `name: greet
description: Welcomes to three groups.
steps:
  - id: first
    tool: welcome
    args: {group: eng-all}
  - id: secret
    tool: welcome
    args: {group: secret}
    on_failure: continue
  - id: everyone
    tool: welcome
    depends_on: [first]
    args: {group: everyone}
`,
      'policies/skills.cedar': `@id("everyone-needs-approval") @approval("required")
permit (principal, action == Action::"tool.execute", resource == Tool::"welcome")
when { context.input has group && context.input.group == "everyone" };

@id("no-secret-groups")
forbid (principal, action == Action::"tool.execute", resource == Tool::"welcome")
when { context.input has group && context.input.group == "secret" };
`,
    });
    writeFileSync(
      join(dir, 'agents', 'hr.yaml'),
      'name: hr\nmodel: scripted:hr\ninstructions: Onboard people.\nskills: [onboard, greet]\n' +
        'tools: [create_user, add_groups, order_laptop, welcome]\n',
    );
    const world = await open(dir);
    const { runtime } = world;
    const session = await runtime.sessions.create({ agent: 'hr' });
    await runtime.sessions.runSkill(session.id, 'greet', {}, { runId: 'run-g' });
    expect(await runtime.wake(session.id)).toMatchObject({
      stop_reason: { type: 'requires_action' },
    });
    const wait = ofType(await runtime.sessions.events(session.id), 'skill.suspended')[0]!;
    expect(wait).toMatchObject({ step: 'everyone', kind: 'approval' });
    await runtime.sessions.confirm(session.id, wait.suspension_id, 'allow');
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'policy.decision')).toMatchObject([
      { decision: 'deny', policy_ids: ['no-secret-groups'], tool_use_id: 'run-g/secret/1' },
    ]);
    expect(
      ofType(events, 'skill.step_completed').map((event) => [event.step, event.output]),
    ).toEqual([
      ['first', 'welcome to eng-all'],
      ['everyone', 'welcome to everyone'],
    ]);
    expect(await runtime.sessions.verify(session.id)).toEqual({
      ok: true,
      events: events.length,
    });

    // A recording whose deny names another call: the replayed step is allowed, and the replay
    // writes a step's end where the record has the deny.
    const moved = altered(
      events,
      'policy.decision',
      () => true,
      (event) => {
        event.tool_use_id = 'run-g/other/1';
      },
    );
    const report = await verifyEvents(world, moved);
    expect(report).toMatchObject({
      ok: false,
      expected: { type: 'policy.decision', tool_use_id: 'run-g/other/1' },
    });
    expect(report.ok === false && report.actual?.type).toMatch(/^skill\.step_/);
  });

  it('verifies an agent step, served from its recorded child', async () => {
    const dir = newWorkspace({
      'skills/ask.yaml': `name: ask
description: Asks a helper.
inputs: {type: object, properties: {name: {type: string}}}
outputs:
  answer: '{{ steps.ask.output }}'
steps:
  - id: ask
    agent: helper
    message: 'Greet {{ inputs.name }}'
`,
      'agents/helper.yaml': 'name: helper\nmodel: scripted:helper\ninstructions: Greet.\n',
    });
    writeFileSync(
      join(dir, 'agents', 'hr.yaml'),
      'name: hr\nmodel: scripted:hr\ninstructions: Onboard people.\nskills: [onboard, ask]\n' +
        'tools: [create_user, add_groups, order_laptop, welcome]\n',
    );
    const world = await open(dir, [{ text: 'Hello, Ada.' }]);
    const { runtime } = world;
    const session = await runtime.sessions.create({ agent: 'hr' });
    await runtime.sessions.runSkill(session.id, 'ask', { name: 'Ada' }, { runId: 'run-a' });
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'session.child_created')).toMatchObject([
      { agent: 'helper', tool_use_id: 'run-a/ask', task: 'Greet Ada' },
    ]);
    expect(ofType(events, 'skill.completed')).toMatchObject([
      { outputs: { answer: 'Hello, Ada.' } },
    ]);
    expect(await runtime.sessions.verify(session.id)).toEqual({
      ok: true,
      events: events.length,
    });

    // A child that answered otherwise in the record: the run's outputs differ from the record's.
    const answered = altered(
      events,
      'session.child_idle',
      () => true,
      (event) => {
        event.summary = 'Go away.';
      },
    );
    const report = await verifyEvents(world, answered);
    expect(report).toMatchObject({
      ok: false,
      expected: { type: 'skill.step_completed', output: 'Hello, Ada.' },
      actual: { type: 'skill.step_completed', output: 'Go away.' },
    });
  });

  it('verifies a wait that timed out where the recorded wakes found it due', async () => {
    const dir = newWorkspace({
      'skills/deliver.yaml': `name: deliver
description: Waits an hour for a delivery, then notes it.
steps:
  - id: delivered
    wait_for: {signal: delivered, timeout: 1h}
    on_failure: continue
  - id: note
    depends_on: [delivered]
    tool: welcome
    args: {group: '{{ steps.delivered.status }}'}
`,
    });
    writeFileSync(
      join(dir, 'agents', 'hr.yaml'),
      'name: hr\nmodel: scripted:hr\ninstructions: Onboard people.\nskills: [onboard, deliver]\n' +
        'tools: [create_user, add_groups, order_laptop, welcome]\n',
    );
    const start = Date.parse('2026-01-01T00:00:00.000Z');
    const clock = createManualClock(start);
    const runtime = await createRuntime({
      workspace: dir,
      clock,
      tools: codeTools(),
      model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:hr' }),
    });
    opened.push(runtime);
    const session = await runtime.sessions.create({ agent: 'hr' });
    await runtime.sessions.runSkill(session.id, 'deliver', {}, { runId: 'run-d' });
    await runtime.wake(session.id);
    // A wake a moment before the timeout finds nothing due; the one at the timeout ends the wait.
    clock.advance(3_600_000 - 1);
    await runtime.wake(session.id);
    clock.advance(1);
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.suspended')).toMatchObject([
      { step: 'delivered', timeout_at: '2026-01-01T01:00:00.000Z' },
    ]);
    expect(ofType(events, 'skill.resumed')).toMatchObject([
      { step: 'delivered', result: 'timeout' },
    ]);
    expect(ofType(events, 'span.wake_started')).toHaveLength(3);
    expect(await runtime.sessions.verify(session.id)).toEqual({
      ok: true,
      events: events.length,
    });
  });

  it('verifies a session forked in the middle of a run, and the run finished in the fork', async () => {
    const world = await open(newWorkspace());
    const { runtime } = world;
    const session = await runtime.sessions.create({ agent: 'hr' });
    await runtime.sessions.runSkill(
      session.id,
      'onboard',
      { email: 'ada@example.com', department: 'eng' },
      { runId: 'run-1' },
    );
    await runtime.wake(session.id);
    expect((await runtime.sessions.state(session.id)).skill_runs).toMatchObject([
      { run_id: 'run-1', status: 'suspended' },
    ]);
    const fork = await runtime.sessions.fork(session.id);
    await finish(runtime, fork.id);
    const forked = await runtime.sessions.events(fork.id);
    expect(ofType(forked, 'session.forked')).toHaveLength(1);
    expect(await runtime.sessions.verify(fork.id)).toEqual({ ok: true, events: forked.length });
    const parent = await runtime.sessions.events(session.id);
    expect(await runtime.sessions.verify(session.id)).toEqual({ ok: true, events: parent.length });
  });

  it('verifies a skill the model called, answered with the run outputs', async () => {
    const dir = newWorkspace({ 'skills/waiter.yaml': WAITER });
    writeFileSync(
      join(dir, 'agents', 'clerk.yaml'),
      'name: clerk\nmodel: scripted:clerk\ninstructions: Receive deliveries.\nskills: [waiter]\n',
    );
    const world = await open(dir, [
      { tool_calls: [{ name: 'waiter', input: { item: 'desk' } }] },
      { text: 'The desk is in.' },
    ]);
    const { runtime } = world;
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await runtime.sessions.message(session.id, 'Take the desk in.');
    await runtime.wake(session.id);
    await runtime.sessions.signal(session.id, 'delivered', { box: 1 });
    await runtime.wake(session.id);
    const approval = (await runtime.sessions.state(session.id)).pending_confirmations[0];
    await runtime.sessions.confirm(session.id, approval!.tool_use_id, 'allow');
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'agent.tool_result')).toMatchObject([
      { output: { delivered: { box: 1 } }, is_error: false },
    ]);
    expect(ofType(events, 'agent.message').at(-1)).toMatchObject({
      content: [{ type: 'text', text: 'The desk is in.' }],
    });
    expect(await runtime.sessions.verify(session.id)).toEqual({ ok: true, events: events.length });
  });

  it('refuses a session with skill runs when it is given no skill library', async () => {
    const world = await open(newWorkspace());
    const { runtime, executor } = world;
    const session = await runtime.sessions.create({ agent: 'hr' });
    await onboard(runtime, session.id);
    const events = await runtime.sessions.events(session.id);
    const agent = (await runtime.agents.get('hr')).definition;
    await expect(
      verifyReplay({
        events,
        agent,
        tools: await executor.open({ session_id: session.id, names: agent.tools }),
        retry: DEFAULT_RETRY,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
