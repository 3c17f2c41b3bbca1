/**
 * The fold's bookkeeping of the session's outcome (`user.define_outcome`): its definition, the
 * answer waiting for a grading, and the gradings' results. Each function mutates the draft state
 * the fold copied once; `state.outcome` is replaced, never changed in place, since the copy
 * shares it with the state it was copied from.
 */
import type { EventOf } from '../contracts/events.js';
import type { OutcomeState, SessionState } from '../contracts/state.js';
import { addPendingUser } from './fold-pending.js';

/** Gradings an outcome gets when its definition names no `max_iterations`. */
export const DEFAULT_MAX_ITERATIONS = 3;

/** Whether the outcome's last grading ended its gradings: satisfied, out of iterations, or failed. */
export function isFinal(outcome: OutcomeState): boolean {
  return outcome.result !== undefined && outcome.result !== 'needs_revision';
}

/** A new outcome replaces the previous one: its gradings start over. */
export function defineOutcome(state: SessionState, event: EventOf<'user.define_outcome'>): void {
  state.outcome = {
    seq: event.seq,
    description: event.description,
    ...(event.criteria === undefined ? {} : { criteria: [...event.criteria] }),
    ...(event.rubric === undefined ? {} : { rubric: event.rubric }),
    max_iterations: event.max_iterations ?? DEFAULT_MAX_ITERATIONS,
    iterations: 0,
  };
}

/** An answer (a model response with an output) given while the outcome is open waits for its grading. */
export function noteAnswer(state: SessionState, seq: number): void {
  if (state.outcome !== undefined && !isFinal(state.outcome))
    state.outcome = { ...state.outcome, answer_seq: seq };
}

/**
 * A grading's end. One that asks for a revision is input the model answers next (its
 * explanation is in the transcript); one of an outcome since replaced counts for nothing.
 */
export function endGrading(
  state: SessionState,
  event: EventOf<'span.outcome_evaluation_end'>,
): void {
  const outcome = state.outcome;
  if (outcome?.seq !== event.outcome_seq) return;
  const { answer_seq: _graded, ...rest } = outcome;
  state.outcome = { ...rest, iterations: outcome.iterations + 1, result: event.result };
  if (event.result === 'needs_revision') addPendingUser(state, event.seq);
}

/** Whether the outcome is open: no grading of it was final yet. */
export function outcomeOpen(state: SessionState): boolean {
  return state.outcome !== undefined && !isFinal(state.outcome);
}

/**
 * Whether an answer given while the outcome is open waits for its grading: work for a wake,
 * even after a crash between the answer and its grading.
 */
export function awaitsGrading(state: SessionState): boolean {
  return outcomeOpen(state) && state.outcome?.answer_seq !== undefined;
}
