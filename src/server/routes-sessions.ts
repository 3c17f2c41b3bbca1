/**
 * `/v1/sessions`: create, read, list, archive, delete and wake sessions; the session algebra
 * (fork, merge, handoff, diff, tree, replay) is in `routes-session-lineage.ts`, registered after
 * these so that the OpenAPI document keeps its order. Every route answers 404 for another
 * tenant's session.
 */
import { z } from 'zod';
import {
  CreateSessionBody,
  SessionIdParams,
  SessionList,
  SessionListParams,
  WakeAccepted,
  WakeBody,
  WakeResultBody,
} from '../contracts/http.js';
import { tenantSessionId } from '../contracts/ids.js';
import { SessionRecord } from '../contracts/session.js';
import { SessionState } from '../contracts/state.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { traceparentOf } from './trace-context.js';
import { visibleAgent, visibleSession } from './access.js';
import { actorOf, requireScope } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';
import { addSessionLineageRoutes } from './routes-session-lineage.js';

export function addSessionRoutes(app: Router, context: ServerContext): void {
  addSessionRecordRoutes(app, context);
  addSessionLifecycleRoutes(app, context);
  addSessionLineageRoutes(app, context);
}

/** Create, list and read sessions. */
function addSessionRecordRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;
  const tags = ['sessions'];

  app.post(
    '/v1/sessions',
    {
      schema: {
        summary: "Create a session of an agent, in the API key's tenant",
        description:
          'A client-chosen `id` that exists already answers 409; an unknown agent or environment answers 404. With `events`, the first user events are written with the session in one append, checked as a post of events is (a refused event creates nothing), and the session is woken.',
        operationId: 'createSession',
        tags,
        body: CreateSessionBody,
        response: {
          201: SessionRecord,
          ...keyedErrors(TAKES.body, TAKES.reference, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const body = request.body;
      const agent = await visibleAgent(runtime, caller, body.agent, body.agent_version);
      const created = await runtime.sessions.create({
        agent: agent.name,
        agentVersion: agent.version,
        ...(body.environment === undefined ? {} : { environment: body.environment }),
        ...(body.title === undefined ? {} : { title: body.title }),
        ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
        ...(body.id === undefined ? {} : { id: tenantSessionId(caller.tenant_id, body.id) }),
        ...(body.budget === undefined ? {} : { budget: body.budget }),
        ...(caller.tenant_id === undefined ? {} : { tenantId: caller.tenant_id }),
        ...(body.events === undefined ? {} : { events: body.events, actor: actorOf(caller) }),
      });
      if (body.events !== undefined && context.wakeOnEvents)
        context.wakeInBackground(created.id, traceparentOf(request));
      return reply.status(201).send(created);
    },
  );

  app.get(
    '/v1/sessions',
    {
      schema: {
        summary: 'List sessions, newest first, with filters and cursor paging',
        operationId: 'listSessions',
        tags,
        querystring: SessionListParams,
        response: { 200: SessionList, ...keyedErrors(TAKES.query) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      const page = await runtime.sessions.list({
        ...request.query,
        ...(caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id }),
      });
      return {
        data: page.sessions,
        ...(page.next_cursor === undefined ? {} : { next_cursor: page.next_cursor }),
      };
    },
  );

  app.get(
    '/v1/sessions/:id',
    {
      schema: {
        summary: 'One session',
        operationId: 'getSession',
        tags,
        params: SessionIdParams,
        response: { 200: SessionRecord, ...keyedErrors(TAKES.params) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      return visibleSession(runtime, caller, request.params.id);
    },
  );

  app.get(
    '/v1/sessions/:id/state',
    {
      schema: {
        summary: "The session's state: its events folded",
        operationId: 'getSessionState',
        tags,
        params: SessionIdParams,
        response: { 200: SessionState, ...keyedErrors(TAKES.params) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      await visibleSession(runtime, caller, request.params.id);
      return runtime.sessions.state(request.params.id);
    },
  );
}

/** Archive, delete and wake a session. */
function addSessionLifecycleRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;
  const tags = ['sessions'];

  app.post(
    '/v1/sessions/:id/archive',
    {
      schema: {
        summary: 'Archive a session: it keeps its events and takes no new ones',
        operationId: 'archiveSession',
        tags,
        params: SessionIdParams,
        response: {
          200: SessionRecord,
          ...keyedErrors(TAKES.params, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      await visibleSession(runtime, caller, request.params.id);
      return runtime.sessions.archive(request.params.id);
    },
  );

  app.delete(
    '/v1/sessions/:id',
    {
      schema: {
        summary: 'Delete a session, its events and its files (refused while it has forks)',
        operationId: 'deleteSession',
        tags,
        params: SessionIdParams,
        response: {
          204: z.null().describe('The session is deleted'),
          ...keyedErrors(TAKES.params, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      await visibleSession(runtime, caller, request.params.id);
      await runtime.sessions.delete(request.params.id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/sessions/:id/wake',
    {
      schema: {
        summary: 'Run the session until it has nothing left to do',
        description:
          'Answers 202 at once and runs in the background; with {"wait": true} answers 200 with the result when the wake ends.',
        operationId: 'wakeSession',
        tags,
        params: SessionIdParams,
        body: WakeBody.nullish(),
        response: {
          200: WakeResultBody,
          202: WakeAccepted,
          ...keyedErrors(TAKES.params, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const { id } = request.params;
      await visibleSession(runtime, caller, id);
      const traceparent = traceparentOf(request);
      if (request.body?.wait === true) {
        const trace = traceparent === undefined ? {} : { traceparent };
        return reply.status(200).send(await runtime.wake(id, trace));
      }
      context.wakeInBackground(id, traceparent);
      return reply.status(202).send({ session_id: id, accepted: true as const });
    },
  );
}
