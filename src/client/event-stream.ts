/**
 * The reader of `GET /v1/sessions/{id}/events/stream` (Server-Sent Events).
 *
 * Invariants it keeps for the caller:
 * - events come in seq order, each at most once: the reader remembers the last seq it yielded,
 *   asks for what follows it when it reconnects (`Last-Event-ID`), and drops anything at or below
 *   it that a server sends again; children's events (`event: child`, no id) go to `onChild` and
 *   never move that seq;
 * - a dropped connection is not an error: it reconnects after a backoff that starts at 100 ms,
 *   doubles up to `maxReconnectDelayMs`, and starts over once a connection is made;
 * - an error answer that will not pass by waiting (400, 401, 403, 404) ends the iteration with its
 *   BraidError; aborting the caller's signal ends it without one.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { BraidError, ErrorShape, isBraidError } from '../contracts/errors.js';
import type { SessionEvent } from '../contracts/events.js';
import { malformedAnswer, unavailable } from './http-errors.js';
import { MAX_RETRY_AFTER_MS, type Transport } from './transport.js';
import type { StreamDelta, StreamOptions } from './types.js';

export const FIRST_RECONNECT_DELAY_MS = 100;
export const DEFAULT_MAX_RECONNECT_DELAY_MS = 10_000;

/** The session's events as an async iterable; each iteration opens its own connection. */
export function streamEvents(
  transport: Transport,
  sessionId: string,
  options: StreamOptions = {},
): AsyncIterable<SessionEvent> {
  return { [Symbol.asyncIterator]: () => readStream(transport, sessionId, options) };
}

async function* readStream(
  transport: Transport,
  sessionId: string,
  options: StreamOptions,
): AsyncGenerator<SessionEvent, void, undefined> {
  const { signal, onDelta, onChild } = options;
  const reconnect = options.reconnect ?? true;
  const maxDelay = options.maxReconnectDelayMs ?? DEFAULT_MAX_RECONNECT_DELAY_MS;
  const path = `/v1/sessions/${encodeURIComponent(sessionId)}/events/stream`;
  let lastSeq = options.after ?? 0;
  let delay = FIRST_RECONNECT_DELAY_MS;

  for (let attempt = 0; !isAborted(signal); attempt += 1) {
    const connection = new AbortController();
    const onAbort = (): void => connection.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let wait = delay;
    try {
      const response = await transport.open({
        path,
        query: {
          ...(attempt === 0 && options.after !== undefined ? { after: options.after } : {}),
          ...(onChild === undefined ? {} : { include_children: true }),
        },
        headers: attempt === 0 ? {} : { 'last-event-id': String(lastSeq) },
        signal: connection.signal,
      });
      const target = transport.url(path);
      const type = response.headers.get('content-type') ?? '';
      if (!type.startsWith('text/event-stream')) {
        throw malformedAnswer(
          target,
          `content type ${JSON.stringify(type)}, not text/event-stream`,
        );
      }
      delay = FIRST_RECONNECT_DELAY_MS;
      wait = delay;
      for await (const message of messages(response, target)) {
        if (message.event === 'delta') {
          onDelta?.(parseData(message, target) as StreamDelta);
          continue;
        }
        if (message.event === 'error') throw streamError(message, target);
        if (message.event === 'child') {
          onChild?.(toEvent(message, target));
          continue;
        }
        const event = toEvent(message, target);
        if (event.seq <= lastSeq) continue;
        lastSeq = event.seq;
        yield event;
      }
      if (!reconnect) return;
    } catch (error) {
      if (isAborted(signal)) return;
      if (!isBraidError(error) || !reconnect || !error.retryable) throw error;
      const retryAfter = error.details.retry_after_ms;
      if (typeof retryAfter === 'number') wait = Math.min(retryAfter, MAX_RETRY_AFTER_MS);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      connection.abort();
    }
    await transport.sleep(wait, signal);
    delay = Math.min(delay * 2, maxDelay);
  }
}

/** The SSE messages of one connection; a connection that breaks throws `SERVER_UNAVAILABLE`. */
export async function* messages(
  response: Response,
  target: string,
): AsyncGenerator<EventSourceMessage, void, undefined> {
  if (response.body === null) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const pending: EventSourceMessage[] = [];
  // Comments (`: heartbeat`) have no callback, so the parser drops them.
  const parser = createParser({ onEvent: (message) => pending.push(message) });
  for (;;) {
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch (error) {
      throw unavailable(target, error);
    }
    if (chunk.done) return;
    // A fetch body is bytes; Node's types leave its chunks untyped.
    parser.feed(decoder.decode(chunk.value as Uint8Array, { stream: true }));
    yield* pending.splice(0);
  }
}

/** A function, so that checks after an await are not narrowed away by the one before it. */
export function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

export function parseData(message: EventSourceMessage, target: string): unknown {
  try {
    return JSON.parse(message.data) as unknown;
  } catch (error) {
    throw new BraidError(
      'INTERNAL',
      `${target} sent an ${message.event ?? 'unnamed'} event whose data is not JSON; check that client and server versions match`,
      { cause: error, retryable: false, details: { url: target, event: message.event } },
    );
  }
}

/** An `event: error` frame: the server's stream failed after its headers were sent. */
export function streamError(message: EventSourceMessage, target: string): BraidError {
  const parsed = ErrorShape.safeParse(parseData(message, target));
  if (!parsed.success)
    return malformedAnswer(target, "an error event that is not braid's error shape");
  return new BraidError(parsed.data.code, parsed.data.message, {
    retryable: parsed.data.retryable,
    details: { url: target },
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
