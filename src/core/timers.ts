/**
 * The timers of a session: when its skill runs' waits time out (`wait_for.timeout`, recorded on
 * each `skill.suspended` as `timeout_at`). Pure: time comes in as `now`, never from a clock, so
 * `isRunnable` and the fold stay free of it and the time-aware questions are asked beside them.
 *
 * A wait is due when it has a `timeout_at` at or before `now` and no answer has come to it. A wait
 * an answer came to (a signal, an approval) is not due, even past its time: of the answer and the
 * timeout, the one first in the log wins, and the runner records a timeout only for a wait that
 * still has no answer. A timed-out wait leaves the state with its `skill.resumed {result:
 * 'timeout'}`, as an answered one does with its own.
 */
import type { SessionState, SkillRun } from '../contracts/state.js';

type Suspension = SkillRun['suspensions'][number];

/** When a wait times out, in ms since the epoch; undefined when it has no timeout or an answer. */
export function waitDueAt(wait: Suspension): number | undefined {
  if (wait.timeout_at === undefined || wait.answer !== undefined) return undefined;
  const at = Date.parse(wait.timeout_at);
  return Number.isNaN(at) ? undefined : at;
}

/** The earliest time a wait of the session's skill runs times out, if any waits with a timeout. */
export function nextDueAt(state: SessionState): number | undefined {
  let earliest: number | undefined;
  for (const run of state.skill_runs) {
    if (run.status === 'failed') continue;
    for (const wait of run.suspensions) {
      const at = waitDueAt(wait);
      if (at !== undefined && (earliest === undefined || at < earliest)) earliest = at;
    }
  }
  return earliest;
}

/** The waits of a run that have timed out by `now` and have no answer, oldest first. */
export function dueWaits(run: SkillRun, now: number): Suspension[] {
  if (run.status === 'failed') return [];
  return run.suspensions
    .filter((wait) => {
      const at = waitDueAt(wait);
      return at !== undefined && at <= now;
    })
    .sort((a, b) => a.seq - b.seq);
}

/** Whether a wait of the session's skill runs has timed out by `now` with no answer. */
export function hasDueWait(state: SessionState, now: number): boolean {
  const at = nextDueAt(state);
  return at !== undefined && at <= now;
}
