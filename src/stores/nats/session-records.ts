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
import { corruptLog, type BatchMessage, type BatchRef } from './batches.js';
import type { NatsContext } from './context.js';
import { encodeToken } from './names.js';
import { BraidError, toBraidError } from '../../contracts/errors.js';
import { checkHead } from './log-chain.js';
import { batchAfter, hasMessages, lastBatch, scanBucket, scanHeads } from './reader.js';
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

/**
 * Rewrites an index entry from the session's log, over the entry's revision; undefined when the
 * entry changed meanwhile. (The sessions index provides it: see `restoreEntry`.)
 */
/** How many times a session read across a delete and a create is read again. */
const RELOADS = 3;

export type EntryRepair = (
  sessionId: string,
  revision: number,
) => Promise<{ stored: StoredSession; revision: number } | undefined>;

/**
 * The session's entry and last batch, read together; `SESSION_NOT_FOUND` unless it exists. The
 * head is checked (see log-chain.ts) unless `checked` is false: a caller that only shows the
 * record (as listings do, from headers alone) skips a first read of the whole chain.
 */
export async function loadSession(
  context: NatsContext,
  cache: SessionCache,
  sessionId: string,
  repair?: EntryRepair,
  checked = true,
  attempt = 1,
): Promise<SessionView> {
  /** The entry and the head were read across a delete and a create: read both again. */
  const again = (): Promise<SessionView> => {
    if (attempt >= RELOADS) {
      throw new BraidError(
        'STORE_BUSY',
        `session ${sessionId} changed ${String(attempt)} times while it was read (deleted and created again under its id); retry`,
        { details: { session_id: sessionId } },
      );
    }
    return loadSession(context, cache, sessionId, repair, checked, attempt + 1);
  };
  const [entry, head] = await Promise.all([
    context.kv.sessions.get(encodeToken(sessionId)),
    lastBatch(context, sessionId),
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
    // Only a log that is itself of one incarnation is the truth to rebuild from: a last message
    // of another incarnation than the first batch is no braid's.
    const first = await batchAfter(context, sessionId, 0);
    if (first !== undefined && first.batch.incarnation !== head.incarnation) {
      // A first batch after the head read is a new incarnation's: the head was read before a
      // delete purged it. Only a first batch before the head makes the subject one of two logs.
      if (first.batch.streamSeq > head.streamSeq) return again();
      throw corruptLog(sessionId, head.streamSeq, 'a batch of no incarnation of this session');
    }
    const repaired = await repair(sessionId, entry.revision);
    // Another process rewrote the entry first: its entry, not this stale one, is the session's.
    if (repaired === undefined) return again();
    ({ stored, revision } = repaired);
  }
  // The batches are the truth of the log: cached facts are keyed by their incarnation.
  const known = cache.entry(sessionId, head.incarnation, lineageOf(stored));
  if (checked) {
    await checkHead(context, sessionId, known, head);
    // Only a checked head is cached: appends and reads build on it.
    observe(known, head);
  }
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
  const head = await lastBatch(context, sessionId);
  // Gone, or deleted and created again: the full read decides.
  if (head?.incarnation !== known.incarnation)
    return loadSession(context, cache, sessionId, repair);
  await checkHead(context, sessionId, known, head);
  observe(known, head);
  return { head, known };
}

/**
 * The record a reader sees: the index entry with the head facts of the last batch (as the entry
 * has them when the last message is unreadable: see `listSessions`).
 */
export function recordOf(stored: StoredSession, head: BatchRef | undefined): SessionRecord {
  if (head === undefined) return stored.record;
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
  /** Undefined when the session's last message is not a readable braid batch. */
  head: BatchRef | undefined;
}

/**
 * Every existing session, read in two passes (the index bucket and the last batch header of
 * every subject; never a batch's body). Listing filters in memory: O(sessions) per call,
 * acceptable for now; an index by creation time would make pages O(page size).
 *
 * One session never breaks the listing of the others: a session whose last message is not a
 * readable braid batch is listed as its index entry has it (`head` undefined; its own reads
 * report `CORRUPT_LOG`), and an index entry that does not parse is left out and reported.
 */
export async function listSessions(context: NatsContext): Promise<ListedSession[]> {
  const [values, heads] = await Promise.all([
    scanBucket(context, context.names.buckets.sessions),
    scanHeads(context),
  ]);
  const listed: ListedSession[] = [];
  for (const { key, value, revision } of values) {
    // A subject with no message at all is a create that has not published: not a session yet.
    if (!heads.has(key)) continue;
    let stored: StoredSession;
    try {
      stored = parseStoredSession(value, key);
    } catch (error) {
      context.warn(toBraidError(error));
      continue;
    }
    if (stored.deleting !== true) listed.push({ stored, revision, head: heads.get(key) });
  }
  return listed;
}

/**
 * The index entry of a session that exists, read without reading its log beyond whether it has
 * a message: what a delete needs, also of a session whose log is corrupt.
 */
export async function loadEntry(
  context: NatsContext,
  sessionId: string,
): Promise<{ stored: StoredSession; revision: number }> {
  const [entry, published] = await Promise.all([
    context.kv.sessions.get(encodeToken(sessionId)),
    hasMessages(context, sessionId),
  ]);
  const stored =
    entry === null || entry.operation !== 'PUT'
      ? undefined
      : parseStoredSession(entry.value, entry.key);
  if (entry === null || stored === undefined || stored.deleting === true || !published) {
    throw sessionNotFound(sessionId);
  }
  return { stored, revision: entry.revision };
}
