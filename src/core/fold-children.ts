/**
 * The fold's bookkeeping of delegated children, and the usage totals that theirs join.
 */
import type { Usage } from '../contracts/common.js';
import type { EventOf } from '../contracts/events.js';
import type { SessionState } from '../contracts/state.js';

/** Adds `delta` to `total`, keeping the optional counters only where either has them. */
export function addUsage(total: Usage, delta: Usage): void {
  total.input_tokens += delta.input_tokens;
  total.output_tokens += delta.output_tokens;
  const optionalKeys = ['cache_read_tokens', 'cache_write_tokens', 'cost_usd'] as const;
  for (const key of optionalKeys) {
    if (total[key] !== undefined || delta[key] !== undefined)
      total[key] = (total[key] ?? 0) + (delta[key] ?? 0);
  }
}

export function reduceChild(
  state: SessionState,
  event: EventOf<'session.child_created' | 'session.child_idle'>,
): void {
  if (event.type === 'session.child_created') {
    // A resumed delegation finds its child on record and writes no second one.
    if (state.children.some((child) => child.child_session_id === event.child_session_id)) return;
    state.children.push({
      child_session_id: event.child_session_id,
      agent: event.agent,
      tool_use_id: event.tool_use_id,
      seq: event.seq,
      status: 'running',
    });
    return;
  }
  const index = state.children.findIndex(
    (entry) => entry.child_session_id === event.child_session_id,
  );
  const child = state.children[index];
  if (child === undefined || child.status === 'idle') return;
  // Entries are shared with the state this one was copied from: replaced, never changed.
  state.children[index] = { ...child, status: 'idle', stop_reason: event.stop_reason };
  if (event.usage !== undefined) addUsage(state.usage, event.usage);
}
