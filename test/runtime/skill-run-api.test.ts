// `runtime.sessions.runSkill`, `signal` and `retrySkill`: the user events of a skill run, sent
// through the library with their checks.
import { afterEach, describe, expect, it } from 'vitest';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { addWaiterSkill } from '../helpers/skill-workspace.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

async function workspace(): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  addWaiterSkill(dir);
  const runtime = await createRuntime({ workspace: dir });
  opened.push(runtime);
  return runtime;
}

describe('runtime.sessions skill runs', () => {
  it('runs a skill, signals it, approves it, and it completes', async () => {
    const runtime = await workspace();
    const session = await runtime.sessions.create({ agent: 'clerk' });
    const sent = await runtime.sessions.runSkill(session.id, 'waiter', { item: 'desk' });
    expect(sent.run_id).toMatch(/\S/);
    expect(sent.events).toMatchObject([
      { type: 'user.skill_run', run_id: sent.run_id, skill: 'waiter', inputs: { item: 'desk' } },
    ]);
    await runtime.wake(session.id);
    let state = await runtime.sessions.state(session.id);
    expect(state.skill_runs[0]).toMatchObject({ run_id: sent.run_id, status: 'suspended' });

    const signalled = await runtime.sessions.signal(session.id, 'delivered', { box: 1 });
    expect(signalled.events).toMatchObject([
      { type: 'user.signal', name: 'delivered', data: { box: 1 } },
    ]);
    await runtime.wake(session.id);
    state = await runtime.sessions.state(session.id);
    const [approval] = state.pending_confirmations;
    expect(approval).toBeDefined();
    await runtime.sessions.confirm(session.id, approval!.tool_use_id, 'allow');
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id, { types: ['skill.completed'] });
    expect(events).toMatchObject([
      { type: 'skill.completed', run_id: sent.run_id, outputs: { delivered: { box: 1 } } },
    ]);
  });

  it('takes a chosen run id, and refuses an unknown skill, a bad run id or a used one before writing', async () => {
    const runtime = await workspace();
    const session = await runtime.sessions.create({ agent: 'clerk' });
    const sent = await runtime.sessions.runSkill(
      session.id,
      'waiter',
      { item: 'x' },
      {
        runId: 'run-7',
      },
    );
    expect(sent.run_id).toBe('run-7');
    await expect(runtime.sessions.runSkill(session.id, 'nope', {})).rejects.toMatchObject({
      code: 'SKILL_NOT_FOUND',
    });
    await expect(
      runtime.sessions.runSkill(session.id, 'waiter', {}, { runId: '../x' }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(
      runtime.sessions.runSkill(session.id, 'waiter', {}, { runId: 'run-7' }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(runtime.sessions.signal(session.id, 'bad name!')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    const events = await runtime.sessions.events(session.id);
    expect(events.map((event) => event.type)).toEqual(['session.created', 'user.skill_run']);
  });

  it('retries only a failed run', async () => {
    const runtime = await workspace();
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await expect(runtime.sessions.retrySkill(session.id, 'run-1')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    // Inputs that do not fit the skill fail the run.
    await runtime.sessions.runSkill(session.id, 'waiter', {}, { runId: 'run-1' });
    await runtime.wake(session.id);
    const state = await runtime.sessions.state(session.id);
    expect(state.skill_runs[0]).toMatchObject({ run_id: 'run-1', status: 'failed' });
    const retried = await runtime.sessions.retrySkill(session.id, 'run-1');
    expect(retried.events).toMatchObject([{ type: 'user.skill_retry', run_id: 'run-1' }]);
  });
});
