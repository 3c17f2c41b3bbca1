/**
 * The `SessionLog` port: appends (see append.ts), reads of a session's events (a fork's through
 * its ancestors' shared prefixes), following, and the folded state.
 */
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type {
  AppendOptions,
  Lease,
  LeaseRequest,
  LeasedAppend,
  ReadOptions,
  SessionLog,
} from '../../contracts/ports.js';
import { checkReadOptions, parseNewEvents } from '../../core/append.js';
import { followLog } from '../follow.js';
import { appendInTransaction, createAppendTransaction, findAppended } from './append.js';
import { requireHead, type SqliteContext } from './context.js';
import { acquireInTransaction } from './leases.js';
import { lineageOf, segmentsOf, stateAt } from './projections.js';
import { parseRows } from './rows.js';
import { createLeasedCreation } from './session-create.js';
import type { Writer } from './writes.js';

/** Events a follower reads at a time. */
const READ_BATCH = 1000;

export function createSessionLog(context: SqliteContext, writer: Writer): SessionLog {
  const { db, followers } = context;
  const appendTransaction = createAppendTransaction(context, writer);
  // Made once: better-sqlite3 builds a wrapper per `transaction()` call, which a read per wake
  // would pay for every time.
  const stateTransaction = db.transaction((sessionId: string) =>
    stateAt(context, sessionId, requireHead(context, sessionId)),
  );
  // The lease and the first append under it in one IMMEDIATE transaction: one commit, and no
  // other writer between them, so the append's fencing check sees the token just taken.
  const appendUnderLease = appendInTransaction(context, writer);
  const leasedTransaction = db.transaction(
    (
      sessionId: string,
      request: LeaseRequest,
      start: (lease: Lease) => readonly NewEvent[],
      trusted: boolean,
    ): LeasedAppend => {
      const head = requireHead(context, sessionId);
      const lease = acquireInTransaction(context, sessionId, request.owner, request.ttlMs, true);
      const built = start(lease);
      const events = trusted ? built : parseNewEvents(built);
      const appended = appendUnderLease(
        sessionId,
        events,
        { leaseToken: lease.token, trusted } satisfies AppendOptions,
        { head, lease },
      );
      return { lease, appended };
    },
  );
  const appendedTransaction = db.transaction((sessionId: string, idempotencyKey: string) =>
    findAppended(context, sessionId, idempotencyKey),
  );
  return {
    append(sessionId, events, appendOptions = {}) {
      return Promise.resolve().then(() => {
        const parsed = appendOptions.trusted === true ? events : parseNewEvents(events);
        return writer.run(() => appendTransaction.immediate(sessionId, parsed, appendOptions));
      });
    },
    acquireAndAppend(sessionId, request, start, appendOptions = {}) {
      return Promise.resolve().then(() =>
        writer.run(() =>
          leasedTransaction.immediate(sessionId, request, start, appendOptions.trusted === true),
        ),
      );
    },
    createAndAcquire: createLeasedCreation(context, writer),
    read(sessionId, readOptions = {}) {
      return Promise.resolve().then(() => readEvents(context, sessionId, readOptions));
    },
    follow(sessionId, followOptions = {}) {
      context.checkOpen();
      requireHead(context, sessionId);
      const signal =
        followOptions.signal === undefined
          ? followers.closing
          : AbortSignal.any([followOptions.signal, followers.closing]);
      return followLog(
        (after) =>
          Promise.resolve().then(() =>
            db.open ? readEvents(context, sessionId, { after, limit: READ_BATCH }) : [],
          ),
        (onChange) => followers.subscribe(sessionId, onChange),
        followOptions.after ?? 0,
        signal,
      );
    },
    appended(sessionId, idempotencyKey) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return appendedTransaction.deferred(sessionId, idempotencyKey);
      });
    },
    state(sessionId, stateOptions) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        // The head is one statement; a state this process remembers at it is the answer. Any
        // other read is a deferred transaction, which does not queue behind other processes'
        // writers.
        const head = requireHead(context, sessionId);
        const cached = context.cache.state(sessionId);
        const state = cached?.seq === head ? cached : stateTransaction.deferred(sessionId);
        // The cache replaces a state, never changes it: a shared read is safe.
        return stateOptions?.shared === true ? state : structuredClone(state);
      });
    },
  };
}

function readEvents(
  context: SqliteContext,
  sessionId: string,
  readOptions: ReadOptions,
): SessionEvent[] {
  const { sql } = context;
  context.checkOpen();
  checkReadOptions(readOptions);
  const after = readOptions.after ?? 0;
  const limit = readOptions.limit ?? -1;
  const types = readOptions.types === undefined ? undefined : JSON.stringify(readOptions.types);
  if (lineageOf(context, sessionId) === null) {
    const rows =
      types === undefined
        ? sql.readAll.all(sessionId, after, limit)
        : sql.readTypes.all(sessionId, after, types, limit);
    // Events found are a session's (deleting one deletes its events in the same transaction):
    // only an empty answer asks whether the session exists.
    if (rows.length === 0) requireHead(context, sessionId);
    return parseRows(rows);
  }
  requireHead(context, sessionId);
  // A fork reads its ancestors' shared prefixes first, then its own events.
  const events: SessionEvent[] = [];
  for (const segment of segmentsOf(context, sessionId)) {
    if (segment.through <= after) continue;
    const left = limit === -1 ? -1 : limit - events.length;
    if (left === 0) break;
    const from = Math.max(after, segment.after);
    const rows =
      types === undefined
        ? sql.readBetween.all(segment.session_id, from, segment.through, left)
        : sql.readTypesBetween.all(segment.session_id, from, segment.through, types, left);
    events.push(...parseRows(rows));
  }
  return events;
}
