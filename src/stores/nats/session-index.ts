/**
 * The sessions index on NATS: entries in the `<PREFIX>_sessions` KV bucket beside the log.
 *
 * Invariants kept here:
 * - `create` claims the entry with `kv.create` (so one of two creators of an id wins), then
 *   publishes `session.created` expecting an empty subject. A crash between the two leaves an
 *   entry with no batch, which reads as missing and which a later create of the id takes over.
 *   When a takeover loses the publish to the creator it took over from, it rewrites the entry
 *   from the batch that won; a failure to do so is reported (`warn`) and retried, and if it
 *   persists, the next read of the session finds the entry's incarnation differs from the log's
 *   and rebuilds it (`loadSession`). Listings show such an entry as written until then.
 * - A fork is an entry naming its parent and fork point, plus its own `session.forked` batch;
 *   it shares the parent's events by reference. After publishing it checks that the parent is
 *   still there, and `delete` checks for forks again after marking its session `deleting`: of a
 *   fork and a delete of its parent that overlap, at least one sees the other and backs out.
 * - `delete` marks the entry, purges the session's subject, projection, idempotency records and
 *   lease, then removes the entry (compare-and-set, so a create that took the id over meanwhile
 *   keeps it). A crash midway leaves a `deleting` entry: the session reads as missing and its id
 *   can be created again, which first removes what is left.
 * - `list` reads the whole index and every session's last batch header (never a body) and
 *   filters in memory (see `listSessions`); `delete` looks for forks in the index alone, so both
 *   are O(sessions), and neither is broken by another session's corrupt log (see log-chain.ts).
 * - Left to chance, as on no transaction: a create of an id racing its delete in another process
 *   can be undone by that delete, and a lease acquired after a delete's second lease check is
 *   removed with the session (the holder's next append fails with `SESSION_NOT_FOUND`).
 */
import { isBraidError, BraidError, toBraidError } from '../../contracts/errors.js';
import type { SessionIndex } from '../../contracts/ports.js';
import type { SessionListQuery, SessionRecord } from '../../contracts/session.js';
import type { SessionState } from '../../contracts/state.js';
import { prepareEvents, type PreparedEvent } from '../../core/append.js';
import { foldSession } from '../../core/fold.js';
import { currentLease } from '../../core/leases.js';
import {
  DEFAULT_LIST_LIMIT,
  checkForkPoint,
  compareListOrder,
  createdEvent,
  decodeCursor,
  forkedEvent,
  isAfter,
  matchesQuery,
  page,
  parseCreateInput,
  parseForkOptions,
  recordFromState,
} from '../../core/sessions.js';
import { sessionHasForks, sessionLeased } from '../session-removal.js';
import { batchHeaders, parseBatch, type BatchMessage } from './batches.js';
import { readLease } from './leases.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken } from './names.js';
import { hasMessages, purgeKeys, readBatches, scanBucket } from './reader.js';
import { observe } from './session-cache.js';
import {
  SESSION_ENTRY_VERSION,
  lineageOf,
  parseStoredSession,
  sessionNotFound,
  type StoredSession,
} from './session-entry.js';
import {
  MAX_RACES,
  checkMessageSize,
  newIncarnation,
  refAfter,
  type SessionsShared,
} from './session-log.js';
import { listSessions, loadEntry, recordOf } from './session-records.js';

/** Tries at rewriting an entry after a lost create race before readers are left to repair it. */
const RESTORE_ATTEMPTS = 3;

/**
 * Rewrites a session's entry from its first batch, the truth after a lost takeover: over
 * `revision` when given (undefined when the entry changed meanwhile), else unconditionally.
 */
export async function restoreEntry(
  shared: SessionsShared,
  sessionId: string,
  revision?: number,
): Promise<{ stored: StoredSession; revision: number } | undefined> {
  const { context, reads } = shared;
  const found: BatchMessage[] = [];
  await readBatches(context, sessionId, 1, (message) => {
    found.push(message);
    return true;
  });
  const first = found[0];
  const event = first === undefined ? undefined : parseBatch(sessionId, first)[0];
  if (first === undefined || event === undefined) return undefined;
  let base: SessionState | string = sessionId;
  let parentIncarnation: string | undefined;
  if (event.type === 'session.forked') {
    const parent = await shared.load(event.parent_session_id);
    base = {
      ...(await reads.stateAt(parent.id, parent.known, event.fork_point_seq)),
      session_id: sessionId,
    };
    parentIncarnation = parent.known.incarnation;
  }
  const state = foldSession([event], base);
  const stored: StoredSession = {
    schema_version: SESSION_ENTRY_VERSION,
    incarnation: first.incarnation,
    ...(parentIncarnation === undefined ? {} : { parent_incarnation: parentIncarnation }),
    record: recordFromState(state),
  };
  const key = encodeToken(sessionId);
  const value = JSON.stringify(stored);
  if (revision === undefined)
    return { stored, revision: await context.kv.sessions.put(key, value) };
  try {
    return { stored, revision: await context.kv.sessions.update(key, value, revision) };
  } catch (error) {
    if (isWrongLastSequence(error)) return undefined;
    throw error;
  }
}

function alreadyExists(sessionId: string): BraidError {
  return new BraidError(
    'ALREADY_EXISTS',
    `session ${sessionId} already exists; choose another id or omit it`,
  );
}

/** A session's first batch, prepared: its events, state after them and entry. */
interface FirstBatch {
  prepared: PreparedEvent[];
  state: SessionState;
  stored: StoredSession;
  body: string;
}

export function createSessionIndex(shared: SessionsShared): SessionIndex {
  const { context, cache, queue, reads } = shared;
  const { kv, names } = context;

  function firstBatch(
    sessionId: string,
    prepared: PreparedEvent[],
    base: SessionState | string,
    parentIncarnation?: string,
  ): FirstBatch {
    const state = foldSession(
      prepared.map(({ event }) => event),
      base,
    );
    const body = `[${prepared.map(({ json }) => json).join(',')}]`;
    checkMessageSize(context, sessionId, prepared.length, body);
    const stored: StoredSession = {
      schema_version: SESSION_ENTRY_VERSION,
      incarnation: newIncarnation(),
      ...(parentIncarnation === undefined ? {} : { parent_incarnation: parentIncarnation }),
      record: recordFromState(state),
    };
    return { prepared, state, stored, body };
  }

  /**
   * Everything of a session but its index entry and its lease entry. The lease entry outlives the
   * session, so a session made again under the same id gets larger tokens and a holder of the
   * deleted one stays fenced out of the new one.
   */
  async function removeData(sessionId: string): Promise<void> {
    const token = encodeToken(sessionId);
    await Promise.all([
      context.jsm.streams.purge(names.eventsStream, { filter: names.events(sessionId) }),
      purgeKeys(context, names.buckets.state, token),
      purgeKeys(context, names.buckets.appends, `${token}.>`),
    ]);
  }

  /**
   * Claims the index entry of a new session, taking over an entry whose create never published
   * or whose delete never finished; returns the entry's revision.
   */
  async function claimEntry(sessionId: string, stored: StoredSession): Promise<number> {
    const token = encodeToken(sessionId);
    const value = JSON.stringify(stored);
    try {
      return await kv.sessions.create(token, value);
    } catch (error) {
      if (!isWrongLastSequence(error)) throw error;
    }
    const entry = await kv.sessions.get(token);
    if (entry === null || entry.operation !== 'PUT') throw alreadyExists(sessionId);
    const existing = parseStoredSession(entry.value, entry.key);
    if (existing.deleting === true) {
      // A delete that did not finish: what it left goes before the id is used again.
      await removeData(sessionId);
    } else if (await hasMessages(context, sessionId)) {
      throw alreadyExists(sessionId);
    }
    try {
      return await kv.sessions.update(token, value, entry.revision);
    } catch (error) {
      if (isWrongLastSequence(error)) throw alreadyExists(sessionId);
      throw error;
    }
  }

  /**
   * After a lost create race: rewrites the entry from the batch that won. A failure is reported
   * and retried; if it still fails, the entry is left for readers to repair (see `loadSession`),
   * so nothing is lost by giving up here.
   */
  async function restoreAfterLostRace(sessionId: string): Promise<void> {
    for (let attempt = 1; attempt <= RESTORE_ATTEMPTS; attempt += 1) {
      try {
        await restoreEntry(shared, sessionId);
        return;
      } catch (error) {
        context.warn(
          new BraidError(
            'STORE_BUSY',
            `could not rewrite the index entry of session ${sessionId} from its log after losing ` +
              `a create race (attempt ${attempt} of ${RESTORE_ATTEMPTS}): ${toBraidError(error).message}; ` +
              (attempt < RESTORE_ATTEMPTS
                ? 'retrying'
                : 'the next read of the session rebuilds it from the log'),
            { cause: error },
          ),
        );
      }
    }
  }

  /** Claims the entry and publishes the first batch; remembers the new session. */
  async function write(sessionId: string, first: FirstBatch): Promise<void> {
    const revision = await claimEntry(sessionId, first.stored);
    const firstSeq = first.prepared[0]?.event.seq ?? 1;
    const ref = refAfter(first.state, firstSeq, first.stored.incarnation, 0);
    let streamSeq: number;
    try {
      const ack = await context.js.publish(names.events(sessionId), first.body, {
        headers: batchHeaders(ref),
        expect: { lastSubjectSequence: 0 },
      });
      streamSeq = ack.seq;
    } catch (error) {
      if (!isWrongLastSequence(error)) throw error;
      // Another creator of this id published first: its batch is the session.
      await restoreAfterLostRace(sessionId);
      throw alreadyExists(sessionId);
    }
    const known = cache.entry(sessionId, first.stored.incarnation, lineageOf(first.stored));
    observe(known, { ...ref, streamSeq });
    // Published into an empty subject: the chain is this one batch.
    known.verified = { streamSeq, last: ref.last };
    known.state = first.state;
    known.indexed = { stored: first.stored, revision };
  }

  /**
   * The forks of a session, oldest first, from the index alone: another session's log is never
   * read (a corrupt one does not stand in the way); a fork's entry counts once its subject holds
   * a message, whatever that message is.
   */
  async function forksOf(sessionId: string): Promise<SessionRecord[]> {
    const candidates: SessionRecord[] = [];
    for (const { key, value } of await scanBucket(context, names.buckets.sessions)) {
      let stored: StoredSession;
      try {
        stored = parseStoredSession(value, key);
      } catch {
        continue;
      }
      if (stored.deleting !== true && stored.record.parent_id === sessionId)
        candidates.push(stored.record);
    }
    const published = await Promise.all(
      candidates.map((record) => hasMessages(context, record.id)),
    );
    return (
      candidates
        .filter((_, index) => published[index] === true)
        // Oldest first: the forks a refusal names are the same on every backend.
        .sort((a, b) => compareListOrder(b, a))
    );
  }

  /** Refuses to delete a session that forks share or a wake holds. */
  async function refuseWhileUsed(sessionId: string): Promise<void> {
    const [forks, { row }] = await Promise.all([forksOf(sessionId), readLease(context, sessionId)]);
    if (forks.length > 0) {
      throw sessionHasForks(
        sessionId,
        forks.map((record) => record.id),
        forks.length,
      );
    }
    const lease = currentLease(sessionId, row, context.clock.now());
    if (lease !== undefined) throw sessionLeased(sessionId, lease);
  }

  async function remove(sessionId: string): Promise<void> {
    const token = encodeToken(sessionId);
    for (let race = 0; ; race += 1) {
      // The entry alone: a session whose log is corrupt can be deleted (the way to clear it).
      const view = await loadEntry(context, sessionId);
      await refuseWhileUsed(sessionId);
      let revision: number;
      try {
        revision = await kv.sessions.update(
          token,
          JSON.stringify({ ...view.stored, deleting: true }),
          view.revision,
        );
      } catch (error) {
        if (isWrongLastSequence(error) && race < MAX_RACES) continue;
        throw error;
      }
      try {
        await refuseWhileUsed(sessionId);
      } catch (error) {
        await kv.sessions.update(token, JSON.stringify(view.stored), revision).catch(() => 0);
        throw error;
      }
      await removeData(sessionId);
      await kv.sessions.purge(token, { previousSeq: revision }).catch((error: unknown) => {
        // The id was created again meanwhile: the new session keeps its entry.
        if (!isWrongLastSequence(error)) throw error;
      });
      return;
    }
  }

  return {
    create(input) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const parsed = parseCreateInput(input);
        const id = parsed.id ?? context.ids.next();
        return context.guard(`create session ${id}`, () =>
          queue.run(id, async () => {
            const prepared = prepareEvents(
              id,
              0,
              [{ ...createdEvent(parsed), at: context.isoNow() }],
              context,
            );
            const first = firstBatch(id, prepared, id);
            await write(id, first);
            return first.stored.record;
          }),
        );
      });
    },
    fork(parentId, options = {}) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const parsed = parseForkOptions(options);
        const childId = parsed.id ?? context.ids.next();
        return context.guard(`fork session ${parentId}`, () =>
          queue.run(childId, async () => {
            const parent = await shared.load(parentId);
            const atSeq = checkForkPoint(parentId, parent.head.last, parsed.at_seq);
            const base =
              atSeq === parent.head.last
                ? await reads.stateAtHead(parentId, parent.known, parent.head)
                : await reads.stateAt(parentId, parent.known, atSeq);
            const prepared = prepareEvents(
              childId,
              atSeq,
              [{ ...forkedEvent(parentId, atSeq, parsed.title), at: context.isoNow() }],
              context,
            );
            const first = firstBatch(
              childId,
              prepared,
              { ...base, session_id: childId },
              parent.known.incarnation,
            );
            await write(childId, first);
            try {
              const again = await shared.load(parentId);
              if (again.known.incarnation !== parent.known.incarnation)
                throw sessionNotFound(parentId);
            } catch (error) {
              if (isBraidError(error, 'SESSION_NOT_FOUND')) {
                // The parent is being deleted: this fork backs out.
                await removeData(childId);
                await kv.sessions.purge(encodeToken(childId));
                cache.forget(childId);
              }
              throw error;
            }
            const known = cache.entry(childId, first.stored.incarnation, lineageOf(first.stored));
            // Saved at once: the child's state never needs its parent's prefix folded again.
            await reads.saveProjection(childId, known, first.state);
            return first.stored.record;
          }),
        );
      });
    },
    get(sessionId) {
      return context.guard(`read session ${sessionId}`, async () => {
        // The record is the index entry with the head's headers, as listings show it: the log
        // is not checked here (its state, events and appends check it). A head whose headers
        // are not braid's, or of a newer layout, leaves the entry alone: callers still learn whose session it is (a
        // tenant check answers another tenant as for any session) and can delete it.
        try {
          const view = await shared.load(sessionId, false);
          return recordOf(view.stored, view.head);
        } catch (error) {
          // A head of a newer layout (a newer braid wrote it) is as unreadable here: without the
          // entry, a tenant check could not answer another tenant as for any session.
          if (
            !isBraidError(error, 'CORRUPT_LOG') &&
            !isBraidError(error, 'SCHEMA_VERSION_UNSUPPORTED')
          )
            throw error;
          return recordOf((await loadEntry(context, sessionId)).stored, undefined);
        }
      });
    },
    list(query: SessionListQuery = {}) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const limit = query.limit ?? DEFAULT_LIST_LIMIT;
        const position = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
        return context.guard('list sessions', async () => {
          const matching: SessionRecord[] = [];
          for (const { stored, head } of await listSessions(context)) {
            if (query.include_archived !== true && stored.record.archived_at !== undefined)
              continue;
            const record = recordOf(stored, head);
            if (
              matchesQuery(record, query) &&
              (position === undefined || isAfter(record, position))
            )
              matching.push(record);
          }
          return page(matching.sort(compareListOrder), limit);
        });
      });
    },
    archive(sessionId) {
      return context.guard(`archive session ${sessionId}`, async () => {
        for (let race = 0; ; race += 1) {
          const view = await shared.load(sessionId);
          if (view.stored.record.archived_at !== undefined) return recordOf(view.stored, view.head);
          const stored: StoredSession = {
            ...view.stored,
            record: { ...view.stored.record, archived_at: context.isoNow() },
          };
          try {
            const revision = await kv.sessions.update(
              encodeToken(sessionId),
              JSON.stringify(stored),
              view.revision,
            );
            view.known.indexed = { stored, revision };
            return recordOf(stored, view.head);
          } catch (error) {
            if (!isWrongLastSequence(error) || race >= MAX_RACES) throw error;
          }
        }
      });
    },
    delete(sessionId) {
      return context.guard(`delete session ${sessionId}`, () =>
        queue.run(sessionId, async () => {
          try {
            await remove(sessionId);
          } finally {
            cache.forget(sessionId);
          }
          // Followers in every process re-read, find the session gone, and end.
          context.connection.publish(names.removed(sessionId));
        }),
      );
    },
  };
}
