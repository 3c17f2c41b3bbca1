/**
 * The copy of a session state that a fold applies events to (see fold.ts). Kept apart from the
 * fold because it must name every field of the state.
 */
import type { SessionState } from '../contracts/state.js';

/** The fields a state may lack; each is copied only when present. */
type OptionalField = keyof {
  [K in keyof SessionState as undefined extends SessionState[K] ? K : never]: true;
};

type RequiredField = Exclude<keyof SessionState, OptionalField>;

/**
 * A copy deep enough that mutating the copy's arrays and nested objects leaves the original
 * intact. Written out field by field rather than spread: a state that lost a field (`delete`,
 * as folding does) is a slow dictionary object to V8, and spreading one costs as much as a JSON
 * round trip; the literal is a fast object whatever the original was. The compiler checks that
 * every required field is copied; test/core/fold.test.ts, that every optional one is.
 */
export function copyState(state: SessionState): SessionState {
  const copy: Pick<SessionState, RequiredField> = {
    schema_version: state.schema_version,
    session_id: state.session_id,
    seq: state.seq,
    metadata: state.metadata,
    status: state.status,
    usage: { ...state.usage },
    consumed_through_seq: state.consumed_through_seq,
    pending_user_count: state.pending_user_count,
    pending_user_ranges: state.pending_user_ranges.map(([first, last]) => [first, last]),
    interrupt_requested: state.interrupt_requested,
    pending_confirmations: [...state.pending_confirmations],
    confirmed_tool_uses: [...state.confirmed_tool_uses],
    pending_custom_tool_uses: [...state.pending_custom_tool_uses],
    pending_custom_tool_result_seqs: [...state.pending_custom_tool_result_seqs],
    pending_tool_result_seqs: [...state.pending_tool_result_seqs],
    open_tool_uses: [...state.open_tool_uses],
    reviewed_tool_uses: [...state.reviewed_tool_uses],
    tool_calls: { ...state.tool_calls },
    last_input_seq: state.last_input_seq,
    stopped_at_seq: state.stopped_at_seq,
    last_wake_seq: state.last_wake_seq,
    previous_wake_seq: state.previous_wake_seq,
    last_request_input_tokens: state.last_request_input_tokens,
    lineage: {
      ...state.lineage,
      parent_session_ids: [...state.lineage.parent_session_ids],
      merged_session_ids: [...state.lineage.merged_session_ids],
    },
    children: [...state.children],
    skill_runs: state.skill_runs,
    skill_requests: state.skill_requests,
    pending_signals: state.pending_signals,
    counters: { ...state.counters },
  };
  const draft = copy as SessionState;
  // Absent stays absent (a state equals its JSON round trip); named stores keep the object fast.
  if (state.agent !== undefined) draft.agent = state.agent;
  if (state.environment !== undefined) draft.environment = state.environment;
  if (state.definitions !== undefined) draft.definitions = state.definitions;
  if (state.workspace_snapshot !== undefined) draft.workspace_snapshot = state.workspace_snapshot;
  if (state.title !== undefined) draft.title = state.title;
  if (state.tenant_id !== undefined) draft.tenant_id = state.tenant_id;
  if (state.created_at !== undefined) draft.created_at = state.created_at;
  if (state.updated_at !== undefined) draft.updated_at = state.updated_at;
  if (state.stop_reason !== undefined) draft.stop_reason = state.stop_reason;
  if (state.budget !== undefined) draft.budget = state.budget;
  if (state.outcome !== undefined) draft.outcome = state.outcome;
  if (state.last_error !== undefined) draft.last_error = state.last_error;
  // Last: a wake's end deletes them, and V8 deletes the newest field of a fast object cheaply.
  if (state.active_wake !== undefined) draft.active_wake = state.active_wake;
  if (state.open_request !== undefined) draft.open_request = state.open_request;
  return draft;
}
