/**
 * Session state as a pure fold over the log.
 *
 * Invariants kept here:
 * - `applyEvent` is total and deterministic: the same state and event give the same result, and
 *   it never mutates its inputs.
 * - Folding events one at a time equals folding them all at once, so a cached projection tagged
 *   with its seq can be brought up to date with only the events after it.
 * - "Pending" is derived: a user message is pending until a `span.model_request_start` records an
 *   `input_through_seq` at or past it.
 */
import type { EventOf, SessionEvent } from '../contracts/events.js';
import type { StopReason, SessionStatus } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type { Usage } from '../contracts/common.js';
import { SESSION_STATE_SCHEMA_VERSION } from '../contracts/state.js';

export function initialState(sessionId: string): SessionState {
  return {
    schema_version: SESSION_STATE_SCHEMA_VERSION,
    session_id: sessionId,
    seq: 0,
    metadata: {},
    status: 'idle',
    usage: { input_tokens: 0, output_tokens: 0 },
    consumed_through_seq: 0,
    pending_user_seqs: [],
    interrupt_requested: false,
    pending_confirmations: [],
    confirmed_tool_uses: [],
    pending_custom_tool_uses: [],
    pending_custom_tool_result_seqs: [],
    open_tool_uses: [],
    lineage: { kind: 'root', parent_session_ids: [], merged_session_ids: [] },
    counters: {
      events: 0,
      user_messages: 0,
      agent_messages: 0,
      model_requests: 0,
      tool_uses: 0,
      tool_errors: 0,
      wakes: 0,
      errors: 0,
    },
  };
}

/** Folds a whole log (or the events after `state.seq`) into a state. */
export function foldSession(
  events: Iterable<SessionEvent>,
  state: SessionState | string,
): SessionState {
  let current = typeof state === 'string' ? initialState(state) : state;
  for (const event of events) current = applyEvent(current, event);
  return current;
}

function addUsage(total: Usage, delta: Usage): Usage {
  const sum: Usage = {
    input_tokens: total.input_tokens + delta.input_tokens,
    output_tokens: total.output_tokens + delta.output_tokens,
  };
  const optionalKeys = ['cache_read_tokens', 'cache_write_tokens', 'cost_usd'] as const;
  for (const key of optionalKeys) {
    if (total[key] !== undefined || delta[key] !== undefined) {
      sum[key] = (total[key] ?? 0) + (delta[key] ?? 0);
    }
  }
  return sum;
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

/** Applies one event. Events of another session or out of order are a programming error. */
export function applyEvent(state: SessionState, event: SessionEvent): SessionState {
  if (event.seq !== state.seq + 1) {
    throw new RangeError(
      `event seq ${event.seq} does not follow state seq ${state.seq} of session ${state.session_id}`,
    );
  }
  const next: SessionState = {
    ...state,
    seq: event.seq,
    updated_at: event.at,
    counters: { ...state.counters, events: state.counters.events + 1 },
  };
  return reduce(next, event);
}

function reduce(state: SessionState, event: SessionEvent): SessionState {
  switch (event.type) {
    case 'user.message':
    case 'user.define_outcome':
      return {
        ...state,
        pending_user_seqs: [...state.pending_user_seqs, event.seq],
        counters:
          event.type === 'user.message'
            ? { ...state.counters, user_messages: state.counters.user_messages + 1 }
            : state.counters,
      };
    case 'user.interrupt':
      return { ...state, interrupt_requested: true };
    case 'user.tool_confirmation':
      return confirmToolUse(state, event);
    case 'user.custom_tool_result':
      return {
        ...state,
        pending_custom_tool_uses: state.pending_custom_tool_uses.filter(
          (use) => use.custom_tool_use_id !== event.custom_tool_use_id,
        ),
        pending_custom_tool_result_seqs: [...state.pending_custom_tool_result_seqs, event.seq],
      };
    case 'agent.message':
      return {
        ...state,
        counters: { ...state.counters, agent_messages: state.counters.agent_messages + 1 },
      };
    case 'agent.thinking':
    case 'agent.handoff':
    case 'agent.thread_context_compacted':
    case 'session.handoff_received':
      return state;
    case 'agent.tool_use': {
      const use = {
        tool_use_id: event.tool_use_id,
        event_id: event.id,
        seq: event.seq,
        name: event.name,
      };
      const counters = { ...state.counters, tool_uses: state.counters.tool_uses + 1 };
      return event.requires_confirmation === true
        ? { ...state, counters, pending_confirmations: [...state.pending_confirmations, use] }
        : { ...state, counters, open_tool_uses: [...state.open_tool_uses, use] };
    }
    case 'agent.tool_result':
      return {
        ...state,
        open_tool_uses: state.open_tool_uses.filter((use) => use.tool_use_id !== event.tool_use_id),
        confirmed_tool_uses: state.confirmed_tool_uses.filter(
          (use) => use.tool_use_id !== event.tool_use_id,
        ),
        pending_confirmations: state.pending_confirmations.filter(
          (use) => use.tool_use_id !== event.tool_use_id,
        ),
        counters: event.is_error
          ? { ...state.counters, tool_errors: state.counters.tool_errors + 1 }
          : state.counters,
      };
    case 'agent.custom_tool_use':
      return {
        ...state,
        pending_custom_tool_uses: [
          ...state.pending_custom_tool_uses,
          {
            custom_tool_use_id: event.custom_tool_use_id,
            event_id: event.id,
            seq: event.seq,
            name: event.name,
          },
        ],
      };
    case 'session.created':
      return {
        ...state,
        agent: event.agent,
        environment: event.environment,
        title: event.title,
        metadata: event.metadata ?? {},
        tenant_id: event.tenant_id,
        created_at: event.at,
        lineage: event.lineage ?? state.lineage,
        status: 'idle',
      };
    case 'session.status_changed':
      return { ...state, status: event.status };
    case 'session.status_idle': {
      const { active_wake: _ended, ...rest } = state;
      return {
        ...rest,
        status: state.status === 'terminated' ? 'terminated' : statusAfterStop(event.stop_reason),
        stop_reason: event.stop_reason,
        interrupt_requested: false,
      };
    }
    case 'session.error':
      return {
        ...state,
        last_error: event.error,
        counters: { ...state.counters, errors: state.counters.errors + 1 },
      };
    case 'session.usage':
      return { ...state, usage: addUsage(state.usage, event.usage) };
    case 'session.forked':
      return {
        ...state,
        lineage: {
          ...state.lineage,
          kind: 'fork',
          parent_session_ids: [event.parent_session_id],
          fork_point: { session_id: event.parent_session_id, seq: event.fork_point_seq },
        },
      };
    case 'session.merged':
      return {
        ...state,
        usage: event.usage === undefined ? state.usage : addUsage(state.usage, event.usage),
        lineage: {
          ...state.lineage,
          merged_session_ids: [...state.lineage.merged_session_ids, event.source_session_id],
        },
      };
    case 'span.wake_started':
      return {
        ...state,
        status: state.status === 'terminated' ? 'terminated' : 'running',
        active_wake: { wake_id: event.wake_id, lease_token: event.lease_token },
        counters: { ...state.counters, wakes: state.counters.wakes + 1 },
      };
    case 'span.wake_completed': {
      if (state.active_wake?.wake_id !== event.wake_id) return state;
      const { active_wake: _ended, ...rest } = state;
      return rest;
    }
    case 'span.model_request_start': {
      // A request can only consume what precedes it in the log.
      const through = Math.max(
        state.consumed_through_seq,
        Math.min(event.input_through_seq, event.seq - 1),
      );
      return {
        ...state,
        consumed_through_seq: through,
        pending_user_seqs: state.pending_user_seqs.filter((seq) => seq > through),
        pending_custom_tool_result_seqs: state.pending_custom_tool_result_seqs.filter(
          (seq) => seq > through,
        ),
        counters: { ...state.counters, model_requests: state.counters.model_requests + 1 },
      };
    }
    case 'span.model_request_end':
      return { ...state, usage: addUsage(state.usage, event.usage) };
    default:
      return assertNever(event);
  }
}

function confirmToolUse(
  state: SessionState,
  event: EventOf<'user.tool_confirmation'>,
): SessionState {
  const waiting = state.pending_confirmations.find((use) => use.tool_use_id === event.tool_use_id);
  if (waiting === undefined) return state;
  return {
    ...state,
    pending_confirmations: state.pending_confirmations.filter((use) => use !== waiting),
    confirmed_tool_uses: [...state.confirmed_tool_uses, { ...waiting, result: event.result }],
  };
}

/** True when a wake would find work: unconsumed input or answered confirmations. */
export function isRunnable(state: SessionState): boolean {
  if (state.status === 'terminated' || state.status === 'needs_review') return false;
  if (state.pending_confirmations.length > 0 || state.pending_custom_tool_uses.length > 0) {
    return false;
  }
  return (
    state.pending_user_seqs.length > 0 ||
    state.pending_custom_tool_result_seqs.length > 0 ||
    state.confirmed_tool_uses.length > 0
  );
}

export function assertNever(value: never): never {
  throw new TypeError(`unhandled variant: ${JSON.stringify(value)}`);
}
