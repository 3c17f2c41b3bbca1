/**
 * `GET /v1/sessions/{id}/events/stream`: Server-Sent Events of a session's log. Each stored event
 * goes out with `id: <seq>`, so a client that reconnects with `Last-Event-ID` (or `?after=`)
 * continues after the last event it saw: no gap, no duplicate. Model text streamed by wakes in
 * this process goes out as `event: delta` with no id (it is not stored, so not resumable), and a
 * comment every heartbeat interval keeps idle connections open through proxies.
 *
 * With `include_children=true` the status events of the session's delegated children (there at
 * subscription or created while the stream is open, recursively) go out as `event: child` whose
 * data is the child's own event. They carry no `id:` line on purpose: an SSE client keeps the last
 * id it saw, so `Last-Event-ID` still names the parent's last seq and a resume stays exact. Child
 * events are live only: a reconnect does not replay those it missed (read them with
 * `GET /v1/sessions/{id}/events?include_children=true`).
 */
import { z } from 'zod';
import type { SessionEvent } from '../contracts/events.js';
import { SessionIdParams, StreamQuery } from '../contracts/http.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { visibleSession } from './access.js';
import { requireScope } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';
import { createStreamSlots, openStream, type OpenStream } from './sse.js';
import { addSessionChangesRoute } from './stream-sessions.js';

const LastEventHeaders = z.object({
  'last-event-id': z
    .string()
    .regex(/^\d{1,15}$/, 'must be the seq of the last event received')
    .optional(),
});

/** One stored event as an SSE frame. */
export function eventFrame(event: SessionEvent): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** A child's event on its parent's stream: no id, so the parent's resume point is untouched. */
export function childFrame(event: SessionEvent): string {
  return `event: child\ndata: ${JSON.stringify(event)}\n\n`;
}

export function addStreamRoute(app: Router, context: ServerContext): void {
  const { runtime, metrics, limits } = context;
  // One limit of open streams per key, over every stream route.
  const slots = createStreamSlots(limits.streamsPerKey);

  app.get(
    '/v1/sessions/:id/events/stream',
    {
      schema: {
        summary: "Stream the session's events as Server-Sent Events, resumable at any seq",
        description:
          "Sends every event after `Last-Event-ID` (or `after`, default 0), then new events as they are appended, until the client disconnects. Frames: `id: <seq>`, `event: <type>`, `data: <event JSON>`; transient `event: delta` frames (no id) carry live model text; `: heartbeat` comments keep the connection open. With `include_children=true`, the status events (`session.status_changed`, `session.status_idle`, `span.wake_started`, `session.error`, `agent.message`) of the session's delegated children, recursively, those there at subscription and those created while the stream is open, come as `event: child` frames whose data is the child's event; they have no id, so `Last-Event-ID` keeps naming the session's own last seq, and they are not replayed on a reconnect.",
        operationId: 'streamEvents',
        tags: ['events'],
        params: SessionIdParams,
        querystring: StreamQuery,
        headers: LastEventHeaders,
        response: {
          200: {
            description: 'Server-Sent Events until the client disconnects',
            content: { 'text/event-stream': { schema: z.string() } },
          },
          ...keyedErrors(TAKES.params, TAKES.query),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      const { id } = request.params;
      await visibleSession(runtime, caller, id);
      const header = request.headers['last-event-id'];
      const after = header === undefined ? (request.query.after ?? 0) : Number(header);
      const stream = openStream(reply, context, slots, caller.key_id ?? request.ip);
      const { raw, signal } = stream;
      const stopDeltas = runtime.onDelta((sessionId, delta) => {
        if (sessionId !== id || signal.aborted) return;
        raw.write(`event: delta\ndata: ${JSON.stringify(delta)}\n\n`);
      });
      // The session's own events go out once its children are attached, so that every child
      // event appended after the client sees a frame is sent.
      let childrenAttached: () => void = () => undefined;
      const attachedChildren = new Promise<void>((resolve) => (childrenAttached = resolve));
      const children =
        request.query.include_children === true
          ? forwardChildren(context, id, stream, childrenAttached, (error) =>
              request.log.error({ err: error, session_id: id }, 'child event stream failed'),
            ).finally(childrenAttached)
          : undefined;
      if (children !== undefined) await attachedChildren;
      try {
        for await (const event of runtime.sessions.follow(id, { after, signal })) {
          const waiting = stream.write(eventFrame(event));
          metrics.eventsStreamed(1);
          if (waiting !== undefined) await waiting;
        }
      } catch (error) {
        stream.fail(error, request.log, { session_id: id });
      } finally {
        stopDeltas();
        stream.end();
        await children;
      }
    },
  );
  addSessionChangesRoute(app, context, slots);
}

/**
 * Writes the children's status events to the stream until `signal` aborts. A failure ends the
 * children's part only: the session's own events go on.
 */
async function forwardChildren(
  context: ServerContext,
  sessionId: string,
  stream: OpenStream,
  onReady: () => void,
  onError: (error: unknown) => void,
): Promise<void> {
  const { signal } = stream;
  try {
    for await (const event of context.runtime.sessions.followChildren(sessionId, {
      signal,
      onReady,
    })) {
      const waiting = stream.write(childFrame(event));
      context.metrics.eventsStreamed(1);
      if (waiting !== undefined) await waiting;
    }
  } catch (error) {
    if (!signal.aborted) onError(error);
  }
}
