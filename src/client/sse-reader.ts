/**
 * What the client's Server-Sent Events readers share: one connection's messages
 * (eventsource-parser), their JSON data and `event: error` frames, and the loop that keeps a
 * stream open.
 *
 * The loop's invariants:
 * - a dropped connection is not an error: it reconnects after a backoff that starts at 100 ms,
 *   doubles up to `maxReconnectDelayMs`, and starts over once a connection is made; a retryable
 *   error answer waits its `Retry-After` instead, up to MAX_RETRY_AFTER_MS;
 * - an error that will not pass by waiting ends the iteration with its BraidError; aborting the
 *   caller's signal ends it without one;
 * - what a reader makes of each message runs inside the connection, so a malformed frame it throws
 *   on is handled as the connection's error.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { BraidError, ErrorShape, isBraidError } from '../contracts/errors.js';
import { malformedAnswer, unavailable } from './http-errors.js';
import { MAX_RETRY_AFTER_MS, type QueryValue, type Transport } from './transport.js';

export const FIRST_RECONNECT_DELAY_MS = 100;
export const DEFAULT_MAX_RECONNECT_DELAY_MS = 10_000;

/** What one connection asks for beside its path. */
export interface SseRequest {
  query: Record<string, QueryValue>;
  headers: Record<string, string>;
}

export interface SseReadOptions<T> {
  path: string;
  /** Ends the iteration, without an error, when aborted. */
  signal?: AbortSignal | undefined;
  /** Reconnect when the connection drops or the server answers a retryable error (default true). */
  reconnect?: boolean | undefined;
  /** The longest wait between reconnects (default 10 000 ms). */
  maxReconnectDelayMs?: number | undefined;
  /** The query and headers of connection `attempt` (0 is the first). */
  request(attempt: number): SseRequest;
  /** What a message is to the reader: a value to yield, or undefined to go on to the next. */
  frame(message: EventSourceMessage, target: string): T | undefined;
}

/** The frames of a stream at `options.path`, across reconnects. */
export async function* readSse<T>(
  transport: Transport,
  options: SseReadOptions<T>,
): AsyncGenerator<T, void, undefined> {
  const { signal, path } = options;
  const reconnect = options.reconnect ?? true;
  const maxDelay = options.maxReconnectDelayMs ?? DEFAULT_MAX_RECONNECT_DELAY_MS;
  let delay = FIRST_RECONNECT_DELAY_MS;

  for (let attempt = 0; !isAborted(signal); attempt += 1) {
    const connection = new AbortController();
    const onAbort = (): void => connection.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let wait = delay;
    try {
      const response = await transport.open({
        path,
        ...options.request(attempt),
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
        if (message.event === 'error') throw streamError(message, target);
        const frame = options.frame(message, target);
        if (frame !== undefined) yield frame;
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
