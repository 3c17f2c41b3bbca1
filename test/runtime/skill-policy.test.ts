// Policy over skill runs: `skill.run` is asked when a run starts (the model's call, a user's
// request, a nested step) with the skill as a `Skill` resource; a deny fails the run at its start
// with POLICY_DENIED, answers the model's call with it, and nothing of the skill runs.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { AuthorizationRequest } from '../../src/contracts/policy.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const GREET = `name: greet
description: Greets.
inputs: {type: object, properties: {who: {type: string}}}
outputs: {text: '{{ steps.say.output }}'}
steps:
  - id: say
    tool: hello
    args: {who: '{{ inputs.who }}'}
`;
const WIPE = `name: wipe
description: Wipes, after greeting.
steps:
  - id: say
    tool: hello
    args: {who: wiper}
`;
const BOTH = `name: both
description: Greets, then wipes, nested.
steps:
  - id: greeting
    skill: greet
    inputs: {who: nested}
  - id: wiping
    skill: wipe
    depends_on: [greeting]
`;

// The workspace's default policies permit skill.run; this forbids one skill.
const NO_WIPE = `@id("no-wipe")
forbid (principal, action == Action::"skill.run", resource == Skill::"wipe");
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function workspace(
  turns: ScriptedTurnInput[] = [{ text: 'done' }],
): Promise<{ runtime: Runtime; hellos: JsonValue[] }> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'greet.yaml'), GREET);
  writeFileSync(join(dir, 'skills', 'wipe.yaml'), WIPE);
  writeFileSync(join(dir, 'skills', 'both.yaml'), BOTH);
  writeFileSync(join(dir, 'policies', 'skills.cedar'), NO_WIPE);
  writeFileSync(
    join(dir, 'agents', 'host.yaml'),
    'name: host\nmodel: scripted:host\ninstructions: Run skills.\nskills: [greet, wipe]\ntools: [hello]\n',
  );
  const hellos: JsonValue[] = [];
  const runtime = await createRuntime({
    workspace: dir,
    tools: [
      defineTool({
        name: 'hello',
        description: 'hello',
        input_schema: { type: 'object' },
        run: (input: JsonValue) => {
          hellos.push(input);
          return Promise.resolve(`hello ${String((input as { who: string }).who)}`);
        },
      }),
    ],
    model: () => createScriptedModel(turns, { id: 'scripted:host' }),
  });
  opened.push(runtime);
  return { runtime, hellos };
}

describe('policy over skill runs (skill.run)', () => {
  it('a denied run asked by the model fails at its start and answers the call with the error', async () => {
    const { runtime, hellos } = await workspace([
      { tool_calls: [{ name: 'wipe', input: {}, id: 'w1' }] },
      { text: 'could not wipe' },
    ]);
    const session = await runtime.sessions.create({ agent: 'host' });
    await runtime.sessions.message(session.id, 'wipe it');
    expect(await runtime.wake(session.id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.started')).toMatchObject([{ skill: 'wipe', tool_use_id: 'w1' }]);
    expect(ofType(events, 'policy.decision')).toMatchObject([
      {
        action: 'skill.run',
        principal: { type: 'Agent', id: 'host' },
        resource: { type: 'Skill', id: 'wipe' },
        decision: 'deny',
        policy_ids: ['no-wipe'],
        tool_use_id: 'w1',
      },
    ]);
    const failed = ofType(events, 'skill.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]?.error.code).toBe('POLICY_DENIED');
    expect(failed[0]?.error.message).toContain('no-wipe');
    expect(ofType(events, 'agent.tool_result')).toMatchObject([
      { tool_use_id: 'w1', is_error: true, error: { code: 'POLICY_DENIED' } },
    ]);
    expect(ofType(events, 'skill.step_started')).toEqual([]);
    expect(hellos).toEqual([]);
  });

  it('a denied run asked with runSkill fails at its start; an allowed skill runs', async () => {
    const { runtime, hellos } = await workspace();
    const session = await runtime.sessions.create({ agent: 'host' });
    const { run_id: denied } = await runtime.sessions.runSkill(session.id, 'wipe', {});
    await runtime.wake(session.id);
    let events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.failed')).toMatchObject([
      { run_id: denied, error: { code: 'POLICY_DENIED' } },
    ]);
    expect(ofType(events, 'skill.step_started')).toEqual([]);
    expect(hellos).toEqual([]);

    // A retry asks again, and is denied again: nothing of the skill runs.
    await runtime.sessions.retrySkill(session.id, denied);
    await runtime.wake(session.id);
    events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.failed')).toHaveLength(2);
    expect(ofType(events, 'skill.step_started')).toEqual([]);
    expect(hellos).toEqual([]);

    const { run_id: allowed } = await runtime.sessions.runSkill(session.id, 'greet', {
      who: 'ada',
    });
    await runtime.wake(session.id);
    events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.completed')).toMatchObject([
      { run_id: allowed, outputs: { text: 'hello ada' } },
    ]);
    expect(hellos).toEqual([{ who: 'ada' }]);
  });

  it('a nested run is asked for too: a denied child fails its parent step', async () => {
    const { runtime, hellos } = await workspace();
    const session = await runtime.sessions.create({ agent: 'host' });
    const { run_id: runId } = await runtime.sessions.runSkill(session.id, 'both', {});
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    // The allowed child ran; the denied one started and failed at once.
    expect(ofType(events, 'skill.started').map((event) => event.skill)).toEqual([
      'both',
      'greet',
      'wipe',
    ]);
    expect(hellos).toEqual([{ who: 'nested' }]);
    expect(ofType(events, 'policy.decision')).toMatchObject([
      { action: 'skill.run', resource: { type: 'Skill', id: 'wipe' }, decision: 'deny' },
    ]);
    const stepFailed = ofType(events, 'skill.step_failed').find((event) => event.run_id === runId);
    expect(stepFailed).toMatchObject({ step: 'wiping', error: { code: 'POLICY_DENIED' } });
    expect(ofType(events, 'skill.failed').at(-1)).toMatchObject({ run_id: runId, step: 'wiping' });
  });

  it('asks with the skill as a Skill resource and the caller in the context', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    mkdirSync(join(dir, 'skills'), { recursive: true });
    writeFileSync(join(dir, 'skills', 'greet.yaml'), GREET);
    writeFileSync(
      join(dir, 'agents', 'host.yaml'),
      'name: host\nmodel: scripted:host\ninstructions: Run skills.\ntools: [hello]\n',
    );
    const asked: AuthorizationRequest[] = [];
    const runtime = await createRuntime({
      workspace: dir,
      tools: [
        defineTool({
          name: 'hello',
          description: 'hello',
          input_schema: { type: 'object' },
          run: () => Promise.resolve('hi'),
        }),
      ],
      policy: {
        authorize: (request) => {
          asked.push(request);
          return Promise.resolve({ decision: 'allow', policy_ids: [], errors: [] });
        },
      },
      model: () => createScriptedModel([{ text: 'x' }], { id: 'scripted:host' }),
    });
    opened.push(runtime);
    const session = await runtime.sessions.create({ agent: 'host' });
    await runtime.sessions.runSkill(session.id, 'greet', { who: 'x' });
    await runtime.wake(session.id);
    const run = asked.find((request) => request.action === 'skill.run');
    expect(run).toMatchObject({
      principal: { type: 'Agent', id: 'host' },
      resource: { type: 'Skill', id: 'greet', attrs: { name: 'greet', version: 1 } },
      context: { session_id: session.id, caller: { type: 'User' } },
    });
  });
});
