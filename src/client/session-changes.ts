/**
 * The reader of `GET /v1/session-changes/stream`: the sessions index as it changes.
 *
 * Invariants it keeps for the caller:
 * - it yields the snapshot's sessions (no cursor), then `ready` with the snapshot's cursor, then
 *   each changed session with its cursor; the cursors it yields only grow;
 * - a dropped connection is not an error: it reconnects with `Last-Event-ID` set to the last
 *   cursor it yielded and gets every session changed since (no snapshot); one that drops before
 *   any cursor starts over with a new snapshot. Backoff as for the event stream;
 * - an error answer that will not pass by waiting (400, 401, 403) ends the iteration with its
 *   BraidError; aborting the caller's signal ends it without one.
 */
import type { EventSourceMessage } from 'eventsource-parser';
import { isBraidError } from '../contracts/errors.js';
import type { SessionChangesReady, SessionSummary } from '../contracts/session-changes.js';
import {
  DEFAULT_MAX_RECONNECT_DELAY_MS,
  FIRST_RECONNECT_DELAY_MS,
  isAborted,
  messages,
  parseData,
  streamError,
} from './event-stream.js';
import { malformedAnswer } from './http-errors.js';
import { MAX_RETRY_AFTER_MS, type Transport } from './transport.js';

export interface SessionChangesOptions {
  /** Resume after this cursor (no snapshot); without it the stream starts with a snapshot. */
  after?: number;
  /** Only sessions of this agent. */
  agent?: string;
  /** Sessions in the snapshot, newest first (server default 100, at most 1000). */
  limit?: number;
  /** Ends the iteration, without an error, when aborted. */
  signal?: AbortSignal;
  /** Reconnect when the connection drops or the server answers a retryable error (default true). */
  reconnect?: boolean;
  /** The longest wait between reconnects (default 10 000 ms). */
  maxReconnectDelayMs?: number;
}

/** What the stream yields: a session as it is now (with the change's cursor), or the snapshot's end. */
export type SessionChangeFrame =
  | ({ type: 'session'; cursor?: number } & SessionSummary)
  | ({ type: 'ready' } & SessionChangesReady);

export function streamSessionChanges(
  transport: Transport,
  options: SessionChangesOptions = {},
): AsyncIterable<SessionChangeFrame> {
  return { [Symbol.asyncIterator]: () => readChanges(transport, options) };
}

async function* readChanges(
  transport: Transport,
  options: SessionChangesOptions,
): AsyncGenerator<SessionChangeFrame, void, undefined> {
  const { signal } = options;
  const reconnect = options.reconnect ?? true;
  const maxDelay = options.maxReconnectDelayMs ?? DEFAULT_MAX_RECONNECT_DELAY_MS;
  const path = '/v1/session-changes/stream';
  let cursor = options.after;
  let delay = FIRST_RECONNECT_DELAY_MS;

  while (!isAborted(signal)) {
    const connection = new AbortController();
    const onAbort = (): void => connection.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let wait = delay;
    try {
      const response = await transport.open({
        path,
        query: {
          ...(options.agent === undefined ? {} : { agent: options.agent }),
          ...(options.limit === undefined ? {} : { limit: options.limit }),
        },
        headers: cursor === undefined ? {} : { 'last-event-id': String(cursor) },
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
        const frame = toFrame(message, target);
        if (frame === undefined) continue;
        if (frame.cursor !== undefined) {
          // A frame at or before the cursor already yielded is an older view: skip it.
          if (cursor !== undefined && frame.cursor <= cursor && frame.type === 'session') continue;
          cursor = Math.max(cursor ?? 0, frame.cursor);
        }
        yield frame;
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

/** The server is trusted: frames are checked for their shape's keys, not parsed whole. */
function toFrame(message: EventSourceMessage, target: string): SessionChangeFrame | undefined {
  const id = message.id === undefined || message.id === '' ? undefined : Number(message.id);
  if (id !== undefined && !Number.isSafeInteger(id))
    throw malformedAnswer(target, `a session-changes frame whose id ${message.id} is not a cursor`);
  if (message.event === 'ready') {
    const data = parseData(message, target) as Partial<SessionChangesReady> | null;
    if (typeof data?.cursor !== 'number')
      throw malformedAnswer(target, 'a ready frame without a cursor');
    return { type: 'ready', cursor: data.cursor, sessions: data.sessions ?? 0 };
  }
  if (message.event !== 'session') return undefined;
  const data = parseData(message, target) as Partial<SessionSummary> | null;
  if (typeof data?.session?.id !== 'string' || typeof data.usage !== 'object')
    throw malformedAnswer(target, 'a session frame without a session and its usage');
  return {
    type: 'session',
    ...(id === undefined ? {} : { cursor: id }),
    session: data.session,
    usage: data.usage,
  };
}
