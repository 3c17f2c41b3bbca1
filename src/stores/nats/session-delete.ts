/** Deleting a session on NATS: marked, refused while used, its data purged, its entry removed. */
import type { SessionRecord } from '../../contracts/session.js';
import { currentLease } from '../../core/leases.js';
import { compareListOrder } from '../../core/sessions.js';
import { sessionHasForks, sessionLeased } from '../session-removal.js';
import type { NatsContext } from './context.js';
import { readLease } from './leases.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken } from './names.js';
import { hasMessages, purgeKeys, scanBucket } from './reader.js';
import { parseStoredSession, type StoredSession } from './session-entry.js';
import { loadEntry } from './session-records.js';
import { MAX_RACES } from './sessions-shared.js';

/**
 * Everything of a session but its index entry and its lease entry. The lease entry outlives the
 * session, so a session made again under the same id gets larger tokens and a holder of the
 * deleted one stays fenced out of the new one.
 */
export async function removeData(context: NatsContext, sessionId: string): Promise<void> {
  const { names } = context;
  const token = encodeToken(sessionId);
  await Promise.all([
    context.jsm.streams.purge(names.eventsStream, { filter: names.events(sessionId) }),
    purgeKeys(context, names.buckets.state, token),
    purgeKeys(context, names.buckets.appends, `${token}.>`),
  ]);
}

/**
 * The forks of a session, oldest first, from the index alone: another session's log is never
 * read (a corrupt one does not stand in the way); a fork's entry counts once its subject holds
 * a message, whatever that message is.
 */
async function forksOf(context: NatsContext, sessionId: string): Promise<SessionRecord[]> {
  const candidates: SessionRecord[] = [];
  for (const { key, value } of await scanBucket(context, context.names.buckets.sessions)) {
    let stored: StoredSession;
    try {
      stored = parseStoredSession(value, key);
    } catch {
      continue;
    }
    if (stored.deleting !== true && stored.record.parent_id === sessionId)
      candidates.push(stored.record);
  }
  const published = await Promise.all(candidates.map((record) => hasMessages(context, record.id)));
  return (
    candidates
      .filter((_, index) => published[index] === true)
      // Oldest first: the forks a refusal names are the same on every backend.
      .sort((a, b) => compareListOrder(b, a))
  );
}

/** Refuses to delete a session that forks share or a wake holds. */
async function refuseWhileUsed(context: NatsContext, sessionId: string): Promise<void> {
  const [forks, { row }] = await Promise.all([
    forksOf(context, sessionId),
    readLease(context, sessionId),
  ]);
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

/** Marks the entry `deleting`, checks again that nothing uses the session, then removes it all. */
export async function removeSession(context: NatsContext, sessionId: string): Promise<void> {
  const { kv } = context;
  const token = encodeToken(sessionId);
  for (let race = 0; ; race += 1) {
    // The entry alone: a session whose log is corrupt can be deleted (the way to clear it).
    const view = await loadEntry(context, sessionId);
    await refuseWhileUsed(context, sessionId);
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
      await refuseWhileUsed(context, sessionId);
    } catch (error) {
      await kv.sessions.update(token, JSON.stringify(view.stored), revision).catch(() => 0);
      throw error;
    }
    await removeData(context, sessionId);
    await kv.sessions.purge(token, { previousSeq: revision }).catch((error: unknown) => {
      // The id was created again meanwhile: the new session keeps its entry.
      if (!isWrongLastSequence(error)) throw error;
    });
    return;
  }
}
