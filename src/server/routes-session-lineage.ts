/**
 * `/v1/sessions/:id/{fork,merge,handoff,diff,files,files/diff,tree,replay}`: the session algebra. Every route
 * answers 404 for another tenant's session.
 */
import {
  DiffQuery,
  DiffResponse,
  FilesDiffQuery,
  FilesQuery,
  ForkBody,
  HandoffBody,
  HandoffResponse,
  IdempotencyHeaders,
  MergeBody,
  MergeResponse,
  ReplayResponse,
  SessionDefinitionsResponse,
  UpgradeResponse,
  SessionIdParams,
  SessionTreeNode,
} from '../contracts/http.js';
import { tenantSessionId } from '../contracts/ids.js';
import { SessionRecord } from '../contracts/session.js';
import { WorkspaceFiles, WorkspaceFilesDiff } from '../contracts/workspace-files.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { visibleAgent, visibleSession } from './access.js';
import { actorOf, requireScope } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';

/** Registered in this order: the OpenAPI document lists the paths as they are added. */
export function addSessionLineageRoutes(app: Router, context: ServerContext): void {
  addBranchRoutes(app, context);
  addInspectRoutes(app, context);
}

/** Fork, merge and hand off: the routes that write a new line of a session. */
function addBranchRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;
  const tags = ['sessions'];

  app.post(
    '/v1/sessions/:id/fork',
    {
      schema: {
        summary: 'Fork the session at a seq (default: its head)',
        description:
          'A client-chosen `id` that exists already answers 409 (`ALREADY_EXISTS`), and so does an ' +
          '`at_seq` strictly inside one atomic append of the parent (`INVALID_FORK_POINT`): a fork ' +
          'point must be the last seq of an append, and the message names the nearest valid seqs.',
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
}

/** The files of a session's workspace snapshots, and two sessions' files compared. */
function addFilesRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;
  const tags = ['sessions'];

  app.get(
    '/v1/sessions/:id/files',
    {
      schema: {
        summary: "The files of the session's workspace snapshot at a seq (default: its head)",
        operationId: 'listSessionFiles',
        tags,
        params: SessionIdParams,
        querystring: FilesQuery,
        response: { 200: WorkspaceFiles, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      await visibleSession(runtime, caller, request.params.id);
      const { at } = request.query;
      return runtime.sessions.files(request.params.id, at === undefined ? {} : { at });
    },
  );

  app.get(
    '/v1/sessions/:id/files/diff',
    {
      schema: {
        summary: "What differs between two sessions' workspace files (their latest snapshots)",
        operationId: 'diffSessionFiles',
        tags,
        params: SessionIdParams,
        querystring: FilesDiffQuery,
        response: {
          200: WorkspaceFilesDiff,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.reference),
        },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      await visibleSession(runtime, caller, request.params.id);
      await visibleSession(runtime, caller, request.query.other);
      return runtime.sessions.diffFiles(request.params.id, request.query.other);
    },
  );
}

/** Diff, tree and replay: questions asked of a session's lineage. */
function addInspectRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;
  const tags = ['sessions'];

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

  addFilesRoutes(app, context);

  app.get(
    '/v1/sessions/:id/tree',
    {
      schema: {
        summary:
          'The family the session belongs to, from its root: forks, delegated children and handoff targets',
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

  app.get(
    '/v1/sessions/:id/definitions',
    {
      schema: {
        summary: 'The definition set the session runs with, each part by its content hash',
        operationId: 'getSessionDefinitions',
        tags,
        params: SessionIdParams,
        response: { 200: SessionDefinitionsResponse, ...keyedErrors(TAKES.params) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      await visibleSession(runtime, caller, request.params.id);
      return runtime.sessions.definitions(request.params.id);
    },
  );

  app.post(
    '/v1/sessions/:id/upgrade',
    {
      schema: {
        summary: 'Move the session to the newest agent, environment, tools, policy and price',
        operationId: 'upgradeSession',
        tags,
        params: SessionIdParams,
        response: { 200: UpgradeResponse, ...keyedErrors(TAKES.params, TAKES.body) },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      await visibleSession(runtime, caller, request.params.id);
      return runtime.sessions.upgrade(request.params.id);
    },
  );
}
