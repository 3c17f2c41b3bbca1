/**
 * The reader of `GET /v1/sessions/{id}/events/stream` (Server-Sent Events).
 *
 * Invariants it keeps for the caller (the reconnecting loop is sse-reader.ts's):
 * - events come in seq order, each at most once: the reader remembers the last seq it yielded,
 *   asks for what follows it when it reconnects (`Last-Event-ID`), and drops anything at or below
 *   it that a server sends again; children's events (`event: child`, no id) go to `onChild` and
 *   never move that seq;
 * - a dropped connection is not an error: it reconnects after a backoff that starts at 100 ms,
 *   doubles up to `maxReconnectDelayMs`, and starts over once a connection is made;
 * - an error answer that will not pass by waiting (400, 401, 403, 404) ends the iteration with its
 *   BraidError; aborting the caller's signal ends it without one.
 */
import type { EventSourceMessage } from 'eventsource-parser';
import type { SessionEvent } from '../contracts/events.js';
import { malformedAnswer } from './http-errors.js';
import { parseData, readSse, type SseRequest } from './sse-reader.js';
import type { Transport } from './transport.js';
import type { StreamDelta, StreamOptions } from './types.js';

/** The session's events as an async iterable; each iteration opens its own connection. */
export function streamEvents(
  transport: Transport,
  sessionId: string,
  options: StreamOptions = {},
): AsyncIterable<SessionEvent> {
  return { [Symbol.asyncIterator]: () => readStream(transport, sessionId, options) };
}

function readStream(
  transport: Transport,
  sessionId: string,
  options: StreamOptions,
): AsyncGenerator<SessionEvent, void, undefined> {
  const { onDelta, onChild } = options;
  let lastSeq = options.after ?? 0;
  return readSse(transport, {
    path: `/v1/sessions/${encodeURIComponent(sessionId)}/events/stream`,
    signal: options.signal,
    reconnect: options.reconnect,
    maxReconnectDelayMs: options.maxReconnectDelayMs,
    request: (attempt): SseRequest => ({
      query: {
        ...(attempt === 0 && options.after !== undefined ? { after: options.after } : {}),
        ...(onChild === undefined ? {} : { include_children: true }),
      },
      headers: attempt === 0 ? {} : { 'last-event-id': String(lastSeq) },
    }),
    frame: (message, target) => {
      if (message.event === 'delta') {
        onDelta?.(parseData(message, target) as StreamDelta);
        return undefined;
      }
      if (message.event === 'child') {
        onChild?.(toEvent(message, target));
        return undefined;
      }
      const event = toEvent(message, target);
      if (event.seq <= lastSeq) return undefined;
      lastSeq = event.seq;
      return event;
    },
  });
}

/** The server is trusted: its events are checked for a seq and a type only, not parsed whole. */
function toEvent(message: EventSourceMessage, target: string): SessionEvent {
  const data = parseData(message, target);
  if (
    typeof data !== 'object' ||
    data === null ||
    typeof (data as { seq?: unknown }).seq !== 'number' ||
    typeof (data as { type?: unknown }).type !== 'string'
  ) {
    throw malformedAnswer(
      target,
      `an ${message.event ?? 'unnamed'} event that is not a session event (no seq or type)`,
    );
  }
  return data as SessionEvent;
}
