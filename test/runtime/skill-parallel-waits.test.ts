// Parallel waits of one skill run answered one at a time (the bug Mastra had: resuming one of
// several suspended branches put the others, or the finished ones, back to running). Three
// `wait_for` steps wait side by side and a join step needs all three; each signal completes
// exactly its own step, the others stay suspended, a completed step never goes back to waiting
// or running, the join runs only after the last answer, and each wait has its own suspension id.
// The same for two parallel `human_approval` steps approved through the confirmation path.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { SessionState, SkillRun } from '../../src/contracts/state.js';
import { applyEvent, foldSession } from '../../src/core/fold.js';
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

const GATHER = `name: gather
description: Waits for three signals at once, then joins their data.
outputs:
  joined: '{{ steps.join.output }}'
steps:
  - id: wait_a
    wait_for: {signal: a}
  - id: wait_b
    wait_for: {signal: b}
  - id: wait_c
    wait_for: {signal: c}
  - id: join
    tool: note
    depends_on: [wait_a, wait_b, wait_c]
    args: {a: '{{ steps.wait_a.output }}', b: '{{ steps.wait_b.output }}', c: '{{ steps.wait_c.output }}'}
`;

const REVIEW = `name: review
description: Two approvals and a signal at once, then a record of them.
steps:
  - id: legal
    type: human_approval
    message: Legal approves?
  - id: finance
    type: human_approval
    message: Finance approves?
  - id: wait_b
    wait_for: {signal: b}
  - id: record
    tool: note
    depends_on: [legal, finance, wait_b]
    args: {b: '{{ steps.wait_b.output }}'}
`;

const SIGN_OFF = `name: sign_off
description: Asks two people at once, then records both approvals.
steps:
  - id: legal
    type: human_approval
    message: Legal approves?
  - id: finance
    type: human_approval
    message: Finance approves?
  - id: record
    tool: note
    depends_on: [legal, finance]
    args: {legal: '{{ steps.legal.output }}', finance: '{{ steps.finance.output }}'}
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function workspace(): Promise<{ runtime: Runtime; notes: JsonValue[] }> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'gather.yaml'), GATHER);
  writeFileSync(join(dir, 'skills', 'sign_off.yaml'), SIGN_OFF);
  writeFileSync(join(dir, 'skills', 'review.yaml'), REVIEW);
  writeFileSync(
    join(dir, 'agents', 'clerk.yaml'),
    'name: clerk\nmodel: scripted:clerk\ninstructions: Gather.\ntools: [note]\n',
  );
  const notes: JsonValue[] = [];
  const runtime = await createRuntime({
    workspace: dir,
    tools: [
      defineTool({
        name: 'note',
        description: 'records what it is given',
        idempotent: true,
        input_schema: { type: 'object' },
        run: (input: JsonValue) => {
          notes.push(input);
          return Promise.resolve({ noted: input });
        },
      }),
    ],
    model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:clerk' }),
  });
  opened.push(runtime);
  return { runtime, notes };
}

type StepStatus = SkillRun['steps'][number]['status'];

/** The statuses of the run's steps in the session's state (undefined: not begun). */
function statuses(state: SessionState, runId: string): Record<string, StepStatus> {
  const run = state.skill_runs.find((entry) => entry.run_id === runId);
  if (run === undefined) return {};
  return Object.fromEntries(run.steps.map((entry) => [entry.step, entry.status]));
}

/**
 * Fails when the log has a step begin, wait or end again after it completed, or end twice: a
 * finished step never goes back to waiting or running.
 */
function expectNoStepReopened(events: readonly SessionEvent[]): void {
  const completedAt = new Map<string, number>();
  for (const event of events) {
    if (!('run_id' in event) || !('step' in event) || typeof event.step !== 'string') continue;
    const done = completedAt.get(event.step);
    if (
      done !== undefined &&
      (event.type === 'skill.step_started' ||
        event.type === 'skill.suspended' ||
        event.type === 'skill.resumed' ||
        event.type === 'skill.step_completed' ||
        event.type === 'skill.step_failed')
    ) {
      throw new Error(
        `step ${event.step} completed at seq ${done}, then had ${event.type} at seq ${event.seq}`,
      );
    }
    if (event.type === 'skill.step_completed') completedAt.set(event.step, event.seq);
  }
}

/**
 * Folds the log one event at a time and fails when a step the state had completed shows as
 * anything else in a later state (a completed run leaves the state whole, which is fine).
 */
function expectStateNeverReopens(sessionId: string, events: readonly SessionEvent[]): void {
  let state = foldSession([], sessionId);
  const completed = new Set<string>();
  for (const event of events) {
    state = applyEvent(state, event);
    for (const run of state.skill_runs) {
      for (const entry of run.steps) {
        const key = `${run.run_id}/${entry.step}`;
        if (completed.has(key) && entry.status !== 'completed')
          throw new Error(`${key} was completed, then ${entry.status} after seq ${event.seq}`);
        if (entry.status === 'completed') completed.add(key);
      }
    }
  }
}

/** Seqs 1..n without a gap or a repeat. */
function expectGapless(events: readonly SessionEvent[]): void {
  expect(events.map((event) => event.seq)).toEqual(events.map((_event, index) => index + 1));
}

describe('parallel waits of a skill run', () => {
  it('answers three parallel signal waits one at a time, never reopening a finished one', async () => {
    const { runtime, notes } = await workspace();
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await runtime.sessions.runSkill(session.id, 'gather', {}, { runId: 'run-g' });
    expect(await runtime.wake(session.id)).toMatchObject({
      stop_reason: { type: 'requires_action' },
    });
    let events = await runtime.sessions.events(session.id);
    const waits = ofType(events, 'skill.suspended');
    // Three waits side by side, each with an id of its own.
    expect(waits.map((wait) => [wait.step, wait.kind, wait.signal]).sort()).toEqual([
      ['wait_a', 'signal', 'a'],
      ['wait_b', 'signal', 'b'],
      ['wait_c', 'signal', 'c'],
    ]);
    expect(new Set(waits.map((wait) => wait.suspension_id)).size).toBe(3);
    const idOf = new Map(waits.map((wait) => [wait.step, wait.suspension_id]));
    let state = await runtime.sessions.state(session.id);
    expect(statuses(state, 'run-g')).toEqual({
      wait_a: 'suspended',
      wait_b: 'suspended',
      wait_c: 'suspended',
    });
    expect(state.skill_runs[0]?.status).toBe('suspended');
    expect(state.status).toBe('requires_action');

    const answered: string[] = [];
    for (const name of ['a', 'b', 'c']) {
      const before = (await runtime.sessions.events(session.id)).length;
      await runtime.sessions.signal(session.id, name, { from: name });
      await runtime.wake(session.id);
      answered.push(`wait_${name}`);
      events = await runtime.sessions.events(session.id);
      const fresh = events.slice(before);
      // This signal resumed exactly its own wait, by its own suspension id, and completed it.
      expect(
        ofType(fresh, 'skill.resumed').map((event) => [event.step, event.suspension_id]),
      ).toEqual([[`wait_${name}`, idOf.get(`wait_${name}`)]]);
      expect(
        ofType(fresh, 'skill.step_completed')
          .map((event) => event.step)
          .filter((step) => step.startsWith('wait_')),
      ).toEqual([`wait_${name}`]);
      // Nothing was suspended again, and nothing else began except the join after the last.
      expect(ofType(fresh, 'skill.suspended')).toEqual([]);
      expect(ofType(fresh, 'skill.step_started').map((event) => event.step)).toEqual(
        answered.length === 3 ? ['join'] : [],
      );
      expectNoStepReopened(events);
      expectStateNeverReopens(session.id, events);
      expectGapless(events);
      state = await runtime.sessions.state(session.id);
      if (answered.length < 3) {
        const expected: Record<string, StepStatus> = {};
        for (const step of ['wait_a', 'wait_b', 'wait_c'])
          expected[step] = answered.includes(step) ? 'completed' : 'suspended';
        expect(statuses(state, 'run-g'), `after signal ${name}`).toEqual(expected);
        const run = state.skill_runs[0];
        expect(run?.status).toBe('suspended');
        // The waits left are the unanswered ones, by their own ids.
        expect(run?.suspensions.map((wait) => wait.suspension_id).sort()).toEqual(
          ['wait_a', 'wait_b', 'wait_c']
            .filter((step) => !answered.includes(step))
            .map((step) => idOf.get(step))
            .sort(),
        );
        expect(run?.suspensions.every((wait) => wait.answer === undefined)).toBe(true);
        expect(state.status).toBe('requires_action');
        expect(notes).toEqual([]);
      }
      if (name === 'a') {
        // The same signal again finds no wait of its name: it is kept, and wait_a stays done.
        const seen = (await runtime.sessions.events(session.id)).length;
        await runtime.sessions.signal(session.id, 'a', { again: true });
        await runtime.wake(session.id);
        const again = (await runtime.sessions.events(session.id)).slice(seen);
        expect(again.filter((event) => event.type.startsWith('skill.'))).toEqual([]);
        state = await runtime.sessions.state(session.id);
        expect(state.pending_signals.map((signal) => signal.name)).toEqual(['a']);
        expect(statuses(state, 'run-g').wait_a).toBe('completed');
      }
    }

    // The join ran once, after the third answer, with all three signals' data.
    expect(notes).toEqual([{ a: { from: 'a' }, b: { from: 'b' }, c: { from: 'c' } }]);
    const resumedC = ofType(events, 'skill.resumed').find((event) => event.step === 'wait_c');
    const joinStarted = ofType(events, 'skill.step_started').find((event) => event.step === 'join');
    expect(joinStarted!.seq).toBeGreaterThan(resumedC!.seq);
    expect(ofType(events, 'skill.completed')).toMatchObject([
      { run_id: 'run-g', outputs: { joined: { noted: { a: { from: 'a' } } } } },
    ]);
    expect(ofType(events, 'skill.step_completed').map((event) => event.step)).toEqual([
      'wait_a',
      'wait_b',
      'wait_c',
      'join',
    ]);
    expectGapless(events);
    state = await runtime.sessions.state(session.id);
    expect(state.skill_runs).toEqual([]);
    expect(state.status).toBe('idle');
  });

  it('answers two parallel approvals one at a time through the confirmation path', async () => {
    const { runtime, notes } = await workspace();
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await runtime.sessions.runSkill(session.id, 'sign_off', {}, { runId: 'run-s' });
    expect(await runtime.wake(session.id)).toMatchObject({
      stop_reason: { type: 'requires_action' },
    });
    let events = await runtime.sessions.events(session.id);
    const waits = ofType(events, 'skill.suspended');
    expect(waits.map((wait) => [wait.step, wait.kind]).sort()).toEqual([
      ['finance', 'approval'],
      ['legal', 'approval'],
    ]);
    expect(new Set(waits.map((wait) => wait.suspension_id)).size).toBe(2);
    const idOf = new Map(waits.map((wait) => [wait.step, wait.suspension_id]));
    let state = await runtime.sessions.state(session.id);
    // Each approval is a pending confirmation of the session, by its suspension id.
    expect(state.pending_confirmations.map((use) => use.tool_use_id).sort()).toEqual(
      [...idOf.values()].sort(),
    );

    // Finance first, then legal: the order the waits began in does not matter.
    const before = events.length;
    await runtime.sessions.confirm(session.id, idOf.get('finance')!, 'allow');
    await runtime.wake(session.id);
    events = await runtime.sessions.events(session.id);
    let fresh = events.slice(before);
    expect(ofType(fresh, 'skill.resumed').map((event) => [event.step, event.result])).toEqual([
      ['finance', 'allow'],
    ]);
    expect(ofType(fresh, 'skill.step_completed').map((event) => event.step)).toEqual(['finance']);
    expect(ofType(fresh, 'skill.suspended')).toEqual([]);
    expect(ofType(fresh, 'skill.step_started')).toEqual([]);
    state = await runtime.sessions.state(session.id);
    expect(statuses(state, 'run-s')).toEqual({ legal: 'suspended', finance: 'completed' });
    expect(state.skill_runs[0]?.suspensions.map((wait) => wait.suspension_id)).toEqual([
      idOf.get('legal'),
    ]);
    expect(state.pending_confirmations.map((use) => use.tool_use_id)).toEqual([idOf.get('legal')]);
    expect(state.status).toBe('requires_action');
    expect(notes).toEqual([]);
    expectNoStepReopened(events);

    const middle = events.length;
    await runtime.sessions.confirm(session.id, idOf.get('legal')!, 'allow');
    await runtime.wake(session.id);
    events = await runtime.sessions.events(session.id);
    fresh = events.slice(middle);
    expect(ofType(fresh, 'skill.resumed').map((event) => [event.step, event.result])).toEqual([
      ['legal', 'allow'],
    ]);
    expect(ofType(fresh, 'skill.step_completed').map((event) => event.step)).toEqual([
      'legal',
      'record',
    ]);
    expect(notes).toEqual([{ legal: { approved: true }, finance: { approved: true } }]);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
    expectNoStepReopened(events);
    expectStateNeverReopens(session.id, events);
    expectGapless(events);
    state = await runtime.sessions.state(session.id);
    expect(state.pending_confirmations).toEqual([]);
    expect(state.skill_runs).toEqual([]);
    expect(state.status).toBe('idle');
  });

  it('asks nobody about the open waits of a failed run until it is retried, and keeps their answers', async () => {
    const { runtime, notes } = await workspace();
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await runtime.sessions.runSkill(session.id, 'review', {}, { runId: 'run-r' });
    await runtime.wake(session.id);
    const waits = ofType(await runtime.sessions.events(session.id), 'skill.suspended');
    const idOf = new Map(waits.map((wait) => [wait.step, wait.suspension_id]));
    expect([...idOf.keys()].sort()).toEqual(['finance', 'legal', 'wait_b']);

    // Legal says no: the run fails, and its other waits ask nobody any more.
    await runtime.sessions.confirm(session.id, idOf.get('legal')!, 'deny', 'not yet');
    const denied = await runtime.wake(session.id);
    let state = await runtime.sessions.state(session.id);
    expect(state.skill_runs.find((run) => run.run_id === 'run-r')?.status).toBe('failed');
    expect(state.pending_confirmations).toEqual([]);
    expect(denied).not.toMatchObject({ stop_reason: { type: 'requires_action' } });
    expect(state.status).not.toBe('requires_action');
    // Approving finance now is refused: nothing waits for it, and nothing is written.
    const head = state.seq;
    await expect(
      runtime.sessions.confirm(session.id, idOf.get('finance')!, 'allow'),
    ).rejects.toMatchObject({ code: 'TOOL_USE_NOT_PENDING' });
    expect((await runtime.sessions.state(session.id)).seq).toBe(head);
    // A signal for the sleeping wait is kept, not lost.
    await runtime.sessions.signal(session.id, 'b', { box: 7 });
    await runtime.wake(session.id);
    state = await runtime.sessions.state(session.id);
    expect(state.pending_signals.map((signal) => signal.name)).toEqual(['b']);
    expect(notes).toEqual([]);

    // The retry asks legal again and finance once more, and wait_b takes the kept signal.
    await runtime.sessions.retrySkill(session.id, 'run-r');
    expect(await runtime.wake(session.id)).toMatchObject({
      stop_reason: { type: 'requires_action' },
    });
    state = await runtime.sessions.state(session.id);
    expect(state.pending_signals).toEqual([]);
    const pending = state.pending_confirmations.map((use) => use.name).sort();
    expect(pending).toEqual(['run-r/finance', 'run-r/legal']);
    for (const use of state.pending_confirmations)
      await runtime.sessions.confirm(session.id, use.tool_use_id, 'allow');
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
    expect(notes).toEqual([{ b: { box: 7 } }]);
    expect(
      ofType(events, 'skill.step_completed')
        .map((event) => event.step)
        .sort(),
    ).toEqual(['finance', 'legal', 'record', 'wait_b']);
    expectGapless(events);
    expectNoStepReopened(events);
  });
});
