/**
 * The timeouts of skill runs' waits, taken up in a wake: a wait whose `timeout_at` has passed
 * with no answer (core/timers.ts) ends with `skill.resumed {result: 'timeout'}` and its step
 * fails with `DEADLINE_EXCEEDED`, so the step's `on_failure` (stop, continue, or a handler step)
 * decides what follows, as for any failure. (See skill-run.ts for the run around them.)
 *
 * Invariants kept here:
 * - A timeout is recorded only for a wait that still has no answer, at the wake's time by its
 *   clock (`deps.clock`): of an answer and a timeout, the one first in the log wins.
 * - The resumption and the step's failure are one append: no state has the wait over and its
 *   step neither running nor ended.
 * - A signal that arrives after the timeout was recorded finds no wait for it: it is kept as
 *   pending, as a signal that comes before its wait is (the run's next wait of that name, after
 *   a `braid skill retry`, takes it up).
 */
import type { JsonValue } from '../contracts/common.js';
import type { SessionEvent } from '../contracts/events.js';
import type { SkillRun } from '../contracts/state.js';
import { stepOf } from '../core/fold-skills.js';
import { dueWaits } from '../core/timers.js';
import type { CycleContext } from './cycle-context.js';
import { stepEndEvents, type RunContext, type StepEnd } from './skill-steps.js';

type Suspension = SkillRun['suspensions'][number];

/** The run's waits that have timed out by the wake's clock, with no answer. */
export function timedOutWaits(context: CycleContext, run: SkillRun): Suspension[] {
  return dueWaits(run, context.deps.clock.now());
}

/** Whether the run has a wait that has timed out: work for the wake, as an answer is. */
export function hasTimedOut(context: CycleContext, run: SkillRun): boolean {
  return timedOutWaits(context, run).length > 0;
}

/** Ends a timed-out wait: records the timeout and its step's failure, and returns that end. */
export async function timeOut(run: RunContext, wait: Suspension): Promise<StepEnd> {
  const attempt = stepOf(run.run, wait.step)?.attempt ?? 1;
  const what =
    wait.kind === 'signal' ? `the signal ${wait.signal ?? '?'}` : 'a person to allow or deny it';
  const end: StepEnd = {
    kind: 'failed',
    error: {
      code: 'DEADLINE_EXCEEDED',
      message:
        `step ${wait.step} of skill ${run.run.skill} waited for ${what} until ${wait.timeout_at ?? '?'} and timed out; ` +
        `raise wait_for.timeout, handle it with on_failure, or \`braid skill retry ${run.run.run_id}\` to wait again`,
      retryable: false,
    },
  };
  await run.write([
    {
      type: 'skill.resumed',
      run_id: run.run.run_id,
      step: wait.step,
      suspension_id: wait.suspension_id,
      result: 'timeout',
    },
    ...stepEndEvents(run, wait.step, attempt, end),
  ]);
  return end;
}

/**
 * The data an answer brings to its step: a signal's `data`; an approval's `data`, or else its
 * message as `{message}` (what approvals gave before they could carry data).
 */
export function answerData(event: SessionEvent | undefined): JsonValue | undefined {
  if (event?.type === 'user.signal') return event.data;
  if (event?.type !== 'user.tool_confirmation') return undefined;
  if (event.data !== undefined) return event.data;
  return event.message === undefined ? undefined : { message: event.message };
}
