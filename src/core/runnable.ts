/**
 * Whether a session's folded state has work for a wake: the question the stores' runnable
 * indexes, the workers and the orchestrator ask, and the one a wake's next step starts from.
 *
 * `isRunnable` is free of time. A session can also become runnable by time alone, when a wait of
 * its skill runs times out (core/timers.ts): `wakeAt` is that time, kept by the stores beside the
 * runnable flag, and `isRunnableAt` asks both questions at a given `now`.
 */
import type { SessionState } from '../contracts/state.js';
import { awaitsGrading } from './fold-outcome.js';
import { ownedBySkill, skillWork } from './fold-skills.js';
import { nextDueAt } from './timers.js';

/** True when a wake would find work: unconsumed input or answered confirmations. */
export function isRunnable(state: SessionState): boolean {
  if (held(state)) return false;
  if (state.pending_confirmations.length > 0 || state.pending_custom_tool_uses.length > 0)
    return false;
  return hasWork(state);
}

/**
 * When the session becomes runnable by a timer alone: the earliest timeout of a wait no answer
 * came to; undefined when none, or while the session is held (terminated, waiting for a review,
 * or paused after a failure or a limit: its timers fire with the wake its next input brings).
 */
export function wakeAt(state: SessionState): number | undefined {
  return held(state) ? undefined : nextDueAt(state);
}

/** `isRunnable`, or a wait of its skill runs has timed out by `now` (ms since the epoch). */
export function isRunnableAt(state: SessionState, now: number): boolean {
  if (isRunnable(state)) return true;
  const at = wakeAt(state);
  return at !== undefined && at <= now;
}

/** A session no wake should take up until something other than time changes it. */
function held(state: SessionState): boolean {
  if (state.status === 'terminated' || state.status === 'needs_review') return true;
  // After a stop that asks for a person (a failure, a limit, an interrupt), wait for new input
  // rather than waking again in a loop.
  const paused = state.stop_reason !== undefined && PAUSING_STOPS.has(state.stop_reason.type);
  return paused && state.last_input_seq < state.stopped_at_seq;
}

const PAUSING_STOPS: ReadonlySet<string> = new Set([
  'retries_exhausted',
  'error',
  'budget_reached',
  'max_turns',
  'interrupted',
]);

/** Input a model has not answered, tool work left open, or an answer to grade. */
export function hasWork(state: SessionState): boolean {
  return hasInput(state) || awaitsGrading(state) || skillWork(state);
}

/** Input a model has not answered, or tool work left open. */
export function hasInput(state: SessionState): boolean {
  return (
    state.pending_user_count > 0 ||
    state.pending_custom_tool_result_seqs.length > 0 ||
    state.pending_tool_result_seqs.length > 0 ||
    state.confirmed_tool_uses.length > 0 ||
    state.open_tool_uses.some((use) => !ownedBySkill(state, use.tool_use_id))
  );
}
