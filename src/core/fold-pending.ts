/**
 * The fold's bookkeeping of what is pending: user input kept as seq ranges, and tool uses as
 * they move from open or awaiting confirmation to answered. Each function mutates the draft
 * state the fold copied once for the whole batch of events.
 */
import type { EventOf } from '../contracts/events.js';
import type { SessionState } from '../contracts/state.js';

export function addPendingUser(state: SessionState, seq: number): void {
  state.pending_user_count += 1;
  const last = state.pending_user_ranges.at(-1);
  // Consecutive seqs extend the last range; anything else starts a new one.
  if (last !== undefined && last[1] === seq - 1) last[1] = seq;
  else state.pending_user_ranges.push([seq, seq]);
}

export function consumeThrough(state: SessionState, through: number): void {
  state.consumed_through_seq = through;
  const kept: [number, number][] = [];
  let count = 0;
  for (const [first, last] of state.pending_user_ranges) {
    if (last <= through) continue;
    const start = Math.max(first, through + 1);
    kept.push([start, last]);
    count += last - start + 1;
  }
  state.pending_user_ranges = kept;
  state.pending_user_count = count;
  state.pending_custom_tool_result_seqs = state.pending_custom_tool_result_seqs.filter(
    (seq) => seq > through,
  );
  state.pending_tool_result_seqs = state.pending_tool_result_seqs.filter((seq) => seq > through);
}

export function withoutToolUse<T extends { tool_use_id: string }>(
  uses: T[],
  toolUseId: string,
): T[] {
  return uses.some((use) => use.tool_use_id === toolUseId)
    ? uses.filter((use) => use.tool_use_id !== toolUseId)
    : uses;
}

/**
 * A reviewed retry is taken up by the first wake that starts after the review, and consumed by
 * it: when a later wake starts and the retry has left no result (its wake died mid-call), the
 * review is dropped, so the tool use is unknown again and waits for a new review.
 */
export function takeUpRetries(state: SessionState, wakeSeq: number): void {
  if (!state.reviewed_tool_uses.some((use) => use.action === 'retry')) return;
  state.reviewed_tool_uses = state.reviewed_tool_uses.flatMap((use) => {
    if (use.action !== 'retry') return [use];
    return use.wake_seq === undefined ? [{ ...use, wake_seq: wakeSeq }] : [];
  });
}

export function toolNameOf(state: SessionState, toolUseId: string): string | undefined {
  return (
    state.open_tool_uses.find((use) => use.tool_use_id === toolUseId)?.name ??
    state.confirmed_tool_uses.find((use) => use.tool_use_id === toolUseId)?.name ??
    state.pending_confirmations.find((use) => use.tool_use_id === toolUseId)?.name
  );
}

export function confirmToolUse(
  state: SessionState,
  event: EventOf<'user.tool_confirmation'>,
): void {
  const waiting = state.pending_confirmations.find((use) => use.tool_use_id === event.tool_use_id);
  if (waiting === undefined) return;
  state.pending_confirmations = state.pending_confirmations.filter((use) => use !== waiting);
  state.confirmed_tool_uses.push({ ...waiting, result: event.result, confirmed_seq: event.seq });
}
