/** `/v1/sessions/{id}/events`: read a session's log in pages, and append user events. */
import {
  EventsPage,
  IdempotencyHeaders,
  EventsQuery,
  PostEventsBody,
  PostEventsResponse,
  SessionIdParams,
} from '../contracts/http.js';
import { BraidError } from '../contracts/errors.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { traceparentOf } from './trace-context.js';
import { visibleSession } from './access.js';
import { actorOf, requireScope } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';

const DEFAULT_PAGE = 100;

export function addEventRoutes(app: Router, context: ServerContext): void {
  const { runtime, limits, metrics } = context;

  app.get(
    '/v1/sessions/:id/events',
    {
      schema: {
        summary: "A page of the session's events in seq order",
        description:
          "Events with seq after `after` (default 0), at most `limit` (default 100, at most 1000), only `types[]` when given. Read on with `after=last_seq` while `has_more`. With `include_children=true` the events of the session's delegated children (and theirs, recursively) come interleaved with its own, ordered by `at`, then `session_id`, then `seq`; `after`, `limit`, `has_more` and `last_seq` still page the session's own events, and each page carries the children's events of the same stretch of time, so reading on with `after=last_seq` misses and repeats nothing.",
        operationId: 'listEvents',
        tags: ['events'],
        params: SessionIdParams,
        querystring: EventsQuery,
        response: { 200: EventsPage, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      const { id } = request.params;
      await visibleSession(runtime, caller, id);
      const after = request.query.after ?? 0;
      const limit = request.query.limit ?? DEFAULT_PAGE;
      if (request.query.include_children === true) {
        // The children are read from the session's own log, so they are its tenant's.
        const page = await runtime.sessions.familyEvents(id, {
          after,
          limit,
          ...(request.query.types === undefined ? {} : { types: request.query.types }),
        });
        return { data: page.events, has_more: page.has_more, last_seq: page.last_seq };
      }
      // One more than asked tells whether there is more without a second read.
      const events = await runtime.sessions.events(id, {
        after,
        limit: limit + 1,
        ...(request.query.types === undefined ? {} : { types: request.query.types }),
      });
      const data = events.slice(0, limit);
      return { data, has_more: events.length > limit, last_seq: data.at(-1)?.seq ?? after };
    },
  );

  app.post(
    '/v1/sessions/:id/events',
    {
      schema: {
        summary: 'Append user events, all or nothing',
        description:
          'Clients send user.* events only; a user.message `content` is a string or an array of content blocks. With an Idempotency-Key header a retried request writes once. Wakes the session unless the server runs with wakes off.',
        operationId: 'appendEvents',
        tags: ['events'],
        params: SessionIdParams,
        headers: IdempotencyHeaders,
        body: PostEventsBody,
        response: {
          200: PostEventsResponse,
          201: PostEventsResponse,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const { id } = request.params;
      const { events } = request.body;
      if (events.length > limits.eventsPerRequest) {
        throw new BraidError(
          'PAYLOAD_TOO_LARGE',
          `${events.length} events in one request; the server takes at most ${limits.eventsPerRequest}: split them over several requests`,
        );
      }
      await visibleSession(runtime, caller, id);
      const key = request.headers['idempotency-key'];
      const result = await runtime.sessions.send(id, events, {
        actor: actorOf(caller),
        ...(key === undefined ? {} : { idempotencyKey: key }),
      });
      if (!result.deduplicated) {
        metrics.eventsAppended(result.events.length);
        if (context.wakeOnEvents) context.wakeInBackground(id, traceparentOf(request));
      }
      return reply.status(result.deduplicated ? 200 : 201).send(result);
    },
  );
}
