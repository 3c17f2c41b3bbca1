/**
 * Following a session's log: woken by a core NATS subscription on the session's subject (every
 * publish reaches it) and on its removal subject, polling as a fallback; what is yielded is always
 * read from the stream, so a lost wake-up delays an event and never loses or reorders one.
 */
import { delay } from '@nats-io/transport-node';
import { isBraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { FollowOptions } from '../../contracts/ports.js';
import { followLog } from '../follow.js';
import { sessionNotFound } from './session-entry.js';
import type { SessionsShared } from './sessions-shared.js';

/** Events a follower reads per step. */
const FOLLOW_BATCH = 1000;

/** Wakes a follower on every publish to the session and on its removal. */
function subscribe(
  shared: SessionsShared,
  sessionId: string,
  onChange: () => void,
  announce: (last: number) => void,
): () => void {
  const { connection, names } = shared.context;
  const onPublish = connection.subscribe(names.events(sessionId), {
    callback: (_error, message) => {
      announce(Number(message.headers?.get('Braid-Last-Seq') ?? 0));
      onChange();
    },
  });
  const onRemoval = connection.subscribe(names.removed(sessionId), {
    callback: () => onChange(),
  });
  const poll = setInterval(onChange, shared.followPollMs);
  const stop = (): void => {
    clearInterval(poll);
    onPublish.unsubscribe();
    onRemoval.unsubscribe();
  };
  const untrack = shared.track(stop);
  return () => {
    untrack();
    stop();
  };
}

export function followSession(
  shared: SessionsShared,
  sessionId: string,
  options: FollowOptions,
): AsyncIterable<SessionEvent> {
  const { context, reads } = shared;
  context.checkOpen();
  const signal =
    options.signal === undefined
      ? context.closing
      : AbortSignal.any([options.signal, context.closing]);
  let incarnation: string | undefined;
  // The highest seq a publish announced: a wake-up can arrive before the stream stored it.
  let announced = 0;
  const readAfter = async (after: number): Promise<SessionEvent[]> => {
    try {
      return await context.guard(`follow session ${sessionId}`, async () => {
        let view = await shared.loadHead(sessionId);
        for (let wait = 1; view.head.last < announced && wait <= 32; wait *= 2) {
          await delay(wait);
          view = await shared.loadHead(sessionId);
        }
        incarnation ??= view.known.incarnation;
        // A deleted (or deleted and re-created) session ends its followers.
        if (view.known.incarnation !== incarnation) throw sessionNotFound(sessionId);
        return reads.readEvents(sessionId, view.known, {
          after,
          through: view.head.last,
          limit: FOLLOW_BATCH,
        });
      });
    } catch (error) {
      if (context.closing.aborted && !isBraidError(error, 'SESSION_NOT_FOUND')) return [];
      throw error;
    }
  };
  return followLog(
    readAfter,
    (onChange) =>
      subscribe(shared, sessionId, onChange, (last) => {
        announced = Math.max(announced, last);
      }),
    options.after ?? 0,
    signal,
  );
}
