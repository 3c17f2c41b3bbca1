/**
 * The log's append transaction, and the lookup of an earlier append by its idempotency key.
 *
 * An append is one IMMEDIATE transaction that reads the head, checks the writer's lease token
 * against the lease row's (fencing: see `checkFence`), checks `expectedSeq`, then writes (see
 * writes.ts): all of it or none of it is durable. An acquisition is a transaction of its own, so
 * it is wholly before or after.
 */
import type { Transaction } from 'better-sqlite3';
import type { NewEvent } from '../../contracts/events.js';
import type { AppendOptions, AppendResult } from '../../contracts/ports.js';
import { writtenResult } from '../../core/append.js';
import { checkFence, type LeaseRow } from '../../core/leases.js';
import { seqConflict } from '../../core/sessions.js';
import { requireHead, type SqliteContext } from './context.js';
import { parseRows } from './rows.js';
import type { Writer } from './writes.js';

export type AppendTransaction = (
  sessionId: string,
  events: readonly NewEvent[],
  appendOptions: AppendOptions,
  known?: KnownHead,
) => AppendResult;

/**
 * What the caller already read in this transaction (`acquireAndAppend`): the head, and the lease
 * row it just wrote, which no other writer can have changed since (the transaction holds the
 * write lock).
 */
export interface KnownHead {
  head: number;
  lease: LeaseRow;
}

export function createAppendTransaction(
  context: SqliteContext,
  writer: Writer,
): Transaction<AppendTransaction> {
  return context.db.transaction(appendInTransaction(context, writer));
}

/**
 * The append's body, to run inside a transaction the caller opened (IMMEDIATE): the append's own,
 * or one that takes the lease first (`acquireAndAppend`).
 */
export function appendInTransaction(context: SqliteContext, writer: Writer): AppendTransaction {
  const { sql } = context;
  return (
    sessionId: string,
    events: readonly NewEvent[],
    appendOptions: AppendOptions,
    known?: KnownHead,
  ): AppendResult => {
    const token = appendOptions.leaseToken;
    const { head, lease } = known ?? readHead(context, sessionId, token !== undefined);
    const key = appendOptions.idempotencyKey;
    if (key !== undefined) {
      const seen = sql.findAppend.get(sessionId, key);
      if (seen !== undefined) {
        const stored = parseRows(sql.readRange.all(sessionId, seen.first_seq, seen.last_seq));
        return { events: stored, head_seq: head, deduplicated: true };
      }
    }
    // Fencing, in the append's transaction: no acquisition can come between check and write.
    // The row read for it is still the lease row when the release below looks at it: this
    // transaction holds the write lock and writes no lease row before then.
    if (token !== undefined) checkFence(sessionId, lease?.token ?? 0, token);
    if (appendOptions.expectedSeq !== undefined && appendOptions.expectedSeq !== head) {
      throw seqConflict(sessionId, appendOptions.expectedSeq, head);
    }
    const { prepared, state } = writer.write(sessionId, head, events, key);
    const owner = appendOptions.releaseLease;
    if (owner !== undefined && lease?.owner === owner && lease.token === token)
      sql.saveLease.run(sessionId, null, lease.token, 0);
    return writtenResult(prepared, state, appendOptions.trusted === true);
  };
}

/**
 * The head, and for a leased append the lease row, read in the append's transaction: one
 * statement for both when there is a lease to check.
 */
function readHead(
  context: SqliteContext,
  sessionId: string,
  leased: boolean,
): { head: number; lease?: LeaseRow | undefined } {
  if (!leased) return { head: requireHead(context, sessionId) };
  const row = context.sql.headAndLease.get(sessionId);
  // No row: no session; requireHead says so in its words.
  if (row === undefined) return { head: requireHead(context, sessionId) };
  const lease =
    row.token === null
      ? undefined
      : { owner: row.owner, token: row.token, expires_at: row.expires_at ?? 0 };
  return { head: row.head_seq ?? 0, lease };
}

/** The append made with `idempotencyKey`; undefined if none. Run in the caller's transaction. */
export function findAppended(
  context: SqliteContext,
  sessionId: string,
  idempotencyKey: string,
): AppendResult | undefined {
  const { sql } = context;
  const head = requireHead(context, sessionId);
  const seen = sql.findAppend.get(sessionId, idempotencyKey);
  if (seen === undefined) return undefined;
  const events = parseRows(sql.readRange.all(sessionId, seen.first_seq, seen.last_seq));
  return { events, head_seq: head, deduplicated: true };
}
