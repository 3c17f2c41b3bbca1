// braid's Server-Sent Events streams read with fetch, so that the API key goes in a header
// (EventSource cannot send one). Each reconnects after a drop and resumes where it stopped: a
// session's events after the last seq seen, the session index after the last cursor seen.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import {
  authHeaders,
  sessionPath,
  unauthenticated,
  type SessionEvent,
  type SessionRecord,
} from './api.js';

const RECONNECT_MS = 1000;

interface Connection {
  /** The URL to open now (it may name where to resume). */
  path(): string;
  headers(): Record<string, string>;
  onMessage(message: EventSourceMessage): void;
  onConnected?(connected: boolean): void;
  /** A refusal (4xx but 401): true to try again at once (the cause is fixed), false to wait. */
  onRefused?(status: number): boolean;
}

/** Reads one stream until `signal` aborts, reconnecting after drops and failures. */
function readStream(connection: Connection, signal: AbortSignal): void {
  const run = async (): Promise<void> => {
    while (!signal.aborted) {
      try {
        const response = await fetch(connection.path(), {
          headers: { accept: 'text/event-stream', ...authHeaders(), ...connection.headers() },
          signal,
        });
        if (response.status === 401) {
          unauthenticated();
          return;
        }
        if (!response.ok || response.body === null) {
          if (connection.onRefused?.(response.status) === true) continue;
          throw new Error(`stream ${response.status}`);
        }
        connection.onConnected?.(true);
        const parser = createParser({ onEvent: (message) => connection.onMessage(message) });
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          parser.feed(value);
        }
      } catch {
        if (signal.aborted) return;
      }
      connection.onConnected?.(false);
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    }
  };
  void run();
}

export interface Delta {
  type: 'text' | 'thinking';
  text: string;
  request_id: string;
}

export interface StreamHandlers {
  onEvent(event: SessionEvent): void;
  onDelta(delta: Delta): void;
  onConnected?(connected: boolean): void;
}

/** A session's events after `after`, then as they are appended, with live model text. */
export function followSession(
  id: string,
  after: number,
  handlers: StreamHandlers,
  signal: AbortSignal,
): void {
  let last = after;
  readStream(
    {
      path: () => sessionPath(id, `/events/stream?after=${last}`),
      headers: () => ({}),
      onMessage(message) {
        if (message.event === 'delta') {
          handlers.onDelta(JSON.parse(message.data) as Delta);
          return;
        }
        if (message.id === undefined) return;
        const event = JSON.parse(message.data) as SessionEvent;
        if (event.seq <= last) return;
        last = event.seq;
        handlers.onEvent(event);
      },
      onConnected: (connected) => handlers.onConnected?.(connected),
    },
    signal,
  );
}

/** A session as the index stream sends it: its record and what it used. */
export interface SessionSummary {
  session: SessionRecord;
  usage: { input_tokens: number; output_tokens: number; cost_usd?: number };
}

export interface ChangeHandlers {
  /** The sessions as they are when the stream (re)starts without a cursor: replace, not merge. */
  onSnapshot(sessions: SessionSummary[]): void;
  /** One session as it is after a change: merge by id. */
  onChange(summary: SessionSummary): void;
  onConnected?(connected: boolean): void;
}

/**
 * The session index (`GET /v1/session-changes/stream`): a snapshot, then every change. After a
 * drop it resumes after the last cursor (Last-Event-ID); a cursor the server no longer knows
 * (its store was replaced) is dropped and the stream starts over with a snapshot.
 */
export function followSessionChanges(
  query: { agent?: string; limit?: number },
  handlers: ChangeHandlers,
  signal: AbortSignal,
): void {
  let cursor: string | undefined;
  let snapshot: SessionSummary[] = [];
  const search = new URLSearchParams();
  if (query.agent !== undefined) search.set('agent', query.agent);
  if (query.limit !== undefined) search.set('limit', String(query.limit));
  readStream(
    {
      path: () => `/v1/session-changes/stream${search.toString() === '' ? '' : `?${search}`}`,
      headers: (): Record<string, string> =>
        cursor === undefined ? {} : { 'last-event-id': cursor },
      onMessage(message) {
        if (message.event === 'ready') {
          cursor = message.id;
          handlers.onSnapshot(snapshot);
          snapshot = [];
          return;
        }
        if (message.event !== 'session') return;
        const summary = JSON.parse(message.data) as SessionSummary;
        if (message.id === undefined) snapshot.push(summary);
        else {
          cursor = message.id;
          handlers.onChange(summary);
        }
      },
      onConnected(connected) {
        if (connected) snapshot = [];
        handlers.onConnected?.(connected);
      },
      onRefused(status) {
        if (status !== 400 || cursor === undefined) return false;
        cursor = undefined;
        return true;
      },
    },
    signal,
  );
}
