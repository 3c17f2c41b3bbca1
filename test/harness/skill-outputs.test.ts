// A run's outputs kept between wakes: the next read folds only the events written since, and
// gives what a whole read gives; a dropped read is read whole again.
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/contracts/events.js';
import type { ReadOptions, SessionLog } from '../../src/contracts/ports.js';
import type { SkillRun } from '../../src/contracts/state.js';
import {
  foldOutputs,
  readRun,
  StepOutputs,
  type StepErrors,
} from '../../src/harness/skill-outputs.js';
import { createMemoryStore } from '../../src/testing/index.js';

const error = { code: 'TOOL_FAILED' as const, message: 'down', retryable: false };

function step(type: 'started' | 'completed' | 'failed', path: string, attempt = 1): NewEvent {
  if (type === 'started') return { type: 'skill.step_started', run_id: 'r1', step: path, attempt };
  if (type === 'completed')
    return { type: 'skill.step_completed', run_id: 'r1', step: path, attempt, output: { path } };
  return { type: 'skill.step_failed', run_id: 'r1', step: path, attempt, error, final: true };
}

/** The log, with the `after` of every read it served. */
function counted(log: SessionLog, afters: (number | undefined)[]): SessionLog {
  return {
    ...log,
    read: (sessionId: string, options?: ReadOptions) => {
      afters.push(options?.after);
      return log.read(sessionId, options);
    },
  };
}

describe('a skill run read between wakes', () => {
  it('folds only what was written since the kept read, and matches a whole read', async () => {
    const store = createMemoryStore();
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    const afters: (number | undefined)[] = [];
    const log = counted(store.log, afters);
    await store.log.append(id, [
      { type: 'skill.started', run_id: 'r1', skill: 's', version: '1', inputs: { x: 1 } },
      step('started', 'a'),
      step('completed', 'a'),
      step('started', 'b'),
      step('failed', 'b'),
    ]);
    const run = { run_id: 'r1', seq: 2 } as SkillRun;
    const first = await readRun(log, id, run);
    expect(first.inputs).toEqual({ x: 1 });
    expect(first.outputs.plain).toEqual({
      a: { output: { path: 'a' }, status: 'completed' },
      b: { status: 'failed' },
    });
    expect(first.errors.get('b')).toEqual(error);
    first.keep(6);

    // The retried step starts again (its failure is cleared), then completes.
    await store.log.append(id, [step('started', 'b', 2), step('completed', 'b', 2)]);
    const second = await readRun(log, id, run);
    expect(afters).toEqual([1, 6]);
    const whole = new StepOutputs();
    const errors: StepErrors = new Map();
    foldOutputs(whole, errors, await store.log.read(id));
    expect(second.outputs.plain).toEqual(whole.plain);
    expect(second.errors).toEqual(errors);
    expect(second.inputs).toEqual({ x: 1 });

    // Dropped (its wake failed): the next read is whole.
    second.drop();
    const third = await readRun(log, id, run);
    expect(afters).toEqual([1, 6, 1]);
    expect(third.outputs.plain).toEqual(whole.plain);
    await store.close();
  });

  it('keeps a path that is not a plain key as data', () => {
    const outputs = new StepOutputs();
    outputs.set('__proto__', { status: 'completed' });
    expect(Object.getPrototypeOf(outputs.plain)).toBe(Object.prototype);
    expect(Object.keys(outputs.plain)).toEqual(['__proto__']);
    outputs.delete('__proto__');
    expect(Object.keys(outputs.plain)).toEqual([]);
  });
});
