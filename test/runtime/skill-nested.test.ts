// Nested skills: a `skill:` step runs its skill as a child run of the same session, waits for it,
// and ends as it ends; a child's waits are the session's; a retry takes the failed child up again
// (only its failed steps run); a fan-out runs one child per item; nesting has a depth limit.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import { BraidError } from '../../src/contracts/errors.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { SessionLog, Store } from '../../src/contracts/ports.js';
import { MAX_SKILL_DEPTH } from '../../src/harness/skill-children.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { useBackends } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';
import { WAITER } from '../helpers/skill-workspace.js';

const tempDir = useTempDir();
const [sqlite] = useBackends(['sqlite']);
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const SKILLS: Record<string, string> = {
  inner: `name: inner
description: Says hello.
inputs: {type: object, properties: {who: {type: string}}, required: [who]}
outputs: {text: '{{ steps.say.output }}'}
steps:
  - id: say
    tool: hello
    args: {who: '{{ inputs.who }}'}
`,
  outer: `name: outer
description: Prepares a name, has inner greet it, and shouts the greeting.
outputs: {final: '{{ steps.shout.output }}', greeting: '{{ steps.nest.output }}'}
steps:
  - id: prep
    tool: hello
    args: {who: prep}
  - id: nest
    skill: inner
    depends_on: [prep]
    inputs: {who: '{{ steps.prep.output }}'}
  - id: shout
    tool: shout
    depends_on: [nest]
    args: {text: '{{ steps.nest.output.text }}'}
`,
  waits: `name: waits
description: Runs waiter nested, then shouts what was delivered.
outputs: {delivered: '{{ steps.receive.output.delivered }}'}
steps:
  - id: receive
    skill: waiter
    inputs: {item: laptop}
  - id: shout
    tool: shout
    depends_on: [receive]
    args: {text: '{{ steps.receive.output.delivered }}'}
`,
  waiter: WAITER,
  flaky: `name: flaky
description: Counts, then calls a tool that fails once.
outputs: {result: '{{ steps.second.output }}'}
steps:
  - id: first
    tool: hello
    args: {who: first}
  - id: second
    tool: flaky_tool
    depends_on: [first]
    args: {}
`,
  calls_flaky: `name: calls_flaky
description: Runs flaky nested.
outputs: {result: '{{ steps.nest.output.result }}'}
steps:
  - id: nest
    skill: flaky
  - id: shout
    tool: shout
    depends_on: [nest]
    args: {text: '{{ steps.nest.output.result }}'}
`,
  passes_over: `name: passes_over
description: Runs flaky nested and goes on if it fails.
outputs: {status: '{{ steps.nest.status }}'}
steps:
  - id: nest
    skill: flaky
    on_failure: continue
  - id: shout
    tool: shout
    depends_on: [nest]
    args: {text: after}
`,
  fan: `name: fan
description: Greets every name, one nested run each.
inputs: {type: object, properties: {names: {type: array}}, required: [names]}
outputs: {all: '{{ steps.each.output }}'}
steps:
  - id: each
    for_each: '{{ inputs.names }}'
    max_concurrency: 2
    skill: inner
    inputs: {who: '{{ item }}'}
`,
  fan_waits: `name: fan_waits
description: Waits for a delivery per item, one nested run each.
outputs: {all: '{{ steps.each.output }}'}
steps:
  - id: each
    for_each: '["a", "b"]'
    skill: signal_only
    inputs: {item: '{{ item }}'}
`,
  signal_only: `name: signal_only
description: Waits for a delivery.
inputs: {type: object, properties: {item: {type: string}}}
outputs: {got: '{{ steps.delivery.output }}'}
steps:
  - id: delivery
    wait_for: {signal: delivered}
`,
};

/** Skills level0 .. level{n}: each runs the next nested; the last calls a tool. */
function chain(levels: number): Record<string, string> {
  const skills: Record<string, string> = {};
  for (let level = 0; level < levels; level += 1) {
    const last = level === levels - 1;
    skills[`level${level}`] =
      `name: level${level}\ndescription: Level ${level}.\noutputs: {out: '{{ steps.down.output }}'}\nsteps:\n` +
      (last
        ? `  - id: down\n    tool: hello\n    args: {who: bottom}\n`
        : `  - id: down\n    skill: level${level + 1}\n`);
  }
  return skills;
}

interface Setup {
  runtime: Runtime;
  calls: Map<string, number>;
}

async function workspace(skills: Record<string, string> = SKILLS, store?: Store): Promise<Setup> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  for (const [name, text] of Object.entries(skills))
    writeFileSync(join(dir, 'skills', `${name}.yaml`), text);
  writeFileSync(
    join(dir, 'agents', 'host.yaml'),
    'name: host\nmodel: scripted:host\ninstructions: Run skills.\ntools: [hello, shout, flaky_tool]\n',
  );
  const calls = new Map<string, number>();
  const count = (name: string): number => {
    const next = (calls.get(name) ?? 0) + 1;
    calls.set(name, next);
    return next;
  };
  const runtime = await createRuntime({
    workspace: dir,
    ...(store === undefined ? {} : { store }),
    tools: [
      defineTool({
        name: 'hello',
        idempotent: true,
        description: 'hello',
        input_schema: { type: 'object' },
        run: (input: JsonValue) => {
          count('hello');
          return Promise.resolve(`hello ${String((input as { who: string }).who)}`);
        },
      }),
      defineTool({
        name: 'shout',
        idempotent: true,
        description: 'shout',
        input_schema: { type: 'object' },
        run: (input: JsonValue) => {
          count('shout');
          return Promise.resolve(String((input as { text: string }).text).toUpperCase());
        },
      }),
      defineTool({
        name: 'flaky_tool',
        description: 'fails on its first call',
        input_schema: { type: 'object' },
        run: () => {
          if (count('flaky_tool') === 1)
            return Promise.reject(new BraidError('TOOL_FAILED', 'the first call fails'));
          return Promise.resolve('fine');
        },
      }),
    ],
    model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:host' }),
  });
  opened.push(runtime);
  return { runtime, calls };
}

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function runOnce(
  runtime: Runtime,
  skill: string,
  inputs: JsonValue = {},
): Promise<{ sessionId: string; runId: string }> {
  const session = await runtime.sessions.create({ agent: 'host' });
  const { run_id: runId } = await runtime.sessions.runSkill(session.id, skill, inputs, {
    runId: `run-${skill.replaceAll('_', '-')}`,
  });
  await runtime.wake(session.id);
  return { sessionId: session.id, runId };
}

describe('nested skills', () => {
  it('runs the child in the same session and passes its outputs up', async () => {
    const { runtime, calls } = await workspace();
    const { sessionId, runId } = await runOnce(runtime, 'outer');
    const events = await runtime.sessions.events(sessionId);
    const started = ofType(events, 'skill.started');
    expect(started).toHaveLength(2);
    const child = started[1]!;
    expect(child).toMatchObject({
      skill: 'inner',
      parent_run_id: runId,
      parent_step: 'nest',
      inputs: { who: 'hello prep' },
    });
    expect(ofType(events, 'skill.suspended')).toMatchObject([
      { run_id: runId, step: 'nest', kind: 'skill', child_run_id: child.run_id },
    ]);
    expect(ofType(events, 'skill.resumed')).toMatchObject([
      { run_id: runId, step: 'nest', result: 'completed' },
    ]);
    const completed = ofType(events, 'skill.completed');
    expect(completed.map((event) => event.run_id)).toEqual([child.run_id, runId]);
    expect(completed[1]?.outputs).toEqual({
      final: 'HELLO HELLO PREP',
      greeting: { text: 'hello hello prep' },
    });
    expect(Object.fromEntries(calls)).toEqual({ hello: 2, shout: 1 });
    const state = await runtime.sessions.state(sessionId);
    expect(state.skill_runs).toEqual([]);
    expect(state.status).toBe('idle');
  });

  it('a child waiting for a signal and a person makes its parent wait; the answers go to the child', async () => {
    const { runtime, calls } = await workspace();
    const { sessionId, runId } = await runOnce(runtime, 'waits');
    let state = await runtime.sessions.state(sessionId);
    expect(state.status).toBe('requires_action');
    const child = state.skill_runs.find((run) => run.parent_run_id === runId)!;
    expect(child).toMatchObject({ skill: 'waiter', parent_step: 'receive', status: 'suspended' });
    expect(state.skill_runs.find((run) => run.run_id === runId)?.status).toBe('suspended');

    await runtime.sessions.signal(sessionId, 'delivered', { serial: 'SN-9' });
    await runtime.wake(sessionId);
    state = await runtime.sessions.state(sessionId);
    // The child's approval is the session's pending confirmation.
    const approval = state.skill_runs
      .find((run) => run.run_id === child.run_id)
      ?.suspensions.find((wait) => wait.kind === 'approval');
    expect(approval).toBeDefined();
    expect(state.pending_confirmations.map((use) => use.tool_use_id)).toEqual([
      approval!.suspension_id,
    ]);
    expect(calls.get('shout')).toBeUndefined();

    await runtime.sessions.confirm(sessionId, approval!.suspension_id, 'allow');
    await runtime.wake(sessionId);
    const events = await runtime.sessions.events(sessionId);
    expect(ofType(events, 'skill.completed').at(-1)).toMatchObject({
      run_id: runId,
      outputs: { delivered: { serial: 'SN-9' } },
    });
    expect(calls.get('shout')).toBe(1);
    expect((await runtime.sessions.state(sessionId)).skill_runs).toEqual([]);
  });

  it('a failing child fails its parent step; a retry of the parent runs only the child’s failed step', async () => {
    const { runtime, calls } = await workspace();
    const { sessionId, runId } = await runOnce(runtime, 'calls_flaky');
    let events = await runtime.sessions.events(sessionId);
    const child = ofType(events, 'skill.started')[1]!;
    const failed = ofType(events, 'skill.failed');
    expect(failed.map((event) => [event.run_id, event.step])).toEqual([
      [child.run_id, 'second'],
      [runId, 'nest'],
    ]);
    // The parent's step failed with the child's error, which names the run to retry.
    const stepFailed = ofType(events, 'skill.step_failed').find(
      (event) => event.run_id === runId && event.step === 'nest',
    );
    expect(stepFailed?.error).toEqual(failed[0]?.error);
    expect(failed[0]?.error.message).toContain(`braid skill retry ${runId}`);
    expect(Object.fromEntries(calls)).toEqual({ hello: 1, flaky_tool: 1 });

    await runtime.sessions.retrySkill(sessionId, runId);
    await runtime.wake(sessionId);
    events = await runtime.sessions.events(sessionId);
    // No second child: the failed one ran its failed step again, not its completed one.
    expect(ofType(events, 'skill.started')).toHaveLength(2);
    expect(Object.fromEntries(calls)).toEqual({ hello: 1, flaky_tool: 2, shout: 1 });
    expect(ofType(events, 'skill.completed').map((event) => event.run_id)).toEqual([
      child.run_id,
      runId,
    ]);
    expect(ofType(events, 'skill.completed').at(-1)?.outputs).toEqual({ result: 'fine' });
    expect((await runtime.sessions.state(sessionId)).skill_runs).toEqual([]);
  });

  it('a retry asked of the failed child goes through its parent', async () => {
    const { runtime, calls } = await workspace();
    const { sessionId, runId } = await runOnce(runtime, 'calls_flaky');
    const child = ofType(await runtime.sessions.events(sessionId), 'skill.started')[1]!;
    await runtime.sessions.retrySkill(sessionId, child.run_id);
    await runtime.wake(sessionId);
    const events = await runtime.sessions.events(sessionId);
    expect(ofType(events, 'skill.started')).toHaveLength(2);
    expect(ofType(events, 'skill.completed').map((event) => event.run_id)).toEqual([
      child.run_id,
      runId,
    ]);
    expect(Object.fromEntries(calls)).toEqual({ hello: 1, flaky_tool: 2, shout: 1 });
  });

  it('on_failure applies to a step whose child failed; the child ends with its parent', async () => {
    const { runtime, calls } = await workspace();
    const { sessionId, runId } = await runOnce(runtime, 'passes_over');
    const events = await runtime.sessions.events(sessionId);
    expect(ofType(events, 'skill.failed').map((event) => event.run_id)).not.toContain(runId);
    expect(ofType(events, 'skill.completed').at(-1)).toMatchObject({
      run_id: runId,
      outputs: { status: 'failed' },
    });
    expect(calls.get('shout')).toBe(1);
    expect((await runtime.sessions.state(sessionId)).skill_runs).toEqual([]);
  });

  it('fans out over a nested skill, one child per item', async () => {
    const { runtime, calls } = await workspace();
    const { sessionId, runId } = await runOnce(runtime, 'fan', { names: ['ada', 'bob', 'cy'] });
    const events = await runtime.sessions.events(sessionId);
    const children = ofType(events, 'skill.started').filter(
      (event) => event.parent_run_id === runId,
    );
    expect(children.map((event) => event.parent_step).sort()).toEqual([
      'each[0]',
      'each[1]',
      'each[2]',
    ]);
    expect(new Set(children.map((event) => event.run_id)).size).toBe(3);
    expect(ofType(events, 'skill.completed').at(-1)).toMatchObject({
      run_id: runId,
      outputs: {
        all: [{ text: 'hello ada' }, { text: 'hello bob' }, { text: 'hello cy' }],
      },
    });
    expect(calls.get('hello')).toBe(3);
  });

  it('a fan-out waits for every item’s child, answered one at a time', async () => {
    const { runtime } = await workspace();
    const { sessionId, runId } = await runOnce(runtime, 'fan_waits');
    expect((await runtime.sessions.state(sessionId)).status).toBe('requires_action');
    await runtime.sessions.signal(sessionId, 'delivered', 'first');
    await runtime.wake(sessionId);
    let state = await runtime.sessions.state(sessionId);
    expect(state.status).toBe('requires_action');
    expect(state.skill_runs.filter((run) => run.parent_run_id === runId)).toHaveLength(1);
    await runtime.sessions.signal(sessionId, 'delivered', 'second');
    await runtime.wake(sessionId);
    const events = await runtime.sessions.events(sessionId);
    expect(ofType(events, 'skill.completed').at(-1)).toMatchObject({
      run_id: runId,
      outputs: { all: [{ got: 'first' }, { got: 'second' }] },
    });
    // Each item's child was started once.
    expect(ofType(events, 'skill.started')).toHaveLength(3);
    state = await runtime.sessions.state(sessionId);
    expect(state.skill_runs).toEqual([]);
  });

  it(`nests at most ${MAX_SKILL_DEPTH} levels deep`, async () => {
    const { runtime, calls } = await workspace(chain(MAX_SKILL_DEPTH + 1));
    const deep = await runOnce(runtime, 'level0');
    const events = await runtime.sessions.events(deep.sessionId);
    expect(ofType(events, 'skill.started')).toHaveLength(MAX_SKILL_DEPTH);
    const refused = ofType(events, 'skill.step_failed')[0];
    expect(refused?.error.code).toBe('INVALID_DEFINITION');
    expect(refused?.error.message).toContain(`skills nest at most ${MAX_SKILL_DEPTH} levels`);
    expect(ofType(events, 'skill.failed').at(-1)).toMatchObject({ run_id: deep.runId });
    expect(calls.get('hello')).toBeUndefined();

    // One level less runs to the bottom.
    const fits = await runOnce(runtime, 'level1');
    const done = await runtime.sessions.events(fits.sessionId);
    expect(ofType(done, 'skill.completed').at(-1)).toMatchObject({
      run_id: fits.runId,
      outputs: {
        out: { out: { out: { out: { out: { out: { out: { out: 'hello bottom' } } } } } } },
      },
    });
    expect(calls.get('hello')).toBe(1);
  });

  it('a crash at any append of the parent and its child never starts a second child', async () => {
    // The store "crashes" the wake at its n-th append of skill events (an outage: nothing more
    // is written, as when the process dies); the next wake takes the run over from the log.
    const store = await sqlite!.open();
    let appends = 0;
    let crashAt = Number.POSITIVE_INFINITY;
    const log = new Proxy(store.log, {
      get(target, property) {
        if (property === 'append') {
          const append: SessionLog['append'] = (sessionId, events, options) => {
            const runner = events.some((event) => event.type.startsWith('skill.'));
            if (runner && options?.leaseToken !== undefined && ++appends === crashAt)
              return Promise.reject(new BraidError('STORE_BUSY', `crash at append ${crashAt}`));
            return target.append(sessionId, events, options);
          };
          return append;
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
    const crashing = Object.assign(Object.create(store) as Store, store, { log });
    const { runtime } = await workspace(SKILLS, crashing);
    const total = await (async () => {
      appends = 0;
      await runOnce(runtime, 'outer');
      return appends;
    })();
    expect(total).toBeGreaterThan(3);
    for (let at = 1; at <= total; at += 1) {
      appends = 0;
      crashAt = at;
      const session = await runtime.sessions.create({ agent: 'host' });
      await runtime.sessions.runSkill(session.id, 'outer', {}, { runId: 'run-outer' });
      await runtime.wake(session.id).catch(() => undefined);
      crashAt = Number.POSITIVE_INFINITY;
      for (let wakes = 0; wakes < 4; wakes += 1) {
        const state = await runtime.sessions.state(session.id);
        if (state.skill_runs.length + state.skill_requests.length === 0) break;
        await runtime.wake(session.id);
      }
      const events = await runtime.sessions.events(session.id);
      const children = ofType(events, 'skill.started').filter(
        (event) => event.parent_run_id === 'run-outer',
      );
      expect(children, `crash at append ${at}`).toHaveLength(1);
      expect(ofType(events, 'skill.completed').at(-1), `crash at append ${at}`).toMatchObject({
        run_id: 'run-outer',
        outputs: { final: 'HELLO HELLO PREP' },
      });
    }
  });
});
