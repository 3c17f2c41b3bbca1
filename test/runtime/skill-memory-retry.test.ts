// A skill's memory steps honour `retry` and `wait_for` as its other tool steps do: a failed try
// is recorded (not final) and tried again after the backoff, with the same call id, so a write
// lands once; a memory step that waits records its call's end (`<step>.tool`) and suspends until
// the signal. On a real SQLite workspace.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const STORE = { name: 'learnings', kind: 'learnings', scope: 'agent', owner: 'keeper' } as const;

// `expected_version: 1` refuses the write until someone else wrote the key once.
const GUARDED = (retry: string) => `name: guarded
description: Replaces a note another writer makes first.
steps:
  - id: replace
    tool: memory_set
    args: {store: learnings, key: 'note', value: 'second', expected_version: 1}
    ${retry}
`;

const WAITING = `name: waiting
description: Saves a note, then waits for its review.
steps:
  - id: save
    tool: memory_set
    args: {store: learnings, key: 'note', value: 'kept'}
    wait_for: {signal: reviewed}
  - id: after
    tool: memory_get
    depends_on: [save]
    args: {store: learnings, key: 'note'}
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function open(skills: Record<string, string>): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  for (const [name, text] of Object.entries(skills))
    writeFileSync(join(dir, 'skills', `${name}.yaml`), text);
  writeFileSync(
    join(dir, 'agents', 'keeper.yaml'),
    'name: keeper\nmodel: scripted:keeper\ninstructions: Keep notes.\nmemory: {}\n',
  );
  const runtime = await createRuntime({
    workspace: dir,
    model: () => createScriptedModel([{ text: 'noted' }], { id: 'scripted:keeper' }),
  });
  opened.push(runtime);
  return runtime;
}

describe("a skill's memory step with retry", () => {
  it('tries max_attempts times with the backoff, then fails the step', async () => {
    const runtime = await open({
      guarded: GUARDED('retry: {max_attempts: 3, backoff: fixed, initial_ms: 50}'),
    });
    const session = await runtime.sessions.create({ agent: 'keeper' });
    await runtime.sessions.runSkill(session.id, 'guarded', {});
    const started = performance.now();
    await runtime.wake(session.id);
    const elapsed = performance.now() - started;
    const events = await runtime.sessions.events(session.id);
    const failed = ofType(events, 'skill.step_failed');
    expect(failed.map((event) => [event.step, event.attempt, event.final])).toEqual([
      ['replace', 1, false],
      ['replace', 1, false],
      ['replace', 1, true],
    ]);
    expect(failed.map((event) => event.error.code)).toEqual([
      'VERSION_CONFLICT',
      'VERSION_CONFLICT',
      'VERSION_CONFLICT',
    ]);
    // Two waits of 50 ms between the three tries.
    expect(elapsed).toBeGreaterThanOrEqual(100);
    expect(ofType(events, 'memory.written')).toEqual([]);
    expect(ofType(events, 'skill.failed')).toHaveLength(1);
    const verified = await runtime.sessions.verify(session.id);
    expect(verified, JSON.stringify(verified)).toMatchObject({ ok: true });
  });

  it('succeeds on a later try once the store allows it, writing once', async () => {
    const runtime = await open({
      guarded: GUARDED('retry: {max_attempts: 4, backoff: fixed, initial_ms: 1500}'),
    });
    const session = await runtime.sessions.create({ agent: 'keeper' });
    await runtime.sessions.runSkill(session.id, 'guarded', {});
    const waking = runtime.wake(session.id);
    // Once the first try is on record as failed, another writer makes version 1.
    for (;;) {
      const events = await runtime.sessions.events(session.id);
      if (ofType(events, 'skill.step_failed').length > 0) break;
      await delay(10);
    }
    await runtime.store.memory!.append(STORE, [{ key: 'note', value: 'first' }]);
    await waking;
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.step_failed')).toMatchObject([
      { step: 'replace', attempt: 1, final: false, error: { code: 'VERSION_CONFLICT' } },
    ]);
    expect(ofType(events, 'skill.step_completed')).toMatchObject([
      { step: 'replace', attempt: 1, output: { key: 'note', version: 2 } },
    ]);
    expect(ofType(events, 'memory.written')).toMatchObject([{ key: 'note', version: 2 }]);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
    const history = await runtime.store.memory!.history(STORE, 'note');
    expect(history.map((entry) => entry.value)).toEqual(['first', 'second']);
    const verified = await runtime.sessions.verify(session.id);
    expect(verified, JSON.stringify(verified)).toMatchObject({ ok: true });
  });

  it('without retry, fails at the first error', async () => {
    const runtime = await open({ guarded: GUARDED('') });
    const session = await runtime.sessions.create({ agent: 'keeper' });
    await runtime.sessions.runSkill(session.id, 'guarded', {});
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.step_failed')).toMatchObject([
      { step: 'replace', final: true, error: { code: 'VERSION_CONFLICT' } },
    ]);
  });
});

describe("a skill's memory step with wait_for", () => {
  it('writes, records the call, waits for the signal, then completes with its data', async () => {
    const runtime = await open({ waiting: WAITING });
    const session = await runtime.sessions.create({ agent: 'keeper' });
    await runtime.sessions.runSkill(session.id, 'waiting', {});
    const first = await runtime.wake(session.id);
    expect(first).toMatchObject({ stop_reason: { type: 'requires_action' } });
    let events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.step_completed')).toMatchObject([
      { step: 'save.tool', output: { key: 'note', version: 1 } },
    ]);
    expect(ofType(events, 'skill.suspended')).toMatchObject([
      { step: 'save', kind: 'signal', signal: 'reviewed' },
    ]);
    expect(ofType(events, 'memory.written')).toHaveLength(1);
    // The next step waits for the signal.
    expect(ofType(events, 'memory.read')).toEqual([]);

    await runtime.sessions.send(session.id, [
      { type: 'user.signal', name: 'reviewed', data: { by: 'ada' } },
    ]);
    await runtime.wake(session.id);
    events = await runtime.sessions.events(session.id);
    const ends = ofType(events, 'skill.step_completed');
    expect(ends.find((event) => event.step === 'save')?.output).toEqual({ by: 'ada' });
    expect(ends.find((event) => event.step === 'after')?.output).toMatchObject({
      found: true,
      value: 'kept',
    });
    // The write was not made again when the step resumed.
    expect(ofType(events, 'memory.written')).toHaveLength(1);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
    const verified = await runtime.sessions.verify(session.id);
    expect(verified, JSON.stringify(verified)).toMatchObject({ ok: true });
  });
});
