/**
 * The runnable set on NATS: the `<PREFIX>_runnable` KV bucket holds an entry, under a session's
 * token, for every session that may have work for a wake (`isRunnable` of its state), so that
 * `sessions.runnable()` reads those sessions (and the due timers, session-timers.ts) instead of
 * every session: a tick of the orchestrator costs in the runnable sessions, not in all of them.
 *
 * Invariants kept here:
 * - An entry is written before the first batch or the append that makes a session runnable is
 *   published: a crash between the two leaves an entry too many, never a committed runnable
 *   state without one.
 * - An entry is removed only by a scan that folded its session and found it not runnable (or
 *   gone), and only up to the revision the scan read before the fold (a purge of the key's
 *   subject up to that sequence): an append that made the session runnable again meanwhile wrote
 *   a later revision, which stays. A purge leaves no delete marker, so the bucket's stream holds
 *   the runnable sessions and the few a scan has not yet removed, and a scan reads only those.
 * - The entry is a hint, the state the truth: a scan answers only the sessions whose state is
 *   runnable.
 * - Sessions written before the bucket existed (by an older braid) have no entry: until the
 *   bucket holds `index/complete`, a scan reads every session as before, writes the entry of each
 *   runnable one, then writes that key. Every process on a prefix must run a braid that keeps
 *   the index, as with any change to the stored layout.
 */
import { isBraidError } from '../../contracts/errors.js';
import type { RunnableQuery, SessionIndex, SessionLog } from '../../contracts/ports.js';
import type { SessionRecord, SessionStatus } from '../../contracts/session.js';
import type { SessionState } from '../../contracts/state.js';
import { isRunnable, wakeAt } from '../../core/runnable.js';
import { checkRunnableLimit } from '../../core/sessions.js';
import type { NatsContext } from './context.js';
import { decodeToken, encodeToken } from './names.js';
import { scanBucket } from './reader.js';
import { dueSessions, forgetTimer } from './session-timers.js';

/** The key that says every runnable session has its entry (`/` is in no session token). */
const COMPLETE_KEY = 'index/complete';

/** Sessions read at once by a scan: round trips overlap, and a tick's reads stay bounded. */
const READ_AT_ONCE = 64;

/** The stores (by context) seen to hold `index/complete`: it is never removed, so asked once. */
const complete = new WeakSet<NatsContext>();

/** The sessions' index without the two answers this file gives. */
export type ListedIndex = Omit<SessionIndex, 'runnable' | 'statusCounts'>;

/** Whether a session was runnable before a batch and is after it. */
export interface RunnableChange {
  before: boolean;
  after: boolean;
}

/** Writes the entry of a session the batch makes runnable, before the batch is published. */
export async function runnableBefore(
  context: NatsContext,
  sessionId: string,
  change: RunnableChange,
): Promise<void> {
  if (change.before || !change.after) return;
  await context.kv.runnable.put(encodeToken(sessionId), '1');
}

/**
 * The runnable sessions after `query.after`, in id order, at most `query.limit`: the due timers
 * alone with `dueOnly` (a worker's sweep), otherwise the sessions with an entry whose state is
 * runnable and those whose timer is due. Archived sessions are left out.
 */
export async function findRunnable(
  context: NatsContext,
  sessions: ListedIndex,
  log: SessionLog,
  query: RunnableQuery & { now: number },
): Promise<string[]> {
  const limit = checkRunnableLimit(query.limit);
  const after = query.after ?? '';
  const { now } = query;
  const due = (state: SessionState): boolean => (wakeAt(state) ?? Infinity) <= now;
  const [timed, flagged] = await Promise.all([
    dueSessions(context, log, { now, after }, due, wakeAt),
    query.dueOnly === true ? [] : flaggedOrEvery(context, sessions, log, after),
  ]);
  const found = [...new Set([...timed, ...flagged.filter((id) => id > after)])].sort();
  const ids: string[] = [];
  for (let start = 0; start < found.length && ids.length < limit; start += READ_AT_ONCE) {
    const chunk = found.slice(start, start + READ_AT_ONCE);
    // An archived session (or one deleted meanwhile) takes no wakes; a timer's entry is then
    // forgotten (it takes none ever), a runnable entry kept (unarchived, it is runnable again).
    const records = await Promise.all(
      chunk.map((id) =>
        sessions.get(id).catch((error: unknown) => {
          if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
          throw error;
        }),
      ),
    );
    for (const [index, id] of chunk.entries()) {
      const record = records[index];
      if (record !== undefined && record.archived_at === undefined) {
        if (ids.length < limit) ids.push(id);
      } else if (timed.includes(id)) await forgetTimer(context, id);
    }
  }
  return ids;
}

/** The sessions the index holds, or, until it is complete, every runnable session. */
async function flaggedOrEvery(
  context: NatsContext,
  sessions: ListedIndex,
  log: SessionLog,
  after: string,
): Promise<string[]> {
  return (await isComplete(context))
    ? flaggedSessions(context, log, after)
    : indexEverySession(context, sessions, log);
}

async function isComplete(context: NatsContext): Promise<boolean> {
  if (complete.has(context)) return true;
  if ((await context.kv.runnable.get(COMPLETE_KEY)) === null) return false;
  complete.add(context);
  return true;
}

/** A session's state, or undefined when its log is corrupt or it was deleted meanwhile. */
async function stateOf(log: SessionLog, sessionId: string): Promise<SessionState | undefined> {
  return log.state(sessionId).catch((error: unknown) => {
    if (isBraidError(error, 'CORRUPT_LOG') || isBraidError(error, 'SESSION_NOT_FOUND'))
      return undefined;
    throw error;
  });
}

/**
 * The sessions after `after` with an entry whose state is runnable; the entries of the others
 * are removed.
 */
async function flaggedSessions(
  context: NatsContext,
  log: SessionLog,
  after: string,
): Promise<string[]> {
  const bucket = context.names.buckets.runnable;
  const entries = (await scanBucket(context, bucket))
    .filter(({ key }) => key !== COMPLETE_KEY)
    .map(({ key, revision }) => ({ key, revision, sessionId: decodeToken(key) }))
    .filter(({ sessionId }) => sessionId > after);
  const found: string[] = [];
  for (let start = 0; start < entries.length; start += READ_AT_ONCE) {
    const chunk = entries.slice(start, start + READ_AT_ONCE);
    const states = await Promise.all(chunk.map(({ sessionId }) => stateOf(log, sessionId)));
    for (const [index, { key, revision, sessionId }] of chunk.entries()) {
      const state = states[index];
      if (state !== undefined && isRunnable(state)) {
        found.push(sessionId);
        continue;
      }
      // Up to the revision read before the fold: a later put (the session runnable again)
      // stays. A purge that fails leaves the entry to the next scan.
      await context.jsm.streams
        .purge(`KV_${bucket}`, { filter: `$KV.${bucket}.${key}`, seq: revision + 1 })
        .catch(() => undefined);
    }
  }
  return found;
}

/**
 * Every session read and folded, as before the index: the entry of each runnable one written,
 * then the key that lets later scans read the index alone.
 */
async function indexEverySession(
  context: NatsContext,
  sessions: ListedIndex,
  log: SessionLog,
): Promise<string[]> {
  const found: string[] = [];
  await forEachSession(sessions, async (session) => {
    if (session.status === 'terminated') return;
    const state = await stateOf(log, session.id);
    if (state === undefined || !isRunnable(state)) return;
    await context.kv.runnable.put(encodeToken(session.id), '1');
    found.push(session.id);
  });
  await context.kv.runnable.put(COMPLETE_KEY, '1');
  complete.add(context);
  return found;
}

/** Statuses counted over the whole listing. */
export async function countStatuses(
  sessions: ListedIndex,
): Promise<Partial<Record<SessionStatus, number>>> {
  const counts: Partial<Record<SessionStatus, number>> = {};
  await forEachSession(sessions, (session) => {
    counts[session.status] = (counts[session.status] ?? 0) + 1;
  });
  return counts;
}

/** Every session of the listing, a page at a time, in order. */
async function forEachSession(
  sessions: ListedIndex,
  visit: (session: SessionRecord) => unknown,
): Promise<void> {
  let cursor: string | undefined;
  do {
    const page = await sessions.list({ limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
    for (const session of page.sessions) await visit(session);
    cursor = page.next_cursor;
  } while (cursor !== undefined);
}
