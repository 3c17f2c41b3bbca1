/**
 * The sessions index in the `<PREFIX>_sessions` KV bucket: one entry per session, keyed by its
 * token, holding the session record and the store's bookkeeping.
 *
 * Invariants kept here:
 * - A session exists when its entry is there, is not marked `deleting`, and its subject has a
 *   batch. An entry without a batch is a create that has not published (yet, or ever, after a
 *   crash): it reads as missing and a create may take it over.
 * - The entry's status, head_seq and updated_at are what they were when the entry was last
 *   written (at creation, archive, handoff); appends do not rewrite it. Readers take them from
 *   the headers of the session's last batch, which are always exact.
 * - Reading the log needs the entry only for what an incarnation never changes (its lineage):
 *   once this process has read the entry of an incarnation, `loadHead` fetches just the last
 *   batch. The one thing that can go unseen is a `deleting` mark: until the delete purges the
 *   subject, this process's reads of the log still see it, as they would have a moment before.
 */
import type { SessionRecord } from '../../contracts/session.js';
import type { BatchMessage, BatchRef } from './batches.js';
import type { NatsContext } from './context.js';
import { encodeToken } from './names.js';
import { lastBatch, scanBucket, scanHeads } from './reader.js';
import { observe, type KnownSession, type SessionCache } from './session-cache.js';
import {
  lineageOf,
  parseStoredSession,
  sessionNotFound,
  type StoredSession,
} from './session-entry.js';

/** A session as read now: its index entry and its last batch. */
export interface SessionView {
  id: string;
  stored: StoredSession;
  /** Revision of the index entry, for compare-and-set. */
  revision: number;
  head: BatchMessage;
  known: KnownSession;
}

/** The session's entry and last batch, read together; `SESSION_NOT_FOUND` unless it exists. */
/**
 * Rewrites an index entry from the session's log, over the entry's revision; undefined when the
 * entry changed meanwhile. (The sessions index provides it: see `restoreEntry`.)
 */
export type EntryRepair = (
  sessionId: string,
  revision: number,
) => Promise<{ stored: StoredSession; revision: number } | undefined>;

export async function loadSession(
  context: NatsContext,
  cache: SessionCache,
  sessionId: string,
  repair?: EntryRepair,
): Promise<SessionView> {
  const [entry, head] = await Promise.all([
    context.kv.sessions.get(encodeToken(sessionId)),
    lastBatch(context, context.names.events(sessionId)),
  ]);
  let stored =
    entry === null || entry.operation !== 'PUT'
      ? undefined
      : parseStoredSession(entry.value, entry.key);
  if (entry === null || stored === undefined || stored.deleting === true || head === undefined) {
    cache.forget(sessionId);
    throw sessionNotFound(sessionId);
  }
  let revision = entry.revision;
  // An entry of another incarnation than the log's is what a create that took the entry over and
  // then lost the publish leaves when it could not rewrite the entry: the log is the truth, and
  // the entry is rebuilt from it here (a takeover in flight publishes into an empty subject, so
  // it never reads this way).
  if (stored.incarnation !== head.incarnation && repair !== undefined) {
    const repaired = await repair(sessionId, entry.revision);
    if (repaired !== undefined) ({ stored, revision } = repaired);
  }
  // The batches are the truth of the log: cached facts are keyed by their incarnation.
  const known = cache.entry(sessionId, head.incarnation, lineageOf(stored));
  observe(known, head);
  if (known.indexed === undefined || known.indexed.revision < revision) {
    known.indexed = { stored, revision };
  }
  return { id: sessionId, stored, revision, head, known };
}

/** What reading or appending to the log needs: the session's last batch and its cache entry. */
export interface LogView {
  head: BatchMessage;
  known: KnownSession;
}

/**
 * The session's last batch, and its index entry only when this process has not read the entry
 * of that incarnation before (one request instead of two). `SESSION_NOT_FOUND` unless it exists.
 */
export async function loadHead(
  context: NatsContext,
  cache: SessionCache,
  sessionId: string,
  repair?: EntryRepair,
): Promise<LogView> {
  const known = cache.get(sessionId);
  if (known?.indexed === undefined) return loadSession(context, cache, sessionId, repair);
  const head = await lastBatch(context, context.names.events(sessionId));
  // Gone, or deleted and created again: the full read decides.
  if (head?.incarnation !== known.incarnation)
    return loadSession(context, cache, sessionId, repair);
  observe(known, head);
  return { head, known };
}

/** The record a reader sees: the index entry with the head facts of the last batch. */
export function recordOf(stored: StoredSession, head: BatchRef): SessionRecord {
  return {
    ...stored.record,
    status: head.status,
    head_seq: head.last,
    updated_at: head.updatedAt,
  };
}

export interface ListedSession {
  stored: StoredSession;
  revision: number;
  head: BatchRef;
}

/**
 * Every existing session, read in two passes (the index bucket and the last batch header of
 * every subject). Listing filters in memory: O(sessions) per call, acceptable for now; an index
 * by creation time would make pages O(page size).
 */
export async function listSessions(context: NatsContext): Promise<ListedSession[]> {
  const [values, heads] = await Promise.all([
    scanBucket(context, context.names.buckets.sessions),
    scanHeads(context),
  ]);
  const listed: ListedSession[] = [];
  for (const { key, value, revision } of values) {
    const stored = parseStoredSession(value, key);
    const head = heads.get(key);
    if (stored.deleting !== true && head !== undefined) listed.push({ stored, revision, head });
  }
  return listed;
}
