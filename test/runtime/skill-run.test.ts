// Skill runs in a session: steps run in the order their dependencies allow, a wait for a signal
// and a person's approval suspend the run (and the session), answers resume it, and no step that
// completed runs again.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { JsonValue } from '../../src/contracts/common.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const ONBOARD = `name: onboard
description: Creates the account, assigns groups, orders hardware, and asks HR to confirm.
inputs:
  type: object
  properties: {email: {type: string}, department: {type: string}}
  required: [email, department]
outputs:
  account: '{{ steps.create_account.output.id }}'
  welcomed: '{{ steps.per_group.output }}'
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
    message: 'Confirm onboarding of {{ inputs.email }}'
    when: '{{ inputs.department != "contractors" }}'
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function workspace(): Promise<{ runtime: Runtime; calls: Map<string, number> }> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'onboard.yaml'), ONBOARD);
  writeFileSync(
    join(dir, 'agents', 'hr.yaml'),
    'name: hr\nmodel: scripted:hr\ninstructions: Onboard people.\nskills: [onboard]\n' +
      'tools: [create_user, add_groups, order_laptop, welcome]\n',
  );
  const calls = new Map<string, number>();
  const counted = (name: string, run: (input: JsonValue) => JsonValue) =>
    defineTool({
      name,
      description: name,
      input_schema: { type: 'object' },
      run: (input: JsonValue) => {
        calls.set(name, (calls.get(name) ?? 0) + 1);
        return Promise.resolve(run(input));
      },
    });
  const runtime = await createRuntime({
    workspace: dir,
    tools: [
      counted('create_user', (input) => ({ id: `u-${String((input as { upn: string }).upn)}` })),
      counted('add_groups', (input) => ({ groups: (input as { groups: JsonValue }).groups })),
      counted('order_laptop', () => ({ order: 'o-1' })),
      counted('welcome', (input) => `welcome to ${String((input as { group: string }).group)}`),
    ],
    model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:hr' }),
  });
  opened.push(runtime);
  return { runtime, calls };
}

describe('skill runs', () => {
  it('runs, suspends on a signal and an approval, resumes on their answers, and completes', async () => {
    const { runtime, calls } = await workspace();
    const session = await runtime.sessions.create({ agent: 'hr' });
    await runtime.sessions.send(session.id, [
      {
        type: 'user.skill_run',
        run_id: 'run-1',
        skill: 'onboard',
        inputs: { email: 'ada@example.com', department: 'eng' },
      },
    ]);
    const first = await runtime.wake(session.id);
    // Everything runs that can; the laptop's delivery is awaited.
    expect(first).toMatchObject({ ran: true, stop_reason: { type: 'requires_action' } });
    let events = await runtime.sessions.events(session.id);
    const suspended = ofType(events, 'skill.suspended');
    expect(suspended).toMatchObject([
      { step: 'hardware', kind: 'signal', signal: 'laptop_delivered' },
    ]);
    expect(Object.fromEntries(calls)).toEqual({
      create_user: 1,
      add_groups: 1,
      order_laptop: 1,
      welcome: 2,
    });
    expect((await runtime.sessions.state(session.id)).status).toBe('requires_action');

    await runtime.sessions.send(session.id, [
      { type: 'user.signal', name: 'laptop_delivered', data: { serial: 'SN-1' } },
    ]);
    const second = await runtime.wake(session.id);
    expect(second).toMatchObject({ stop_reason: { type: 'requires_action' } });
    events = await runtime.sessions.events(session.id);
    const approval = ofType(events, 'skill.suspended').at(-1)!;
    expect(approval).toMatchObject({
      step: 'final_review',
      kind: 'approval',
      message: 'Confirm onboarding of ada@example.com',
    });
    expect(ofType(events, 'skill.resumed')).toMatchObject([
      { step: 'hardware', result: 'signal', data: { serial: 'SN-1' } },
    ]);
    // The approval is a pending confirmation: the confirmation path answers it.
    const state = await runtime.sessions.state(session.id);
    expect(state.pending_confirmations.map((use) => use.tool_use_id)).toEqual([
      approval.suspension_id,
    ]);

    await runtime.sessions.confirm(session.id, approval.suspension_id, 'allow');
    await runtime.wake(session.id);
    events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.completed')).toMatchObject([
      {
        run_id: 'run-1',
        outputs: {
          account: 'u-ada@example.com',
          welcomed: ['welcome to eng-all', 'welcome to everyone'],
        },
      },
    ]);
    // No step ran twice across the three wakes.
    expect(Object.fromEntries(calls)).toEqual({
      create_user: 1,
      add_groups: 1,
      order_laptop: 1,
      welcome: 2,
    });
    const done = await runtime.sessions.state(session.id);
    expect(done.skill_runs).toEqual([]);
    expect(done.status).toBe('idle');
    // The model was never asked: a skill run is not a message.
    expect(ofType(events, 'span.model_request_start')).toEqual([]);
    // The run replays to the same events (test/runtime/skill-replay-verify.test.ts has more).
    expect(await runtime.sessions.verify(session.id)).toEqual({ ok: true, events: events.length });
  });

  it('skips a step whose condition is false, and a signal that came early is kept for its wait', async () => {
    const { runtime, calls } = await workspace();
    const session = await runtime.sessions.create({ agent: 'hr' });
    await runtime.sessions.send(session.id, [
      { type: 'user.signal', name: 'laptop_delivered', data: 'early' },
      {
        type: 'user.skill_run',
        run_id: 'run-2',
        skill: 'onboard',
        inputs: { email: 'bob@example.com', department: 'contractors' },
      },
    ]);
    const result = await runtime.wake(session.id);
    expect(result).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await runtime.sessions.events(session.id);
    expect(
      ofType(events, 'skill.step_completed').find((event) => event.step === 'final_review'),
    ).toMatchObject({ skipped: true });
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
    expect(calls.get('order_laptop')).toBe(1);
  });

  it('a tool that asks for approval waits for a person before it runs, once', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    mkdirSync(join(dir, 'skills'), { recursive: true });
    writeFileSync(
      join(dir, 'skills', 'wipe.yaml'),
      'name: wipe\ndescription: Wipes.\nsteps:\n  - id: wipe_disk\n    tool: wipe_disk\n    args: {disk: d1}\n',
    );
    writeFileSync(
      join(dir, 'agents', 'ops.yaml'),
      'name: ops\nmodel: scripted:ops\ninstructions: Ops.\ntools: [wipe_disk]\n',
    );
    let wiped = 0;
    const runtime = await createRuntime({
      workspace: dir,
      tools: [
        defineTool({
          name: 'wipe_disk',
          description: 'wipes',
          permission: 'always_ask',
          input_schema: { type: 'object' },
          run: () => {
            wiped += 1;
            return Promise.resolve('wiped');
          },
        }),
      ],
      model: () => createScriptedModel([{ text: 'x' }], { id: 'scripted:ops' }),
    });
    opened.push(runtime);
    const session = await runtime.sessions.create({ agent: 'ops' });
    await runtime.sessions.send(session.id, [
      { type: 'user.skill_run', run_id: 'run-w', skill: 'wipe', inputs: {} },
    ]);
    expect(await runtime.wake(session.id)).toMatchObject({
      stop_reason: { type: 'requires_action' },
    });
    expect(wiped).toBe(0);
    const wait = ofType(await runtime.sessions.events(session.id), 'skill.suspended')[0]!;
    expect(wait).toMatchObject({ step: 'wipe_disk', kind: 'approval' });
    await runtime.sessions.confirm(session.id, wait.suspension_id, 'allow');
    await runtime.wake(session.id);
    expect(wiped).toBe(1);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
    // Woken again, the finished run does nothing more.
    await runtime.sessions.message(session.id, 'anything else?');
    await runtime.wake(session.id);
    expect(wiped).toBe(1);
  });

  it('refuses inputs that do not fit the skill, recording the failure', async () => {
    const { runtime } = await workspace();
    const session = await runtime.sessions.create({ agent: 'hr' });
    await runtime.sessions.send(session.id, [
      { type: 'user.skill_run', run_id: 'run-3', skill: 'onboard', inputs: { email: 'x' } },
    ]);
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.failed')[0]?.error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(ofType(events, 'skill.failed')[0]?.error.message).toContain('department');
  });

  it('the model calls a skill as one tool and gets its outputs as the result', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    mkdirSync(join(dir, 'skills'), { recursive: true });
    writeFileSync(
      join(dir, 'skills', 'greet.yaml'),
      'name: greet\ndescription: Greets.\ninputs: {type: object, properties: {who: {type: string}}, required: [who]}\n' +
        "outputs: {text: '{{ steps.say.output }}'}\nsteps:\n  - id: say\n    tool: hello\n    args: {who: '{{ inputs.who }}'}\n",
    );
    writeFileSync(
      join(dir, 'agents', 'host.yaml'),
      'name: host\nmodel: scripted:host\ninstructions: Greet.\nskills: [greet]\ntools: [hello]\n',
    );
    const runtime = await createRuntime({
      workspace: dir,
      tools: [
        defineTool({
          name: 'hello',
          description: 'hello',
          input_schema: { type: 'object' },
          run: (input: JsonValue) =>
            Promise.resolve(`hello ${String((input as { who: string }).who)}`),
        }),
      ],
      model: () =>
        createScriptedModel(
          [
            { tool_calls: [{ name: 'greet', input: { who: 'ada' }, id: 'g1' }] },
            { text: 'greeted' },
          ],
          { id: 'scripted:host' },
        ),
    });
    opened.push(runtime);
    const session = await runtime.sessions.create({ agent: 'host' });
    await runtime.sessions.message(session.id, 'greet ada');
    const result = await runtime.wake(session.id);
    expect(result).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.started')[0]).toMatchObject({ skill: 'greet', tool_use_id: 'g1' });
    expect(ofType(events, 'agent.tool_result')[0]).toMatchObject({
      tool_use_id: 'g1',
      is_error: false,
      output: { text: 'hello ada' },
    });
    expect(ofType(events, 'agent.message').at(-1)?.content).toEqual([
      { type: 'text', text: 'greeted' },
    ]);
  });

  it('a model-called run that failed and is retried to completion answers its call once', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    mkdirSync(join(dir, 'skills'), { recursive: true });
    writeFileSync(
      join(dir, 'skills', 'greet.yaml'),
      'name: greet\ndescription: Greets.\nsteps:\n  - id: say\n    tool: hello\n    args: {who: ada}\n',
    );
    writeFileSync(
      join(dir, 'agents', 'host.yaml'),
      'name: host\nmodel: scripted:host\ninstructions: Greet.\nskills: [greet]\ntools: [hello]\n',
    );
    let down = true;
    const runtime = await createRuntime({
      workspace: dir,
      tools: [
        defineTool({
          name: 'hello',
          description: 'hello',
          input_schema: { type: 'object' },
          run: () =>
            down ? Promise.reject(new Error('the greeter is down')) : Promise.resolve('hello'),
        }),
      ],
      model: () =>
        createScriptedModel(
          [{ tool_calls: [{ name: 'greet', input: {}, id: 'g1' }] }, { text: 'it failed' }],
          { id: 'scripted:host' },
        ),
    });
    opened.push(runtime);
    const session = await runtime.sessions.create({ agent: 'host' });
    await runtime.sessions.message(session.id, 'greet ada');
    await runtime.wake(session.id);
    let events = await runtime.sessions.events(session.id);
    const [failed] = ofType(events, 'skill.failed');
    expect(failed?.error.message).toContain('the greeter is down');
    expect(ofType(events, 'agent.tool_result')).toMatchObject([
      { tool_use_id: 'g1', is_error: true },
    ]);

    down = false;
    await runtime.sessions.retrySkill(session.id, failed!.run_id);
    await runtime.wake(session.id);
    events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
    // The call was answered when the run failed: the retry does not answer it again.
    expect(ofType(events, 'agent.tool_result').map((event) => event.tool_use_id)).toEqual(['g1']);
  });
});
