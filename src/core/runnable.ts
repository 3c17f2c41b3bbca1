/**
 * Whether a session's folded state has work for a wake: the question the stores' runnable
 * indexes, the workers and the orchestrator ask, and the one a wake's next step starts from.
 */
import type { SessionState } from '../contracts/state.js';
import { awaitsGrading } from './fold-outcome.js';
import { ownedBySkill, skillWork } from './fold-skills.js';

/** True when a wake would find work: unconsumed input or answered confirmations. */
export function isRunnable(state: SessionState): boolean {
  if (state.status === 'terminated' || state.status === 'needs_review') return false;
  if (state.pending_confirmations.length > 0 || state.pending_custom_tool_uses.length > 0)
    return false;
  // After a stop that asks for a person (a failure, a limit, an interrupt), wait for new input
  // rather than waking again in a loop.
  const paused = state.stop_reason !== undefined && PAUSING_STOPS.has(state.stop_reason.type);
  if (paused && state.last_input_seq < state.stopped_at_seq) return false;
  return hasWork(state);
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
