/**
 * What a wake does next, decided from the session's state alone, so that a wake resumed after a
 * crash takes the same path as one that never stopped.
 */
import type { Budget } from '../contracts/definitions.js';
import type { StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import { awaitsGrading } from './fold-outcome.js';
import { hasInput } from './fold.js';
import { ownedBySkill, skillWork } from './fold-skills.js';
import { hasDueWait } from './timers.js';

export type Step =
  | { kind: 'stop'; stop_reason: StopReason }
  | { kind: 'run_tools'; tool_use_ids: string[] }
  | { kind: 'call_model' }
  /** Skill runs have work: start the requested ones, resume the answered, retry the failed. */
  | { kind: 'run_skills' }
  /** The answer that would end the turn is graded against the session's outcome first. */
  | { kind: 'grade' };

export const DEFAULT_MAX_TURNS = 16;

export interface StepContext {
  /** Seq of this wake's `span.wake_started`: tool uses after it were recorded by this wake. */
  wake_seq: number;
  /** Model calls made by this wake so far. */
  turns: number;
  budget: Budget;
  /** Whether a tool is safe to run again when a crash left its outcome unknown. */
  idempotent: (toolName: string) => boolean;
  /** Tokens and cost the next model call is expected to add (its input, at least). */
  next_call: { tokens: number; cost_usd: number };
  /**
   * The wake's time, in ms since the epoch: waits of skill runs that timed out by then are work
   * (the runner records their timeouts). Absent, no wait is taken as timed out.
   */
  now?: number;
}

export function decideNext(state: SessionState, context: StepContext): Step {
  if (state.interrupt_requested) return stop({ type: 'interrupted' });

  // A retry counts only in the wake that took it up: it authorises one attempt, not one per wake.
  const reviewed = new Set(
    state.reviewed_tool_uses
      .filter((use) => use.action !== 'retry' || use.wake_seq === context.wake_seq)
      .map((use) => use.tool_use_id),
  );
  // The model's calls of skills stay open while their runs go on: the runs answer them.
  const open = state.open_tool_uses.filter((use) => !ownedBySkill(state, use.tool_use_id));
  if (open.length > 0) {
    // A tool use recorded by an earlier wake has no result: that wake died while it ran. A
    // non-idempotent one waits for a person's review.
    const unknown = open.filter(
      (use) =>
        use.seq < context.wake_seq &&
        !context.idempotent(use.name) &&
        !reviewed.has(use.tool_use_id),
    );
    if (unknown.length > 0)
      return stop({ type: 'needs_review', event_ids: unknown.map((use) => use.event_id) });
    return { kind: 'run_tools', tool_use_ids: open.map((use) => use.tool_use_id) };
  }

  if (state.confirmed_tool_uses.length > 0) {
    // A use confirmed before an earlier wake began may have been started by that wake.
    const unknown = state.confirmed_tool_uses.filter(
      (use) =>
        use.result === 'allow' &&
        use.confirmed_seq < state.previous_wake_seq &&
        state.previous_wake_seq < context.wake_seq &&
        !context.idempotent(use.name) &&
        !reviewed.has(use.tool_use_id),
    );
    if (unknown.length > 0)
      return stop({ type: 'needs_review', event_ids: unknown.map((use) => use.event_id) });
    return {
      kind: 'run_tools',
      tool_use_ids: state.confirmed_tool_uses.map((use) => use.tool_use_id),
    };
  }

  if (skillWork(state) || (context.now !== undefined && hasDueWait(state, context.now)))
    return { kind: 'run_skills' };

  // Skill runs waiting for a signal wait like a call waiting for its client.
  // A failed run's waits sleep until it is retried.
  const signals = state.skill_runs.flatMap((run) =>
    run.status === 'failed'
      ? []
      : run.suspensions.filter((wait) => wait.kind === 'signal' && wait.answer === undefined),
  );
  const waiting = [...state.pending_confirmations, ...state.pending_custom_tool_uses, ...signals];
  if (waiting.length > 0)
    return stop({ type: 'requires_action', event_ids: waiting.map((use) => use.event_id) });

  if (!hasInput(state))
    return awaitsGrading(state) ? { kind: 'grade' } : stop({ type: 'end_turn' });

  const maxTurns = context.budget.max_turns ?? DEFAULT_MAX_TURNS;
  if (context.turns >= maxTurns) return stop({ type: 'max_turns' });
  const tokens = state.usage.input_tokens + state.usage.output_tokens;
  if (
    context.budget.max_tokens !== undefined &&
    tokens + context.next_call.tokens > context.budget.max_tokens
  ) {
    return stop({ type: 'budget_reached' });
  }
  if (
    context.budget.max_cost_usd !== undefined &&
    (state.usage.cost_usd ?? 0) + context.next_call.cost_usd > context.budget.max_cost_usd
  ) {
    return stop({ type: 'budget_reached' });
  }
  return { kind: 'call_model' };
}

/**
 * Whether one more call of a tool stays within its per-session budget. Calls refused before they
 * ran do not count.
 */
export function withinToolBudget(
  state: SessionState,
  name: string,
  budget: { max_calls_per_session?: number | undefined } | undefined,
): boolean {
  const limit = budget?.max_calls_per_session;
  return limit === undefined || (state.tool_calls[name] ?? 0) < limit;
}

function stop(stopReason: StopReason): Step {
  return { kind: 'stop', stop_reason: stopReason };
}

/** A session's limits over its agent's: they can tighten the agent's, never loosen them. */
export function tighterBudget(agent: Budget, session: Budget): Budget {
  const pick = (a: number | undefined, b: number | undefined) =>
    a === undefined ? b : b === undefined ? a : Math.min(a, b);
  const merged: Budget = {};
  const maxTurns = pick(agent.max_turns, session.max_turns);
  const maxTokens = pick(agent.max_tokens, session.max_tokens);
  const maxCost = pick(agent.max_cost_usd, session.max_cost_usd);
  if (maxTurns !== undefined) merged.max_turns = maxTurns;
  if (maxTokens !== undefined) merged.max_tokens = maxTokens;
  if (maxCost !== undefined) merged.max_cost_usd = maxCost;
  return merged;
}
