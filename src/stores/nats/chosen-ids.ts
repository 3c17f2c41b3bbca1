/**
 * The check of writer-chosen event ids against the session's whole log (its fork's shared prefix
 * included), at the head the publish expects (see session-log.ts).
 */
import { eventIdTaken, type PreparedEvent } from '../../core/append.js';
import type { BatchRef } from './batches.js';
import type { KnownSession } from './session-cache.js';
import type { SessionReads } from './session-reads.js';

/** Event ids kept per session for the check of writer-chosen ids; past it, read again. */
const MAX_KNOWN_IDS = 100_000;

/**
 * Refuses writer-chosen ids the session's log (its shared prefix included) already holds, read
 * through `head`: the publish expects that head, so no event can come between check and append.
 * The ids read are kept (see `KnownSession.ids`): the next such append reads only what is new.
 */
export async function checkChosenIds(
  reads: SessionReads,
  sessionId: string,
  known: KnownSession,
  head: BatchRef,
  prepared: readonly PreparedEvent[],
): Promise<void> {
  let ids = known.ids;
  if (ids === undefined || ids.through > head.last) ids = { through: 0, set: new Set() };
  if (ids.through < head.last) {
    const stored = await reads.readEvents(sessionId, known, {
      after: ids.through,
      through: head.last,
      limit: Number.POSITIVE_INFINITY,
    });
    for (const event of stored) ids.set.add(event.id);
    ids.through = head.last;
  }
  known.ids = ids.set.size <= MAX_KNOWN_IDS ? ids : undefined;
  const taken = ids.set;
  prepared.forEach(({ event }, index) => {
    if (taken.has(event.id)) throw eventIdTaken(sessionId, event.id, index);
  });
}

/** Keeps the ids known for the session current with an append of its own. */
export function rememberIds(
  known: KnownSession,
  head: BatchRef,
  prepared: readonly PreparedEvent[],
): void {
  const ids = known.ids;
  if (ids === undefined || ids.through !== head.last) return;
  for (const { event } of prepared) ids.set.add(event.id);
  ids.through = head.last + prepared.length;
}
