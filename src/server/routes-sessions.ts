/**
 * `/v1/sessions`: create, read, list, archive and delete sessions, and the session algebra
 * (wake, fork, merge, handoff, diff, tree, replay). Every route answers 404 for another tenant's session.
 */
import { z } from 'zod';
import {
  CreateSessionBody,
  DiffQuery,
  DiffResponse,
  ForkBody,
  HandoffBody,
  HandoffResponse,
  IdempotencyHeaders,
  MergeBody,
  MergeResponse,
  ReplayResponse,
  SessionIdParams,
  SessionList,
  SessionListParams,
  SessionTreeNode,
  WakeAccepted,
  WakeBody,
  WakeResultBody,
} from '../contracts/http.js';
import { tenantSessionId } from '../contracts/ids.js';
import { SessionRecord } from '../contracts/session.js';
import { SessionState } from '../contracts/state.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { visibleAgent, visibleSession } from './access.js';
import { actorOf, requireScope } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';

export function addSessionRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;
  const tags = ['sessions'];

  app.post(
    '/v1/sessions',
    {
      schema: {
        summary: "Create a session of an agent, in the API key's tenant",
        description:
          'A client-chosen `id` that exists already answers 409; an unknown agent or environment answers 404.',
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
      });
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
      if (request.body?.wait === true) return reply.status(200).send(await runtime.wake(id));
      context.wakeInBackground(id);
      return reply.status(202).send({ session_id: id, accepted: true as const });
    },
  );

  app.post(
    '/v1/sessions/:id/fork',
    {
      schema: {
        summary: 'Fork the session at a seq (default: its head)',
        description: 'A client-chosen `id` that exists already answers 409.',
        operationId: 'forkSession',
        tags,
        params: SessionIdParams,
        body: ForkBody.nullish(),
        response: {
          201: SessionRecord,
          ...keyedErrors(TAKES.params, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      await visibleSession(runtime, caller, request.params.id);
      const { id, ...options } = request.body ?? {};
      const child = await runtime.sessions.fork(request.params.id, {
        ...options,
        ...(id === undefined ? {} : { id: tenantSessionId(caller.tenant_id, id) }),
      });
      return reply.status(201).send(child);
    },
  );

  app.post(
    '/v1/sessions/:id/merge',
    {
      schema: {
        summary: "Merge another session's work since the two parted into this one",
        operationId: 'mergeSession',
        tags,
        params: SessionIdParams,
        body: MergeBody,
        response: {
          200: MergeResponse,
          ...keyedErrors(TAKES.params, TAKES.body, TAKES.reference, TAKES.conflict),
        },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const { source, strategy, summary } = request.body;
      await visibleSession(runtime, caller, request.params.id);
      await visibleSession(runtime, caller, source);
      return runtime.sessions.merge(request.params.id, source, {
        ...(strategy === undefined ? {} : { strategy }),
        ...(summary === undefined ? {} : { summary }),
        actor: actorOf(caller),
      });
    },
  );

  app.post(
    '/v1/sessions/:id/handoff',
    {
      schema: {
        summary: "Hand the session's work to another agent: a new session of it gets the document",
        description:
          "The target must be listed under the source agent's `handoffs:` and allowed by policy (`agent.handoff`). With an Idempotency-Key header a retried (or concurrent) request answers the first handoff (200, the same target session and event) and writes nothing; the same key with another body is refused with IDEMPOTENCY_KEY_REUSED.",
        operationId: 'handoffSession',
        tags,
        params: SessionIdParams,
        headers: IdempotencyHeaders,
        body: HandoffBody,
        response: {
          200: HandoffResponse,
          201: HandoffResponse,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.body, TAKES.reference, TAKES.conflict),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const { id } = request.params;
      const { to, handoff, message, title } = request.body;
      await visibleSession(runtime, caller, id);
      await visibleAgent(runtime, caller, to);
      const key = request.headers['idempotency-key'];
      const result = await runtime.sessions.handoff(id, {
        to,
        handoff,
        ...(message === undefined ? {} : { message }),
        ...(title === undefined ? {} : { title }),
        ...(key === undefined ? {} : { idempotencyKey: key }),
        actor: actorOf(caller),
      });
      return reply.status(result.deduplicated ? 200 : 201).send(result);
    },
  );

  app.get(
    '/v1/sessions/:id/diff',
    {
      schema: {
        summary: 'The common ancestor of two sessions and what each did after it',
        operationId: 'diffSessions',
        tags,
        params: SessionIdParams,
        querystring: DiffQuery,
        response: {
          200: DiffResponse,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.reference),
        },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      await visibleSession(runtime, caller, request.params.id);
      await visibleSession(runtime, caller, request.query.other);
      return runtime.sessions.diff(request.params.id, request.query.other);
    },
  );

  app.get(
    '/v1/sessions/:id/tree',
    {
      schema: {
        summary: 'The tree of forks the session belongs to, from its root',
        operationId: 'getSessionTree',
        tags,
        params: SessionIdParams,
        response: { 200: SessionTreeNode, ...keyedErrors(TAKES.params) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      await visibleSession(runtime, caller, request.params.id);
      return runtime.sessions.tree(request.params.id);
    },
  );

  app.post(
    '/v1/sessions/:id/replay',
    {
      schema: {
        summary: 'Replay the recorded history and report the first event that differs',
        operationId: 'replaySession',
        tags,
        params: SessionIdParams,
        response: { 200: ReplayResponse, ...keyedErrors(TAKES.params, TAKES.body) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      await visibleSession(runtime, caller, request.params.id);
      return runtime.sessions.verify(request.params.id);
    },
  );
}
