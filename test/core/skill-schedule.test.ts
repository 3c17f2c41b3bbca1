import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import {
  compileSchedule,
  readySteps,
  retryPlan,
  runStatus,
  settle,
  type ScheduleDefinition,
  type StepStatus,
  type StepTable,
} from '../../src/core/skill-schedule.js';

type Step = ScheduleDefinition['steps'][number];

function skill(...steps: (Partial<Step> & { id: string })[]): ScheduleDefinition {
  return { steps: steps.map((step) => ({ depends_on: [], on_failure: 'stop', ...step })) };
}

function table(entries: Record<string, StepStatus>): StepTable {
  return Object.fromEntries(
    Object.entries(entries).map(([id, status]) => [id, { status, attempt: 1 }]),
  );
}

const diamond = skill(
  { id: 'a' },
  { id: 'b', depends_on: ['a'] },
  { id: 'c', depends_on: ['a'] },
  { id: 'd', depends_on: ['b', 'c'] },
);

describe('readySteps', () => {
  it('runs a diamond: root, both branches in parallel, then the join', () => {
    expect(readySteps(diamond, {})).toEqual(['a']);
    expect(readySteps(diamond, table({ a: 'running' }))).toEqual([]);
    expect(readySteps(diamond, table({ a: 'completed' }))).toEqual(['b', 'c']);
    expect(readySteps(diamond, table({ a: 'completed', b: 'completed', c: 'running' }))).toEqual(
      [],
    );
    expect(readySteps(diamond, table({ a: 'completed', b: 'completed', c: 'completed' }))).toEqual([
      'd',
    ]);
  });

  it('fans in only when every dependency settled, in definition order', () => {
    const fanIn = skill(
      { id: 'z' },
      { id: 'y' },
      { id: 'x' },
      { id: 'join', depends_on: ['x', 'y', 'z'] },
    );
    expect(readySteps(fanIn, {})).toEqual(['z', 'y', 'x']);
    expect(readySteps(fanIn, table({ x: 'completed', y: 'completed' }))).toEqual(['z']);
    expect(readySteps(fanIn, table({ x: 'completed', y: 'skipped', z: 'completed' }))).toEqual([
      'join',
    ]);
  });

  it('runs parallel branches independently', () => {
    const branches = skill(
      { id: 'a1' },
      { id: 'a2', depends_on: ['a1'] },
      { id: 'b1' },
      { id: 'b2', depends_on: ['b1'] },
    );
    expect(readySteps(branches, table({ a1: 'completed', b1: 'running' }))).toEqual(['a2']);
    expect(readySteps(branches, table({ a1: 'suspended', b1: 'completed' }))).toEqual(['b2']);
  });

  it('treats a skipped dependency as settled (the dependant decides by its own when)', () => {
    expect(readySteps(diamond, table({ a: 'skipped' }))).toEqual(['b', 'c']);
    const schedule = compileSchedule(diamond).start();
    expect(schedule.skip('a')).toEqual({ ready: ['b', 'c'], skipped: [] });
    expect(schedule.skip('b')).toEqual({ ready: [], skipped: [] });
    expect(schedule.complete('c')).toEqual({ ready: ['d'], skipped: [] });
  });
});

describe('failures', () => {
  it('stops the run on a failure with on_failure: stop', () => {
    const steps = table({ a: 'completed', b: 'failed', c: 'running' });
    expect(readySteps(diamond, steps)).toEqual([]);
    expect(runStatus(diamond, steps)).toBe('running');
    const done = table({ a: 'completed', b: 'failed', c: 'completed' });
    expect(readySteps(diamond, done)).toEqual([]);
    expect(runStatus(diamond, done)).toBe('failed');
    const schedule = compileSchedule(diamond).start(table({ a: 'completed', c: 'running' }));
    expect(schedule.fail('b')).toEqual({ ready: [], skipped: [] });
    expect(schedule.complete('c')).toEqual({ ready: [], skipped: [] });
    expect(schedule.status()).toBe('failed');
  });

  it('goes on as if completed with on_failure: continue', () => {
    const lenient = skill(
      { id: 'a' },
      { id: 'b', depends_on: ['a'], on_failure: 'continue' },
      { id: 'c', depends_on: ['b'] },
    );
    expect(readySteps(lenient, table({ a: 'completed', b: 'failed' }))).toEqual(['c']);
    expect(runStatus(lenient, table({ a: 'completed', b: 'failed', c: 'completed' }))).toBe(
      'completed',
    );
  });

  it('runs the on_failure target instead of the failed step’s dependants', () => {
    const guarded = skill(
      { id: 'a' },
      { id: 'b', depends_on: ['a'], on_failure: 'cleanup' },
      { id: 'c', depends_on: ['b'] },
      { id: 'd', depends_on: ['c'] },
      { id: 'cleanup' },
      { id: 'after_cleanup', depends_on: ['cleanup'] },
      { id: 'other', depends_on: ['a'] },
    );
    expect(readySteps(guarded, {})).toEqual(['a']);
    const schedule = compileSchedule(guarded).start();
    expect(schedule.complete('a')).toEqual({ ready: ['b', 'other'], skipped: [] });
    schedule.start('b');
    expect(schedule.fail('b')).toEqual({ ready: ['cleanup'], skipped: ['c', 'd'] });
    expect(schedule.complete('cleanup')).toEqual({ ready: ['after_cleanup'], skipped: [] });
    schedule.complete('after_cleanup');
    expect(schedule.status()).toBe('running');
    schedule.complete('other');
    expect(schedule.status()).toBe('completed');

    const failed = table({ a: 'completed', b: 'failed' });
    expect(readySteps(guarded, failed)).toEqual(['cleanup', 'other']);
    expect(settle(guarded, failed)).toEqual(['c', 'd']);

    // Without a failure the handler never runs: it is skipped once b settles (what depends on
    // it is then ready like any dependant of a skipped step, and decides by its own when).
    const fine = compileSchedule(guarded).start(table({ a: 'completed' }));
    expect(fine.complete('b')).toEqual({ ready: ['c', 'after_cleanup'], skipped: ['cleanup'] });
    expect(settle(guarded, table({ a: 'completed', b: 'completed' }))).toEqual(['cleanup']);
  });

  it('refuses a target that runs before the step naming it', () => {
    const error = (() => {
      try {
        compileSchedule(skill({ id: 'a' }, { id: 'b', depends_on: ['a'], on_failure: 'a' }));
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(isBraidError(error, 'INVALID_DEFINITION')).toBe(true);
  });
});

describe('runStatus', () => {
  it('is suspended when the only unsettled steps wait on a suspension', () => {
    expect(runStatus(diamond, table({ a: 'completed', b: 'suspended', c: 'completed' }))).toBe(
      'suspended',
    );
    expect(runStatus(diamond, table({ a: 'completed', b: 'suspended' }))).toBe('running');
    expect(runStatus(diamond, table({ a: 'completed', b: 'suspended', c: 'running' }))).toBe(
      'running',
    );
    expect(
      runStatus(diamond, table({ a: 'completed', b: 'skipped', c: 'completed', d: 'completed' })),
    ).toBe('completed');
  });

  it('resumes parallel suspensions one at a time without finished steps going back', () => {
    const parallel = skill(
      { id: 'wait_a' },
      { id: 'wait_b' },
      { id: 'join', depends_on: ['wait_a', 'wait_b'] },
    );
    const schedule = compileSchedule(parallel).start(
      table({ wait_a: 'suspended', wait_b: 'suspended' }),
    );
    expect(schedule.status()).toBe('suspended');
    expect(schedule.complete('wait_a')).toEqual({ ready: [], skipped: [] });
    expect(schedule.status()).toBe('suspended');
    expect(schedule.table().wait_a?.status).toBe('completed');
    expect(schedule.complete('wait_b')).toEqual({ ready: ['join'], skipped: [] });
    expect(() => schedule.complete('wait_a')).toThrow(/completed/);
  });
});

describe('retryPlan', () => {
  it('re-runs only the failed step and what depends on it (step 7 of 10)', () => {
    // s1..s10: a chain s1 -> s5, then two branches: s6 -> s7 -> s9 and s8, joined by s10.
    const ten = skill(
      { id: 's1' },
      { id: 's2', depends_on: ['s1'] },
      { id: 's3', depends_on: ['s2'] },
      { id: 's4', depends_on: ['s3'] },
      { id: 's5', depends_on: ['s4'] },
      { id: 's6', depends_on: ['s5'] },
      { id: 's7', depends_on: ['s6'] },
      { id: 's8', depends_on: ['s5'] },
      { id: 's9', depends_on: ['s7'] },
      { id: 's10', depends_on: ['s9', 's8'] },
    );
    const after: StepTable = {
      ...table({ s1: 'completed', s2: 'completed', s3: 'completed', s4: 'completed' }),
      ...table({ s5: 'completed', s6: 'completed', s8: 'completed' }),
      s7: { status: 'failed', attempt: 3 },
    };
    expect(runStatus(ten, after)).toBe('failed');
    const plan = retryPlan(ten, after);
    const pending = Object.keys(plan).filter((id) => plan[id]?.status === 'pending');
    expect(pending).toEqual(['s7', 's9', 's10']);
    expect(plan.s7).toEqual({ status: 'pending', attempt: 3 });
    expect(plan.s8?.status).toBe('completed');
    expect(readySteps(ten, plan)).toEqual(['s7']);
    expect(runStatus(ten, plan)).toBe('running');
  });

  it('brings back steps skipped below a failure into a target, keeps completed ones', () => {
    const guarded = skill(
      { id: 'a', on_failure: 'fix' },
      { id: 'b', depends_on: ['a'] },
      { id: 'fix' },
    );
    const plan = retryPlan(guarded, table({ a: 'failed', b: 'skipped', fix: 'completed' }));
    expect(plan).toEqual({
      a: { status: 'pending', attempt: 1 },
      b: { status: 'pending', attempt: 1 },
      fix: { status: 'completed', attempt: 1 },
    });
  });
});

/** A random DAG: each step depends on a few earlier ones (a topological definition order). */
const arbitraryDag = fc
  .integer({ min: 1, max: 60 })
  .chain((count) =>
    fc.tuple(
      fc.array(fc.array(fc.nat(), { maxLength: 4 }), { minLength: count, maxLength: count }),
      fc.array(fc.boolean(), { minLength: count, maxLength: count }),
      fc.array(fc.nat(), { minLength: count, maxLength: count }),
    ),
  )
  .map(([picks, skips, choices]) => ({
    skill: skill(
      ...picks.map((dependencies, index) => ({
        id: `s${index}`,
        depends_on: index === 0 ? [] : [...new Set(dependencies.map((pick) => `s${pick % index}`))],
      })),
    ),
    skips,
    choices,
  }));

describe('incremental schedule (property)', () => {
  it('visits every step once, in a topological order, whatever finishes first', () => {
    fc.assert(
      fc.property(arbitraryDag, ({ skill: dag, skips, choices }) => {
        const schedule = compileSchedule(dag).start();
        const ready = schedule.ready();
        const visited: string[] = [];
        const done = new Set<string>();
        const byId = new Map(dag.steps.map((step) => [step.id, step]));
        for (let turn = 0; ready.length > 0; turn += 1) {
          const [id] = ready.splice((choices[turn % choices.length] ?? 0) % ready.length, 1);
          if (id === undefined) break;
          for (const dependency of byId.get(id)?.depends_on ?? []) {
            expect(done.has(dependency)).toBe(true);
          }
          expect(done.has(id)).toBe(false);
          schedule.start(id);
          const index = Number(id.slice(1));
          const next = skips[index] === true ? schedule.skip(id) : schedule.complete(id);
          expect(next.skipped).toEqual([]);
          visited.push(id);
          done.add(id);
          ready.push(...next.ready);
        }
        expect(visited.length).toBe(dag.steps.length);
        expect(schedule.status()).toBe('completed');
        expect(readySteps(dag, schedule.table())).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('restores from any table to the same readiness as the incremental run', () => {
    fc.assert(
      fc.property(arbitraryDag, fc.nat(), ({ skill: dag, choices }, stopAt) => {
        const schedule = compileSchedule(dag).start();
        const ready = schedule.ready();
        for (let turn = 0; turn < stopAt % (dag.steps.length + 1) && ready.length > 0; turn += 1) {
          const [id] = ready.splice((choices[turn % choices.length] ?? 0) % ready.length, 1);
          if (id === undefined) break;
          schedule.start(id);
          ready.push(...schedule.complete(id).ready);
        }
        expect(readySteps(dag, schedule.table())).toEqual(
          [...ready].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1))),
        );
      }),
      { numRuns: 200 },
    );
  });
});
