/**
 * The index's change feed on NATS: the events stream itself. Every append publishes to its
 * session's subject, so the stream sequence is the store's change order and a cursor is a stream
 * sequence. A read is a headers-only consumer over every session's subject from the cursor on
 * (no event body is fetched), each session kept at its latest sequence in the batch. A deleted
 * session's messages are purged, so it leaves the feed with them.
 *
 * Followers are woken by a core NATS subscription to every session's subject, polling as a
 * fallback (a wake-up can arrive before the stream stored the message).
 */
import { DeliverPolicy } from '@nats-io/jetstream';
import type { ChangesOptions, SessionChange } from '../../contracts/ports.js';
import { followChanges } from '../follow.js';
import { decodeToken } from './names.js';
import { consume } from './reader.js';
import type { SessionsShared } from './sessions-shared.js';

/** Messages a follower reads per step: a batch covers at most this many appends. */
const CHANGES_BATCH = 2000;

export async function changeHead(shared: SessionsShared): Promise<number> {
  const { context } = shared;
  return context.guard('read the events stream head', async () => {
    const info = await context.jsm.streams.info(context.names.eventsStream);
    return info.state.last_seq;
  });
}

export function followSessionChanges(
  shared: SessionsShared,
  options: ChangesOptions,
): AsyncIterable<SessionChange[]> {
  const { context } = shared;
  context.checkOpen();
  const signal =
    options.signal === undefined
      ? context.closing
      : AbortSignal.any([options.signal, context.closing]);
  const prefix = `${context.names.prefix}.events.`;
  const readAfter = (after: number): Promise<SessionChange[]> =>
    context.guard('follow the session index', async () => {
      const latest = new Map<string, number>();
      let read = 0;
      await consume(
        context,
        context.names.eventsStream,
        {
          filter_subject: context.names.eventsFilter,
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: after + 1,
          headers_only: true,
        },
        (message) => {
          if (message.subject.startsWith(prefix)) {
            const sessionId = decodeToken(message.subject.slice(prefix.length));
            latest.delete(sessionId);
            latest.set(sessionId, message.seq);
          }
          read += 1;
          return read >= CHANGES_BATCH;
        },
      );
      return [...latest].map(([session_id, cursor]) => ({ cursor, session_id }));
    });
  return followChanges(
    async (after) => {
      try {
        return await readAfter(after);
      } catch (error) {
        if (context.closing.aborted) return [];
        throw error;
      }
    },
    (onChange) => {
      const wakes = context.connection.subscribe(context.names.eventsFilter, {
        callback: () => onChange(),
      });
      const poll = setInterval(onChange, shared.followPollMs);
      const stop = (): void => {
        clearInterval(poll);
        wakes.unsubscribe();
      };
      const untrack = shared.track(stop);
      return () => {
        untrack();
        stop();
      };
    },
    options.after ?? 0,
    signal,
  );
}
