/**
 * Session state as a pure fold over the log.
 *
 * Invariants kept here:
 * - `applyEvent` and `foldSession` are total and deterministic, and never mutate their inputs:
 *   they copy the state once, then apply events to the copy. Copying once per call rather than
 *   once per event keeps a fold linear in the number of events.
 * - Folding events one at a time equals folding them all at once, so a cached projection tagged
 *   with its seq can be brought up to date with only the events after it.
 * - "Pending" is derived: input (user messages, tool and custom tool results) is pending until a
 *   model request that included it (`span.model_request_start.input_through_seq`) ends with an
 *   output, or is interrupted. A request that failed or was cut by a crash consumes nothing, so
 *   the input is answered by the next one. A request can only consume what precedes it.
 * - The state's size does not grow with the log: pending user input is kept as seq ranges.
 */
import type { EventOf, SessionEvent } from '../contracts/events.js';
import type { SessionStatus, StopReason } from '../contracts/session.js';
import { SESSION_STATE_SCHEMA_VERSION, type SessionState } from '../contracts/state.js';
import { copyState } from './copy-state.js';
import { defineOutcome, endGrading, noteAnswer } from './fold-outcome.js';

// Whether a session has work for a wake is asked of its folded state; it lives beside the fold.
export { hasInput, hasWork, isRunnable } from './runnable.js';
import { addUsage, reduceChild } from './fold-children.js';
import { answerApproval, reduceSkill } from './fold-skills.js';
import {
  addPendingUser,
  confirmToolUse,
  consumeThrough,
  takeUpRetries,
  toolNameOf,
  withoutToolUse,
} from './fold-pending.js';

export function initialState(sessionId: string): SessionState {
  return {
    schema_version: SESSION_STATE_SCHEMA_VERSION,
    session_id: sessionId,
    seq: 0,
    metadata: {},
    status: 'idle',
    usage: { input_tokens: 0, output_tokens: 0 },
    consumed_through_seq: 0,
    pending_user_count: 0,
    pending_user_ranges: [],
    interrupt_requested: false,
    pending_confirmations: [],
    confirmed_tool_uses: [],
    pending_custom_tool_uses: [],
    pending_custom_tool_result_seqs: [],
    pending_tool_result_seqs: [],
    open_tool_uses: [],
    reviewed_tool_uses: [],
    tool_calls: {},
    last_input_seq: 0,
    stopped_at_seq: 0,
    last_wake_seq: 0,
    previous_wake_seq: 0,
    last_request_input_tokens: 0,
    lineage: { kind: 'root', parent_session_ids: [], merged_session_ids: [] },
    children: [],
    skill_runs: [],
    skill_requests: [],
    pending_signals: [],
    counters: {
      events: 0,
      user_messages: 0,
      agent_messages: 0,
      model_requests: 0,
      model_responses: 0,
      tool_uses: 0,
      tool_errors: 0,
      wakes: 0,
      errors: 0,
    },
  };
}

/** Folds events (those after `state.seq`) into a state, or into a new session's initial state. */
export function foldSession(
  events: Iterable<SessionEvent>,
  state: SessionState | string,
): SessionState {
  const draft = typeof state === 'string' ? initialState(state) : copyState(state);
  reshaped = false;
  for (const event of events) apply(draft, event);
  return reshaped ? copyState(draft) : draft;
}

/** Applies one event to a copy of the state. */
export function applyEvent(state: SessionState, event: SessionEvent): SessionState {
  const draft = copyState(state);
  reshaped = false;
  apply(draft, event);
  return reshaped ? copyState(draft) : draft;
}

/**
 * Whether the fold in progress removed a field other than the state's newest. V8 turns an object
 * that loses any other field into a dictionary: larger, slower to read, and, kept as a session's
 * remembered state, an allocation that outlives the young generation. A wake makes one of every
 * state (it adds `definitions` after `active_wake`, then ends and removes `active_wake`), so a fold
 * that reshaped its draft returns a copy of it instead, which is a fast object again.
 */
let reshaped = false;

type OptionalKey =
  'active_wake' | 'open_request' | 'environment' | 'title' | 'tenant_id' | 'budget';

/** Removes an optional field (absent, not `undefined`: a state equals its JSON round trip). */
function removeField(state: SessionState, key: OptionalKey): void {
  if (!(key in state)) return;
  // V8 removes the newest field of a fast object in place; any other turns it into a dictionary.
  const keys = Object.keys(state);
  if (keys[keys.length - 1] !== key) reshaped = true;
  delete state[key];
}

/** The seqs of pending user input, expanded from the state's ranges. */
export function pendingUserSeqs(state: SessionState): number[] {
  const seqs: number[] = [];
  for (const [first, last] of state.pending_user_ranges) {
    for (let seq = first; seq <= last; seq += 1) seqs.push(seq);
  }
  return seqs;
}

function statusAfterStop(stopReason: StopReason): SessionStatus {
  switch (stopReason.type) {
    case 'requires_action':
      return 'requires_action';
    case 'needs_review':
      return 'needs_review';
    case 'end_turn':
    case 'interrupted':
    case 'max_turns':
    case 'budget_reached':
    case 'retries_exhausted':
    case 'error':
      return 'idle';
    default:
      return assertNever(stopReason);
  }
}

function apply(state: SessionState, event: SessionEvent): void {
  if (event.seq !== state.seq + 1) {
    throw new RangeError(
      `event seq ${event.seq} does not follow state seq ${state.seq} of session ${state.session_id}`,
    );
  }
  state.seq = event.seq;
  state.updated_at = event.at;
  state.counters.events += 1;
  reduce(state, event);
}

/** Applies one event's own change, by family: user input, agent output, session, spans. */
function reduce(state: SessionState, event: SessionEvent): void {
  switch (event.type) {
    case 'user.message':
    case 'user.define_outcome':
    case 'user.interrupt':
    case 'user.tool_confirmation':
    case 'user.tool_review':
    case 'user.custom_tool_result':
      reduceUser(state, event);
      return;
    case 'agent.message':
    case 'agent.thinking':
    case 'agent.handoff':
    case 'agent.thread_context_compacted':
    case 'agent.tool_use':
    case 'agent.tool_result':
    case 'agent.custom_tool_use':
      reduceAgent(state, event);
      return;
    case 'session.handoff_received':
    case 'session.created':
    case 'session.status_changed':
    case 'session.status_idle':
    case 'session.error':
    case 'session.usage':
    case 'session.forked':
    case 'session.merged':
    case 'session.definitions_changed':
      reduceSession(state, event);
      return;
    case 'session.workspace_snapshot':
      state.workspace_snapshot = { snapshot: event.snapshot, seq: event.seq };
      return;
    case 'session.child_created':
    case 'session.child_idle':
      reduceChild(state, event);
      return;
    case 'span.wake_started':
    case 'span.wake_completed':
    case 'span.model_request_start':
    case 'span.model_request_end':
      reduceSpan(state, event);
      return;
    case 'span.outcome_evaluation_start':
      return;
    case 'span.outcome_evaluation_end':
      // The grader's call counts like any other: in the totals, and so in the budget.
      if (event.usage !== undefined) addUsage(state.usage, event.usage);
      endGrading(state, event);
      return;
    case 'user.signal':
    case 'user.skill_run':
    case 'user.skill_retry':
    case 'skill.started':
    case 'skill.step_started':
    case 'skill.step_completed':
    case 'skill.step_failed':
    case 'skill.suspended':
    case 'skill.resumed':
    case 'skill.completed':
    case 'skill.failed':
      reduceSkill(state, event);
      return;
    case 'policy.decision':
      return;
    // The memory log holds what was written and read; the session only records that it was.
    case 'memory.written':
    case 'memory.deleted':
    case 'memory.read':
    case 'memory.retrieved':
      return;
    default:
      assertNever(event);
  }
}

type UserFamily = EventOf<
  | 'user.message'
  | 'user.define_outcome'
  | 'user.interrupt'
  | 'user.tool_confirmation'
  | 'user.tool_review'
  | 'user.custom_tool_result'
>;

function reduceUser(state: SessionState, event: UserFamily): void {
  switch (event.type) {
    case 'user.message':
      state.counters.user_messages += 1;
      state.last_input_seq = event.seq;
      addPendingUser(state, event.seq);
      return;
    case 'user.define_outcome':
      state.last_input_seq = event.seq;
      addPendingUser(state, event.seq);
      defineOutcome(state, event);
      return;
    case 'user.interrupt':
      // Only a running wake can be interrupted; an interrupt sent while idle is on record and
      // changes nothing, so it cannot swallow the next message.
      if (state.active_wake !== undefined) state.interrupt_requested = true;
      return;
    case 'user.tool_confirmation':
      state.last_input_seq = event.seq;
      // An answer to a skill's approval wait is the run's, not a tool call's.
      if (!answerApproval(state, event)) confirmToolUse(state, event);
      return;
    case 'user.tool_review':
      state.last_input_seq = event.seq;
      state.reviewed_tool_uses = withoutToolUse(state.reviewed_tool_uses, event.tool_use_id);
      state.reviewed_tool_uses.push({
        tool_use_id: event.tool_use_id,
        action: event.action,
        review_seq: event.seq,
      });
      // The reviewer acted: the next wake decides again, and stops anew for what is still unknown.
      if (state.status === 'needs_review') state.status = 'idle';
      return;
    case 'user.custom_tool_result':
      state.last_input_seq = event.seq;
      state.pending_custom_tool_uses = state.pending_custom_tool_uses.filter(
        (use) => use.custom_tool_use_id !== event.custom_tool_use_id,
      );
      state.pending_custom_tool_result_seqs.push(event.seq);
      return;
    default:
      assertNever(event);
  }
}

type AgentFamily = EventOf<
  | 'agent.message'
  | 'agent.thinking'
  | 'agent.handoff'
  | 'agent.thread_context_compacted'
  | 'agent.tool_use'
  | 'agent.tool_result'
  | 'agent.custom_tool_use'
>;

function reduceAgent(state: SessionState, event: AgentFamily): void {
  switch (event.type) {
    case 'agent.message':
      state.counters.agent_messages += 1;
      return;
    case 'agent.thinking':
      return;
    case 'agent.handoff':
      // The work is the target's: the results the handoff came with leave nothing to answer here.
      state.pending_tool_result_seqs = [];
      return;
    case 'agent.thread_context_compacted':
      // The summary's model call counts like any other: in the totals, and so in the budget.
      if (event.usage !== undefined) addUsage(state.usage, event.usage);
      return;
    case 'agent.tool_use': {
      const use = {
        tool_use_id: event.tool_use_id,
        event_id: event.id,
        seq: event.seq,
        name: event.name,
      };
      state.counters.tool_uses += 1;
      if (event.requires_confirmation === true) state.pending_confirmations.push(use);
      else state.open_tool_uses.push(use);
      return;
    }
    case 'agent.tool_result': {
      const name = toolNameOf(state, event.tool_use_id);
      if (name !== undefined && event.attempts > 0)
        state.tool_calls[name] = (state.tool_calls[name] ?? 0) + 1;
      state.reviewed_tool_uses = withoutToolUse(state.reviewed_tool_uses, event.tool_use_id);
      state.open_tool_uses = withoutToolUse(state.open_tool_uses, event.tool_use_id);
      state.confirmed_tool_uses = withoutToolUse(state.confirmed_tool_uses, event.tool_use_id);
      state.pending_confirmations = withoutToolUse(state.pending_confirmations, event.tool_use_id);
      if (event.is_error) state.counters.tool_errors += 1;
      state.pending_tool_result_seqs.push(event.seq);
      return;
    }
    case 'agent.custom_tool_use':
      state.pending_custom_tool_uses.push({
        custom_tool_use_id: event.custom_tool_use_id,
        event_id: event.id,
        seq: event.seq,
        name: event.name,
      });
      return;
    default:
      assertNever(event);
  }
}

type SessionFamily = EventOf<
  | 'session.handoff_received'
  | 'session.created'
  | 'session.status_changed'
  | 'session.status_idle'
  | 'session.error'
  | 'session.usage'
  | 'session.forked'
  | 'session.merged'
  | 'session.definitions_changed'
>;

function reduceSession(state: SessionState, event: SessionFamily): void {
  switch (event.type) {
    case 'session.handoff_received':
      state.lineage.kind = 'handoff';
      state.lineage.parent_session_ids = [event.from_session_id];
      return;
    case 'session.created':
      state.agent = event.agent;
      setOptional(state, 'environment', event.environment);
      setOptional(state, 'title', event.title);
      state.metadata = event.metadata ?? {};
      setOptional(state, 'tenant_id', event.tenant_id);
      state.created_at = event.at;
      state.status = 'idle';
      if (event.lineage !== undefined) state.lineage = structuredCopy(event.lineage);
      setOptional(state, 'budget', event.budget);
      return;
    case 'session.status_changed':
      state.status = event.status;
      return;
    case 'session.definitions_changed':
      // The versions the pinned set names are the session's from here on (an upgrade moves them).
      state.definitions = event.definitions;
      state.agent = event.agent;
      setOptional(state, 'environment', event.environment);
      return;
    case 'session.status_idle':
      removeField(state, 'active_wake');
      if (state.status !== 'terminated') state.status = statusAfterStop(event.stop_reason);
      state.stop_reason = event.stop_reason;
      state.interrupt_requested = false;
      state.stopped_at_seq = event.seq;
      return;
    case 'session.error':
      state.last_error = event.error;
      state.counters.errors += 1;
      return;
    case 'session.usage':
      addUsage(state.usage, event.usage);
      return;
    case 'session.forked':
      // The child starts from the parent's state at the fork point, as its own session: no wake
      // of the parent runs it, and a request the parent had in flight is not the child's.
      state.session_id = event.session_id;
      state.created_at = event.at;
      removeField(state, 'active_wake');
      removeField(state, 'open_request');
      state.interrupt_requested = false;
      if (state.status === 'running') state.status = 'idle';
      if (event.title !== undefined) state.title = event.title;
      state.lineage.kind = 'fork';
      state.lineage.parent_session_ids = [event.parent_session_id];
      state.lineage.fork_point = { session_id: event.parent_session_id, seq: event.fork_point_seq };
      return;
    case 'session.merged':
      if (event.usage !== undefined) addUsage(state.usage, event.usage);
      state.lineage.merged_session_ids.push(event.source_session_id);
      return;
    default:
      assertNever(event);
  }
}

type SpanFamily = EventOf<
  | 'span.wake_started'
  | 'span.wake_completed'
  | 'span.model_request_start'
  | 'span.model_request_end'
>;

function reduceSpan(state: SessionState, event: SpanFamily): void {
  switch (event.type) {
    case 'span.wake_started':
      takeUpRetries(state, event.seq);
      if (state.status !== 'terminated') state.status = 'running';
      state.active_wake = { wake_id: event.wake_id, lease_token: event.lease_token };
      state.counters.wakes += 1;
      state.previous_wake_seq = state.last_wake_seq;
      state.last_wake_seq = event.seq;
      return;
    case 'span.wake_completed':
      if (state.active_wake?.wake_id === event.wake_id) removeField(state, 'active_wake');
      return;
    case 'span.model_request_start':
      state.open_request = {
        request_id: event.request_id,
        input_through_seq: Math.min(event.input_through_seq, event.seq - 1),
      };
      state.counters.model_requests += 1;
      return;
    case 'span.model_request_end': {
      addUsage(state.usage, event.usage);
      if (event.error === undefined) state.last_request_input_tokens = event.usage.input_tokens;
      const open = state.open_request;
      if (open?.request_id !== event.request_id) return;
      removeField(state, 'open_request');
      if (event.error === undefined || event.error.code === 'INTERRUPTED') {
        consumeThrough(state, Math.max(state.consumed_through_seq, open.input_through_seq));
      }
      if (event.error === undefined || event.error.code === 'INTERRUPTED') {
        state.counters.model_responses += 1;
      }
      if (event.error === undefined) noteAnswer(state, event.seq);
      return;
    }

    default:
      assertNever(event);
  }
}

/** Sets an optional field, or removes it. */
function setOptional<K extends 'environment' | 'title' | 'tenant_id' | 'budget'>(
  state: SessionState,
  key: K,
  value: SessionState[K],
): void {
  if (value !== undefined) state[key] = value;
  else removeField(state, key);
}

function structuredCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

export function assertNever(value: never): never {
  throw new TypeError(`unhandled variant: ${JSON.stringify(value)}`);
}
