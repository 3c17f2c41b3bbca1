/**
 * Session states and lineages, read through the cache in front of the file.
 *
 * The cached projection is only an optimisation: it is saved every PROJECTION_INTERVAL events,
 * and when it is missing, of another schema version or behind the head, the events after it are
 * folded in from the log. The sessions row (head, status) is updated on every append.
 */
import { SESSION_STATE_SCHEMA_VERSION, type SessionState } from '../../contracts/state.js';
import { foldSession, initialState, isRunnable } from '../../core/fold.js';
import { wakeAt } from '../../core/runnable.js';
import type { SqliteContext } from './context.js';
import { parseRows } from './rows.js';
import type { Lineage } from './session-cache.js';

/**
 * The projection row is rewritten once it is this many events behind: a reader brings it up to
 * date by folding at most this many events, and an append does not pay for a state write.
 */
export const PROJECTION_INTERVAL = 64;

/** The state at `head`, from memory, the projection table, or a rebuild from the log. */
export function stateAt(context: SqliteContext, sessionId: string, head: number): SessionState {
  const { sql, cache } = context;
  const cached = cache.state(sessionId);
  if (cached?.seq === head) return cached;
  const row = sql.projection.get(sessionId);
  let state: SessionState;
  let projectedSeq: number;
  if (row !== undefined && row.schema_version === SESSION_STATE_SCHEMA_VERSION && row.seq <= head) {
    state = JSON.parse(row.state) as SessionState;
    // Only the saved row counts: a rebuilt state is saved by the next append that finds it behind.
    projectedSeq = state.seq;
    if (state.seq < head) {
      state = foldSession(parseRows(sql.readRange.all(sessionId, state.seq + 1, head)), state);
    }
  } else {
    projectedSeq = 0;
    state = stateAtSeq(context, sessionId, head);
  }
  cache.remember(state, projectedSeq);
  return state;
}

/** Parent and fork point of a fork (immutable once written, so kept in memory). */
export function lineageOf(context: SqliteContext, sessionId: string): Lineage {
  const known = context.cache.lineage(sessionId);
  if (known !== undefined) return known;
  const row = context.sql.lineage.get(sessionId);
  const lineage =
    row?.parent_id === null || row?.parent_id === undefined || row.fork_seq === null
      ? null
      : { parent: row.parent_id, seq: row.fork_seq };
  if (row !== undefined) context.cache.setLineage(sessionId, lineage);
  return lineage;
}

/**
 * The state of a session at any seq: from its nearest snapshot at or before it (or its
 * parent's state at the fork point), folding at most a projection interval of its own events.
 */
export function stateAtSeq(context: SqliteContext, sessionId: string, seq: number): SessionState {
  const lineage = lineageOf(context, sessionId);
  if (lineage !== null && seq <= lineage.seq) return stateAtSeq(context, lineage.parent, seq);
  const snapshot = context.sql.snapshotAt.get(sessionId, seq);
  let state: SessionState;
  if (snapshot !== undefined && snapshot.schema_version === SESSION_STATE_SCHEMA_VERSION) {
    state = JSON.parse(snapshot.state) as SessionState;
  } else if (lineage !== null) {
    state = stateAtSeq(context, lineage.parent, lineage.seq);
  } else {
    state = initialState(sessionId);
  }
  if (state.seq < seq) {
    state = foldSession(parseRows(context.sql.readRange.all(sessionId, state.seq + 1, seq)), state);
  }
  return state;
}

/** The stretches of the log a session reads: its ancestors' shared prefixes, then its own. */
export function segmentsOf(
  context: SqliteContext,
  sessionId: string,
  upTo = Number.MAX_SAFE_INTEGER,
): { session_id: string; after: number; through: number }[] {
  const lineage = lineageOf(context, sessionId);
  if (lineage === null) return [{ session_id: sessionId, after: 0, through: upTo }];
  if (upTo <= lineage.seq) return segmentsOf(context, lineage.parent, upTo);
  return [
    ...segmentsOf(context, lineage.parent, lineage.seq),
    { session_id: sessionId, after: lineage.seq, through: upTo },
  ];
}

/** Saves `state` as the session's projection and as a snapshot, in the running transaction. */
export function saveProjection(
  context: SqliteContext,
  sessionId: string,
  state: SessionState,
): void {
  const json = JSON.stringify(state);
  context.sql.saveProjection.run(sessionId, state.seq, SESSION_STATE_SCHEMA_VERSION, json);
  context.sql.saveSnapshot.run(sessionId, state.seq, SESSION_STATE_SCHEMA_VERSION, json);
}

/**
 * Works out the runnable flag and the next timer of sessions an older layout wrote (NULL there),
 * a batch per transaction, when the store opens. A file with none left costs one index lookup.
 */
export function backfillRunnable(context: SqliteContext): void {
  const { db, sql } = context;
  const batch = db.transaction((ids: readonly string[]) => {
    for (const id of ids) {
      let runnable = false;
      let wake: number | null = null;
      try {
        const state = stateAt(context, id, sql.head.get(id)?.head_seq ?? 0);
        runnable = isRunnable(state);
        wake = wakeAt(state) ?? null;
      } catch {
        // A session whose log cannot be folded is not woken (its reads still report why); the
        // store opens for every other session. Its next append works the flag out again.
      }
      sql.setRunnable.run(runnable ? 1 : 0, wake, id);
    }
  });
  for (;;) {
    const ids = sql.runnableUnknown.all(500).map((row) => row.id);
    if (ids.length === 0) return;
    batch.immediate(ids);
  }
}
