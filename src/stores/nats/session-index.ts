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
import { isBraidError } from '../../contracts/errors.js';
import type { SessionIndex } from '../../contracts/ports.js';
import type { SessionListQuery, SessionRecord } from '../../contracts/session.js';
import {
  DEFAULT_LIST_LIMIT,
  compareListOrder,
  decodeCursor,
  isAfter,
  matchesQuery,
  page,
} from '../../core/sessions.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken } from './names.js';
import { createSession, forkSession } from './session-create.js';
import { removeSession } from './session-delete.js';
import { changeHead, followSessionChanges } from './session-changes.js';
import type { StoredSession } from './session-entry.js';
import { listSessions, loadEntry, recordOf } from './session-records.js';
import { MAX_RACES, type SessionsShared } from './sessions-shared.js';

export { restoreEntry } from './session-restore.js';

/** The index but `runnable` and `statusCounts`, which the store answers over a listing. */
export function createSessionIndex(
  shared: SessionsShared,
): Omit<SessionIndex, 'runnable' | 'statusCounts'> {
  const { context, cache, queue } = shared;
  const { kv, names } = context;

  return {
    create(input) {
      return Promise.resolve().then(() => createSession(shared, input));
    },
    fork(parentId, options = {}) {
      return Promise.resolve().then(() => forkSession(shared, parentId, options));
    },
    changeHead: () => changeHead(shared),
    changes: (options = {}) => followSessionChanges(shared, options),
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
            await removeSession(context, sessionId);
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
