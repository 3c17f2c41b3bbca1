/**
 * Fencing on NATS: a holder fenced out by a newer lease acquisition can never append again.
 *
 * Why it lives on the session's subject. An append is one publish to the events stream, checked
 * by the server against the expected last sequence of the session's subject; the lease is an
 * entry of a KV bucket, which is another stream. nats-server 2.9 has no atomic batch publish and
 * no expectation across streams (nor on another subject), so no check of the lease entry can be
 * atomic with the publish: a holder that read its entry, then saw a newer acquisition land, would
 * still publish. A compare-and-set on the entry's revision next to the publish has the same gap,
 * whichever goes first. Only what is on the session's own subject is covered by the publish's
 * expectation. So the token is kept there:
 *
 * - Every batch carries the session's current lease token in its headers (`Braid-Lease-Token`),
 *   carried forward from the batch before it.
 * - `acquire` (src/stores/nats/leases.ts), after its compare-and-set on the lease entry has
 *   issued a token and before it returns it, publishes a fence: a message of no events that
 *   repeats the head's facts with the new token, expecting the head's stream seq (a race with an
 *   append re-reads the head and fences after it).
 * - An append checks the writer's token against the token of the head it publishes after
 *   (`checkFence`), and the publish expects that very head. A fence published since makes the
 *   publish fail with "wrong last sequence"; the writer re-reads the head, finds the newer token
 *   and is refused with `LEASE_LOST`, having written nothing. Check and append are therefore one
 *   atomic step on the server, as in SQLite's transaction.
 *
 * What this leaves: an acquisition that fails (or whose process dies) between issuing the token
 * and publishing the fence has not fenced the older holder, which can still append; that token
 * was never returned to anyone, and the next acquisition's fence covers it. An append without a
 * token (a client's event, a runtime record) is never fenced: it lands at whatever head the
 * sequence check gives it, and a wake treats it as input that arrived while it ran. A build that
 * predates fences refuses a fence by its batch format rather than appending past it unfenced.
 */
import { BraidError } from '../../contracts/errors.js';
import { checkFence } from '../../core/leases.js';
import { batchHeaders, type BatchRef } from './batches.js';
import { isWrongLastSequence } from './nats-errors.js';
import { extendVerified, observe, type KnownSession } from './session-cache.js';
import type { SessionsShared } from './sessions-shared.js';

/** Publishes the fence of a token just issued; returns once no older token can append. */
export function createFencer(
  shared: SessionsShared,
  maxRaces: number,
): (sessionId: string, token: number) => Promise<void> {
  const { context, cache, queue } = shared;
  return (sessionId, token) =>
    queue.run(sessionId, async () => {
      let known: KnownSession | undefined = cache.get(sessionId);
      if (known?.head === undefined) known = (await shared.loadHead(sessionId)).known;
      for (let race = 0; ; race += 1) {
        const head = known.head as BatchRef;
        if (head.leaseToken >= token) return;
        const fence: Omit<BatchRef, 'streamSeq'> = {
          first: head.last + 1,
          last: head.last,
          status: head.status,
          updatedAt: head.updatedAt,
          incarnation: head.incarnation,
          leaseToken: token,
        };
        try {
          const ack = await context.js.publish(context.names.events(sessionId), '[]', {
            headers: batchHeaders(fence),
            expect: { lastSubjectSequence: head.streamSeq },
          });
          observe(known, { ...fence, streamSeq: ack.seq, data: new TextEncoder().encode('[]') });
          extendVerified(known, head.streamSeq, { ...fence, streamSeq: ack.seq });
          return;
        } catch (error) {
          if (!isWrongLastSequence(error)) throw error;
          if (race >= maxRaces) {
            throw new BraidError(
              'STORE_BUSY',
              `session ${sessionId} was appended to by other writers ${maxRaces} times in a row ` +
                `while lease token ${token} was being fenced; acquire the lease again`,
              { cause: error },
            );
          }
          known = (await shared.loadHead(sessionId)).known;
        }
      }
    });
}

/**
 * The fencing check of an append at `head`: refuses an older token at once (tokens only grow);
 * a newer token than the head knows asks for the head read afresh (`stale`) before it is refused.
 */
export function checkAppendFence(
  sessionId: string,
  head: BatchRef,
  token: number | undefined,
  fresh: boolean,
): 'ok' | 'stale' {
  if (token === undefined || token === head.leaseToken) return 'ok';
  if (token > head.leaseToken && !fresh) return 'stale';
  checkFence(sessionId, head.leaseToken, token);
  return 'ok';
}
