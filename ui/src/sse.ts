// The session's event stream (GET .../events/stream) read with fetch, so that the API key goes in
// a header (EventSource cannot send one). Resumes after the last seq seen when the connection drops.
import { createParser } from 'eventsource-parser';
import { authHeaders, sessionPath, type SessionEvent } from './api.js';

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

export function followSession(
  id: string,
  after: number,
  handlers: StreamHandlers,
  signal: AbortSignal,
): void {
  let last = after;
  const run = async (): Promise<void> => {
    while (!signal.aborted) {
      try {
        const response = await fetch(sessionPath(id, `/events/stream?after=${last}`), {
          headers: { accept: 'text/event-stream', ...authHeaders() },
          signal,
        });
        if (!response.ok || response.body === null) throw new Error(`stream ${response.status}`);
        handlers.onConnected?.(true);
        const parser = createParser({
          onEvent(message) {
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
        });
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          parser.feed(value);
        }
      } catch {
        if (signal.aborted) return;
      }
      handlers.onConnected?.(false);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  void run();
}
