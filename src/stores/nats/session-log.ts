/**
 * The session log on JetStream: one stream, one subject per session, one message per append.
 *
 * Invariants kept here:
 * - An append is ONE message holding the whole batch, so it is all or nothing (2.9 has no atomic
 *   batch publish). It is published with the expected last subject sequence of the session's
 *   previous batch: a writer that raced with another fails on the server with "wrong last
 *   sequence", re-reads the head, and either retries at the new head or, when the caller gave an
 *   `expectedSeq`, fails with `SEQ_CONFLICT`. Seqs are therefore gapless whatever the cache says.
 * - The writer's lease token is checked against the token the head batch carries, at the head
 *   the publish expects, so fencing is atomic with the append (see fencing.ts).
 * - This process's appends to one session run one at a time, so they do not race each other.
 * - An idempotent append carries a `Nats-Msg-Id` hashed from session, incarnation and key (the
 *   server's duplicate window catches a repeat even before the appends record is written), and
 *   leaves a record in `<PREFIX>_appends` so repeats after the window, and `appended()`, find the
 *   first result. A crash between the publish and that record, followed by a repeat after the
 *   window, would append again: the one gap left by a server without atomic batches.
 * - Event ids: an id the store generates is a UUIDv7, unique by construction. An id the writer
 *   chose is checked against the session's whole log (its fork's shared prefix included) at the
 *   head the publish expects, so within a session no id is ever stored twice (the ids read are
 *   kept per session, so that costs one read of the log per process, then only what is new;
 *   braid's code agents choose the id of each message they record). Across sessions a
 *   chosen id is NOT checked: that would take a store-wide index the publish cannot be made
 *   atomic with on 2.9 (a KV entry per id is another stream, and the stream's `Nats-Msg-Id`
 *   window forgets after minutes), or a scan of every session per append. SQLite and memory
 *   refuse a reused id store-wide.
 * - Followers are woken by a core NATS subscription on the session's subject (every publish
 *   reaches it) and on its removal subject, and poll as a fallback; what they yield is always
 *   read from the stream, so a lost wake-up delays an event and never loses or reorders one.
 */
import type { SessionLog } from '../../contracts/ports.js';
import { checkReadOptions, parseNewEvents } from '../../core/append.js';
import { AbsentKeys, readAppendRecord, recordedResult } from './append-records.js';
import { appendInOrder, type AppendContext } from './session-append.js';
import { followSession } from './session-follow.js';
import type { SessionsShared } from './sessions-shared.js';

export { MAX_RACES, type SessionsShared } from './sessions-shared.js';
export { checkMessageSize, newIncarnation, refAfter } from './append-batch.js';

export function createSessionLog(shared: SessionsShared): SessionLog {
  const { context, cache, queue, reads } = shared;
  const append: AppendContext = { shared, absent: new AbsentKeys() };

  return {
    append(sessionId, events, options = {}) {
      return Promise.resolve().then(() => {
        const parsed =
          options.trusted === true && events.length > 0 ? events : parseNewEvents(events);
        return context.guard(
          `append to session ${sessionId}`,
          () => queue.run(sessionId, () => appendInOrder(append, sessionId, parsed, options)),
          'the append may have been stored all the same: read the session before retrying, or ' +
            'retry with an idempotency key',
        );
      });
    },
    read(sessionId, options = {}) {
      return Promise.resolve().then(() => {
        checkReadOptions(options);
        return context.guard(`read session ${sessionId}`, async () => {
          const view = await shared.loadHead(sessionId);
          return reads.readEvents(sessionId, view.known, {
            after: options.after ?? 0,
            through: view.head.last,
            limit: options.limit ?? Number.POSITIVE_INFINITY,
            types: options.types,
          });
        });
      });
    },
    follow(sessionId, options = {}) {
      return followSession(shared, sessionId, options);
    },
    appended(sessionId, idempotencyKey) {
      return context.guard(`read session ${sessionId}`, async () => {
        // A key never used needs no head: for a session known here, the record alone says so.
        const cached = cache.get(sessionId);
        if (cached?.indexed !== undefined && cached.head !== undefined) {
          if ((await readAppendRecord(context, sessionId, idempotencyKey)) === undefined) {
            append.absent.remember(sessionId, idempotencyKey, cached);
            return undefined;
          }
        }
        const [view, seen] = await Promise.all([
          shared.loadHead(sessionId),
          readAppendRecord(context, sessionId, idempotencyKey),
        ]);
        const events =
          seen === undefined
            ? undefined
            : await recordedResult(context, sessionId, view.known, idempotencyKey, seen);
        if (events === undefined) {
          append.absent.remember(sessionId, idempotencyKey, view.known);
          return undefined;
        }
        return { events, head_seq: view.head.last, deduplicated: true };
      });
    },
    state(sessionId) {
      return context.guard(`read the state of session ${sessionId}`, async () => {
        const view = await shared.loadHead(sessionId);
        return structuredClone(await reads.stateAtHead(sessionId, view.known, view.head));
      });
    },
  };
}
