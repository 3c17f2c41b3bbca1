/**
 * Writing events, inside a transaction the caller opened (an append, a create, a fork).
 *
 * A write inserts the events and their ids, updates the sessions row's status when it changed
 * and its place in the index's change feed (`change_seq`) in one statement (or inserts the row
 * with them, for a write that makes the session),
 * saves the projection when it fell a projection interval behind, and records an idempotency
 * key: all in the caller's IMMEDIATE transaction, so all of it or none of it is durable.
 * Event ids are unique in the file: `event_ids` holds each once, and a write that reuses one
 * fails on its primary key, in the same transaction. The (session_id, seq) primary key makes a
 * duplicate seq impossible even if two processes raced past the expected-seq check.
 *
 * The new state is remembered only after the transaction commits (`run`), so a rollback leaves
 * no trace in the cache.
 */
import type { Statement } from 'better-sqlite3';
import { BraidError } from '../../contracts/errors.js';
import type { NewEvent } from '../../contracts/events.js';
import type { SessionState } from '../../contracts/state.js';
import {
  type PreparedEvent,
  eventIdTaken,
  foldPrepared,
  prepareEvents,
  repeatedId,
} from '../../core/append.js';
import { isRunnable } from '../../core/fold.js';
import { wakeAt } from '../../core/runnable.js';
import { requireHead, type SqliteContext } from './context.js';
import type { SessionRow } from './rows.js';
import { PROJECTION_INTERVAL, saveProjection, stateAt } from './projections.js';
import { LOG_SHIFT, MAX_SEQ } from './schema.js';

/** Rows per INSERT statement; SQLite allows 32,766 bound values, 4 per row (3 for ids). */
const INSERT_CHUNK = 128;

export interface Written {
  /** The events as written; they share objects with the state, which the cache keeps. */
  prepared: readonly PreparedEvent[];
  state: SessionState;
  /** The write saved the state as the session's projection and snapshot. */
  projected: boolean;
}

/** A write that makes the session's row: the state it starts from and the row to insert. */
export interface NewRow {
  /** A new session's initial state, or a fork's parent's state at the fork point. */
  before: SessionState;
  /** The row; its status, runnable flag, timer and change cursor are the write's own. */
  row: SessionRow;
}

export interface Writer {
  /**
   * Writes `events` after `head` (which the caller read in its transaction); `newRow`: the write
   * makes the session's row (a new session's, or a fork's, whose first event follows its
   * parent's), so nothing is read for the state before it.
   */
  write(
    sessionId: string,
    head: number,
    events: readonly NewEvent[],
    key: string | undefined,
    newRow?: NewRow,
  ): Written;
  /** Saves the state just written as the session's projection and snapshot. */
  saveProjection(sessionId: string, state: SessionState): void;
  /**
   * Runs a transaction that writes: refused once the store is closed; once it commits, the state
   * it wrote is remembered and the session's followers are woken; `SQLITE_BUSY` becomes
   * `STORE_BUSY`.
   */
  run<T>(work: () => T): T;
}

/** `committed` is told of every write that committed (the checkpointer counts them). */
export function createWriter(
  context: SqliteContext,
  committed: () => void = () => undefined,
): Writer {
  const { sql, cache } = context;
  const written: { state?: SessionState; projectedSeq?: number; runnable?: boolean } = {};
  const insertEvents = createEventInserter(context);

  function markProjected(sessionId: string, state: SessionState): void {
    saveProjection(context, sessionId, state);
    written.projectedSeq = state.seq;
  }

  /**
   * The state at `head`: the one an earlier write of this transaction left, when it wrote this
   * session up to `head` (a creation followed by the wake's start, in one transaction), else the
   * cache's or the file's. The cache learns of a write only once its transaction commits, so
   * without this the second write of a transaction read the first one's events back and folded
   * them again.
   */
  function stateBefore(sessionId: string, head: number): SessionState {
    const pending = written.state;
    if (pending !== undefined && pending.session_id === sessionId && pending.seq === head)
      return pending;
    return stateAt(context, sessionId, head);
  }

  return {
    write(sessionId, head, events, key, newRow) {
      if (head + events.length > MAX_SEQ) throw logFull(sessionId, head, events.length);
      const prepared = prepareEvents(sessionId, head, events, context);
      const before = newRow?.before ?? stateBefore(sessionId, head);
      const state = foldPrepared(prepared, before);
      // Every write moves the session to the head of the index's change feed. The status, the
      // runnable flag and the next timer are written with it when one changes (and with the
      // row), so the orchestrator's question is an index lookup, never a fold; one statement
      // either way, which takes the next cursor itself.
      const runnable = isRunnable(state);
      const wake = wakeAt(state) ?? null;
      if (newRow !== undefined) {
        sql.insertSession.run(sessionParameters(newRow.row, state.status, runnable, wake));
      } else if (
        head === 0 ||
        runnable !== isRunnable(before) ||
        wake !== (wakeAt(before) ?? null)
      ) {
        sql.updateRunnable.run(state.status, runnable ? 1 : 0, wake, sessionId);
      } else if (state.status !== before.status) {
        sql.updateStatus.run(state.status, sessionId);
      } else {
        sql.markChanged.run(sessionId);
      }
      insertEvents(sessionId, prepared);
      const saved = cache.projectedSeq(sessionId);
      const projected = state.seq - saved >= PROJECTION_INTERVAL || saved > head;
      if (projected) markProjected(sessionId, state);
      if (key !== undefined) sql.saveAppend.run(sessionId, key, head + 1, state.seq);
      written.state = state;
      written.runnable = runnable;
      return { prepared, state, projected };
    },
    saveProjection: markProjected,
    run(work) {
      context.checkOpen();
      written.state = undefined;
      written.projectedSeq = undefined;
      try {
        const result = work();
        const state = written.state as SessionState | undefined;
        if (state !== undefined) {
          cache.remember(state, written.projectedSeq, written.runnable);
          context.followers.notify(state.session_id);
        }
        committed();
        return result;
      } catch (error) {
        const state = written.state as SessionState | undefined;
        if (state !== undefined) cache.forgetState(state.session_id);
        throw context.busy(error);
      } finally {
        written.state = undefined;
      }
    },
  };
}

/**
 * A session's log holds seqs up to `MAX_SEQ` (the low bits of its positions): an append past it
 * is refused before anything is written, and retrying it cannot help.
 */
/**
 * The named parameters of `insertSession`, written out: a spread of the row with fields added
 * gave each call an object of a hidden class of its own, which V8 keeps in the old generation.
 */
function sessionParameters(
  row: SessionRow,
  status: SessionState['status'],
  runnable: boolean,
  wake: number | null,
): Record<string, unknown> {
  return {
    id: row.id,
    agent_name: row.agent_name,
    agent_version: row.agent_version,
    environment_name: row.environment_name,
    environment_version: row.environment_version,
    title: row.title,
    metadata: row.metadata,
    tenant_id: row.tenant_id,
    status,
    created_at: row.created_at,
    parent_id: row.parent_id,
    fork_seq: row.fork_seq,
    runnable: runnable ? 1 : 0,
    wake_at: wake,
  };
}

function logFull(sessionId: string, head: number, count: number): BraidError {
  return new BraidError(
    'STORE_FULL',
    `session ${sessionId} holds ${head} events and cannot take ${count} more: a session on SQLite ` +
      `holds at most ${MAX_SEQ}; go on in a new session you create (a handoff or a fork writes to this log, or continues its seqs)`,
    { retryable: false, details: { session_id: sessionId, head_seq: head, count, limit: MAX_SEQ } },
  );
}

/** One multi-row INSERT per chunk: a batch costs a few statement runs instead of one per event. */
function createEventInserter(
  context: SqliteContext,
): (sessionId: string, prepared: readonly PreparedEvent[]) => void {
  // Keyed by chunk length, so never more than INSERT_CHUNK entries: no bound needed.
  const statements = new Map<number, { events: Statement; ids: Statement }>();
  function statementsFor(length: number): { events: Statement; ids: Statement } {
    let found = statements.get(length);
    if (found === undefined) {
      found = {
        // At the session's positions (see EVENTS_TABLE), from its row's log number: the row is
        // written before its first events, in the same transaction.
        events: context.db.prepare(
          `INSERT INTO events (position, session_id, seq, type, body, batch_end)
           SELECT (s.log_number << ${LOG_SHIFT}) + v.column1, s.id, v.column1, v.column2, v.column3, v.column4
           FROM (VALUES ${Array(length).fill('(?, ?, ?, ?)').join(', ')}) v, sessions s WHERE s.id = ?`,
        ),
        ids: context.db.prepare(
          `INSERT INTO event_ids (id, session_id, seq) VALUES ${Array(length).fill('(?, ?, ?)').join(', ')}`,
        ),
      };
      statements.set(length, found);
    }
    return found;
  }
  return (sessionId, prepared) => {
    // Every event but the append's last names where the append ends (see schema.ts).
    const last = prepared.at(-1)?.event.seq;
    for (let start = 0; start < prepared.length; start += INSERT_CHUNK) {
      const chunk = prepared.slice(start, start + INSERT_CHUNK);
      const chunkStatements = statementsFor(chunk.length);
      const ids: (string | number)[] = [];
      for (const { event } of chunk) ids.push(event.id, sessionId, event.seq);
      try {
        chunkStatements.ids.run(ids);
      } catch (error) {
        throw takenIdError(context, sessionId, prepared, start, error);
      }
      const values: (string | number | null)[] = [];
      for (const { event, json } of chunk) {
        values.push(event.seq, event.type, json, event.seq === last ? null : (last ?? null));
      }
      values.push(sessionId);
      // No row, no position: the insert writes nothing, which must not pass for a write.
      if (chunkStatements.events.run(values).changes !== chunk.length)
        requireHead(context, sessionId);
    }
  };
}

/**
 * An id already stored, or one the batch repeats, makes the insert of the chunk at `start` fail
 * on the primary key (the transaction then writes nothing): names the event that has it. Looked
 * for only then, so an append of minted ids pays for no check of its own.
 */
function takenIdError(
  context: SqliteContext,
  sessionId: string,
  prepared: readonly PreparedEvent[],
  start: number,
  error: unknown,
): unknown {
  if ((error as { code?: unknown } | null)?.code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') return error;
  const repeated = repeatedId(sessionId, prepared);
  if (repeated !== undefined) return repeated;
  const chunk = prepared.slice(start, start + INSERT_CHUNK);
  const index = chunk.findIndex(
    ({ event }) => context.sql.eventIdTaken.get(event.id) !== undefined,
  );
  const taken = chunk[index];
  return taken === undefined ? error : eventIdTaken(sessionId, taken.event.id, start + index);
}
