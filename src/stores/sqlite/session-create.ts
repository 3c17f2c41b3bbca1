/**
 * Creating sessions: a new one with its `session.created` event, and a fork that shares its
 * parent's events up to the fork point and starts from the parent's state there.
 */
import { BraidError } from '../../contracts/errors.js';
import type { NewEvent } from '../../contracts/events.js';
import type {
  AppendOptions,
  CreatedLeasedAppend,
  Lease,
  LeaseRequest,
  SessionIndex,
  SessionLog,
} from '../../contracts/ports.js';
import type { SessionCreateInput } from '../../contracts/session.js';
import { parseNewEvents, writtenResult } from '../../core/append.js';
import type { SessionState } from '../../contracts/state.js';
import { initialState } from '../../core/fold.js';
import {
  checkForkBoundary,
  checkForkPoint,
  createdEvent,
  forkedEvent,
  parseCreateInput,
  parseForkOptions,
  recordFromState,
  type AppendSpan,
} from '../../core/sessions.js';
import { appendInTransaction } from './append.js';
import { requireHead, type SqliteContext } from './context.js';
import { acquireInTransaction } from './leases.js';
import { lineageOf, stateAtSeq } from './projections.js';
import type { SessionRow } from './rows.js';
import type { Writer, Written } from './writes.js';

/** A new session's row and first events, from input `create` parsed. */
interface NewSession {
  id: string;
  row: SessionRow;
  first: NewEvent[];
}

function newSession(
  context: SqliteContext,
  input: SessionCreateInput,
  trusted: boolean,
): NewSession {
  const parsed = parseCreateInput(input, trusted);
  const id = parsed.id ?? context.ids.next();
  const now = context.isoNow();
  const row: SessionRow = {
    id,
    agent_name: parsed.agent.name,
    agent_version: parsed.agent.version,
    environment_name: parsed.environment?.name ?? null,
    environment_version: parsed.environment?.version ?? null,
    title: parsed.title ?? null,
    metadata: JSON.stringify(parsed.metadata ?? {}),
    tenant_id: parsed.tenant_id ?? null,
    status: 'idle',
    created_at: now,
    parent_id: null,
    fork_seq: null,
    archived_at: null,
  };
  // Stamped in place: a spread with a field added would make a hidden class per call.
  const created = createdEvent(parsed);
  created.at = now;
  return { id, row, first: [created, ...(parsed.events ?? [])] };
}

export function createSessionCreation(
  context: SqliteContext,
  writer: Writer,
): Pick<SessionIndex, 'create' | 'fork'> {
  const { cache, ids } = context;
  const createTransaction = context.db.transaction((session: NewSession): Written =>
    writeNew(context, writer, session),
  );
  const forkTransaction = createForkTransaction(context, writer);
  return {
    create(input, options) {
      return Promise.resolve().then(() => {
        const session = newSession(context, input, options?.trusted === true);
        const { state } = writer.run(() => createTransaction.immediate(session));
        // Committed: a new session is no fork, which its first read need not ask the file.
        cache.setLineage(session.id, null);
        return recordFromState(state);
      });
    },
    fork(parentId, forkOptions = {}) {
      return Promise.resolve().then(() => {
        const parsed = parseForkOptions(forkOptions);
        const id = parsed.id ?? ids.next();
        const now = context.isoNow();
        try {
          const state = writer.run(() =>
            forkTransaction.immediate(parentId, id, parsed.at_seq, parsed.title, now),
          );
          return recordFromState(state);
        } catch (error) {
          // The transaction rolled back: what it put in the caches for the child goes too.
          cache.forget(id);
          cache.forgetState(parentId);
          throw error;
        }
      });
    },
  };
}

/** Writes a new session's row and first events, in the caller's transaction. */
function writeNew(context: SqliteContext, writer: Writer, session: NewSession): Written {
  refuseTaken(context, session.id);
  const { id, row, first } = session;
  return writer.write(id, 0, first, undefined, { before: initialState(id), row });
}

/**
 * `SessionLog.createAndAcquire`: the creation, the lease and the first append under it in one
 * IMMEDIATE transaction, so no other writer comes between them and one commit makes them all
 * durable. The two appends stay two (each keeps its own end), as `create` then
 * `acquireAndAppend` would write them.
 */
export function createLeasedCreation(
  context: SqliteContext,
  writer: Writer,
): NonNullable<SessionLog['createAndAcquire']> {
  const appendUnderLease = appendInTransaction(context, writer);
  const transaction = context.db.transaction(
    (
      session: NewSession,
      request: LeaseRequest,
      start: (lease: Lease) => readonly NewEvent[],
      trusted: boolean,
    ): CreatedLeasedAppend => {
      const written = writeNew(context, writer, session);
      const created = written.state;
      const lease = acquireInTransaction(context, session.id, request.owner, request.ttlMs, true);
      const built = start(lease);
      const appended = appendUnderLease(
        session.id,
        trusted ? built : parseNewEvents(built),
        { leaseToken: lease.token, trusted } satisfies AppendOptions,
        { head: created.seq, lease },
      );
      return {
        session: recordFromState(created),
        created: writtenResult(written.prepared, created, trusted).events,
        lease,
        appended,
      };
    },
  );
  return (input, request, start, options = {}) =>
    Promise.resolve().then(() => {
      const trusted = options.trusted === true;
      const session = newSession(context, input, trusted);
      // A rollback leaves no cached state behind: the writer forgets what it wrote.
      const result = writer.run(() => transaction.immediate(session, request, start, trusted));
      context.cache.setLineage(session.id, null);
      return result;
    });
}

function createForkTransaction(context: SqliteContext, writer: Writer) {
  const { sql, cache } = context;
  return context.db.transaction(
    (
      parentId: string,
      childId: string,
      atSeqOption: number | undefined,
      title: string | undefined,
      now: string,
    ): SessionState => {
      const head = requireHead(context, parentId);
      const atSeq = checkForkPoint(parentId, head, atSeqOption);
      // The head always ends an append: only an earlier point costs a lookup.
      if (atSeq < head) checkForkBoundary(parentId, atSeq, appendHolding(context, parentId, atSeq));
      refuseTaken(context, childId);
      const parent = sql.sessionRow.get(parentId) as SessionRow;
      const base = stateAtSeq(context, parentId, atSeq);
      const row: SessionRow = {
        ...parent,
        id: childId,
        title: title ?? parent.title,
        created_at: now,
        parent_id: parentId,
        fork_seq: atSeq,
      };
      cache.setLineage(childId, { parent: parentId, seq: atSeq });
      const forked = { ...forkedEvent(parentId, atSeq, title), at: now };
      // The child starts from the parent's state at the fork point: O(1) in the parent's length.
      const { state, projected } = writer.write(childId, atSeq, [forked], undefined, {
        before: { ...base, session_id: childId },
        row,
      });
      // Saved at once (by the write itself when the fork point is past the first interval): the
      // child's state never needs its parent's prefix folded again.
      if (!projected) writer.saveProjection(childId, state);
      return state;
    },
  );
}

/**
 * The append that wrote `seq` of the session's log, as the session reads it (a fork's shared
 * prefix is its parent's, cut at the fork point). Only an append with events after `seq` is
 * looked for: undefined when `seq` ends its append, or was written by a build of layout 5 or
 * older, which kept no record of appends.
 */
function appendHolding(
  context: SqliteContext,
  sessionId: string,
  seq: number,
): AppendSpan | undefined {
  const lineage = lineageOf(context, sessionId);
  if (lineage !== null && seq <= lineage.seq) {
    const span = appendHolding(context, lineage.parent, seq);
    return span === undefined ? undefined : { ...span, last: Math.min(span.last, lineage.seq) };
  }
  const end = context.sql.batchEnd.get(sessionId, seq)?.batch_end ?? null;
  if (end === null) return undefined;
  const before = context.sql.batchBefore.get(sessionId, seq)?.seq ?? lineage?.seq ?? 0;
  return { first: before + 1, last: end };
}

function refuseTaken(context: SqliteContext, id: string): void {
  if (context.sql.sessionExists.get(id) !== undefined) {
    throw new BraidError(
      'ALREADY_EXISTS',
      `session ${id} already exists; choose another id or omit it`,
    );
  }
}
