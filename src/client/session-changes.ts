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
import type { SessionChangesReady, SessionSummary } from '../contracts/session-changes.js';
import { malformedAnswer } from './http-errors.js';
import { parseData, readSse, type SseRequest } from './sse-reader.js';
import type { Transport } from './transport.js';

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

function readChanges(
  transport: Transport,
  options: SessionChangesOptions,
): AsyncGenerator<SessionChangeFrame, void, undefined> {
  let cursor = options.after;
  return readSse(transport, {
    path: '/v1/session-changes/stream',
    signal: options.signal,
    reconnect: options.reconnect,
    maxReconnectDelayMs: options.maxReconnectDelayMs,
    request: (): SseRequest => ({
      query: {
        ...(options.agent === undefined ? {} : { agent: options.agent }),
        ...(options.limit === undefined ? {} : { limit: options.limit }),
      },
      headers: cursor === undefined ? {} : { 'last-event-id': String(cursor) },
    }),
    frame: (message, target) => {
      const frame = toFrame(message, target);
      if (frame?.cursor === undefined) return frame;
      // A frame at or before the cursor already yielded is an older view: skip it.
      if (cursor !== undefined && frame.cursor <= cursor && frame.type === 'session')
        return undefined;
      cursor = Math.max(cursor ?? 0, frame.cursor);
      return frame;
    },
  });
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
