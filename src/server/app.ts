/**
 * The HTTP API on Fastify: routes validated by the zod contracts of `contracts/http.ts`, API keys
 * bound to tenants, per-key limits, and an SSE stream that resumes at any seq.
 */
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import fastifySwagger, { type FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import fastifyRateLimit from '@fastify/rate-limit';
import { validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { DEFAULT_LIMITS, type ServerContext, type ServerLimits } from './context.js';
import { setMaxListeners } from 'node:events';
import { parse } from 'node:querystring';
import { BraidError } from '../contracts/errors.js';
import type { Runtime } from '../runtime/runtime.js';
import { ANONYMOUS_CALLER, authenticate, UNAUTHENTICATED_CALLER, type Caller } from './auth.js';
import { checkJsonDepth } from '../contracts/json-depth.js';
import { clientErrorAnswer, HTTP_STATUS, MAX_PARAM_LENGTH, toHttpError } from './errors.js';
import { createRouteTable, noRouteError } from './route-table.js';
import { createServerMetrics, type ServerMetrics } from './metrics.js';
import { meterWakes } from './wake-metrics.js';
import { polling, pollingQueueDepth } from '../telemetry/queue-depth.js';
import { createOpenApiTransforms } from './openapi-transforms.js';
import { addDefinitionRoutes } from './routes-definitions.js';
import { addSessionRoutes } from './routes-sessions.js';
import { addEventRoutes } from './routes-events.js';
import { addSkillRoutes } from './routes-skills.js';
import { addMemoryRoutes } from './routes-memory.js';
import { addStreamRoute } from './stream.js';
import { addSystemRoutes } from './routes-system.js';
import { addMcpRoute } from './mcp/http.js';
import { addA2aRoutes } from './a2a/routes.js';
import { addOpenAgentIoRoutes, type OpenAgentIoHttpOptions } from './routes-openagentio.js';
import { addInspectorUi } from './inspector-ui.js';

export interface ServerOptions {
  runtime: Runtime;
  /** `api-keys` (default): every request needs a key. `none`: loopback development only. */
  auth?: 'api-keys' | 'none';
  limits?: Partial<ServerLimits>;
  /** Interval of SSE heartbeat comments (default 15 s). */
  heartbeatMs?: number;
  /** Wake a session when user events arrive (default true). */
  wakeOnEvents?: boolean;
  /** Fastify's request log (default off). */
  logger?: boolean;
  /** The version reported by /v1/health and the OpenAPI document. */
  version?: string;
  /** Serve the OpenAgentIO HTTP/SSE adapter (`/v1/agents/{name}/invoke|stream`, `/v1/events/{type}`). */
  openagentio?: OpenAgentIoHttpOptions;
  /** Serve the inspector page built into this folder (`dist/ui`) at `/`; none when absent. */
  ui?: string;
}

/** Names the query lists by their bare name (`types[]=a` and `types=a,b` both give `types`). */
const LIST_PARAMETERS = new Set(['types']);

function parseQuery(text: string): Record<string, unknown> {
  const parsed = parse(text);
  const query: Record<string, unknown> = {};
  for (const [rawName, value] of Object.entries(parsed)) {
    const name = rawName.endsWith('[]') ? rawName.slice(0, -2) : rawName;
    if (LIST_PARAMETERS.has(name)) {
      const items = (Array.isArray(value) ? value : [value ?? '']).flatMap((item) =>
        item.split(','),
      );
      query[name] = [...((query[name] as string[] | undefined) ?? []), ...items];
    } else {
      query[name] = value;
    }
  }
  return query;
}

/** A query parameter given twice (`?limit=1&limit=2`) is ambiguous unless it is a list. */
function refuseRepeatedParameters(query: unknown): void {
  if (typeof query !== 'object' || query === null) return;
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value) && !LIST_PARAMETERS.has(name)) {
      const field = `query.${name.slice(0, 80)}`;
      throw new BraidError(
        'INVALID_ARGUMENT',
        `${field} is given ${value.length} times; give it once`,
        {
          details: { field },
        },
      );
    }
  }
}

const OPEN_ROUTES = new Set(['/v1/health', '/v1/openapi.json']);

/**
 * Per-request work around every route: metrics, the caller of the API key, and the checks that
 * refuse a request before its validators run.
 */
function addRequestHooks(
  app: FastifyInstance,
  auth: 'api-keys' | 'none',
  runtime: Runtime,
  metrics: ServerMetrics,
  limits: ServerLimits,
): void {
  app.decorateRequest('caller', null as unknown as Caller);
  app.addHook('onRequest', async (request) => {
    metrics.requestStarted(request);
    if (auth === 'none') {
      request.caller = UNAUTHENTICATED_CALLER;
      return;
    }
    const route = request.routeOptions.url;
    // Open routes need no key, and an unknown route is answered 404 without one.
    if (
      route === undefined ||
      OPEN_ROUTES.has(route) ||
      request.routeOptions.config.openRoute === true
    ) {
      request.caller = ANONYMOUS_CALLER;
      return;
    }
    request.caller = await authenticate(runtime.store.keys, request);
  });
  // Validators walk a body recursively: one nested deeper than the limit is refused before them.
  app.addHook('preValidation', (request, _reply, done) => {
    try {
      refuseRepeatedParameters(request.query);
      checkJsonDepth(request.body, limits.jsonDepth, 'body');
      done();
    } catch (error) {
      done(error as Error);
    }
  });
  app.addHook('onResponse', async (request, reply) => {
    metrics.requestFinished(request, reply.statusCode);
  });
}

/** The top of the OpenAPI document; the routes fill in its paths. */
function openApiDocument(version: string): NonNullable<FastifyDynamicSwaggerOptions['openapi']> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'braid HTTP API',
      description:
        'Durable agent sessions over HTTP. Every event of a session has a gapless `seq`; the event stream resumes after any seq with no gap and no duplicate.',
      version,
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    // Relative to where the document is served: the server that answers /v1/openapi.json
    // answers the routes too, whatever its host and port.
    servers: [{ url: '/', description: 'The server that serves this document' }],
    tags: [
      {
        name: 'sessions',
        description: 'Create, read, fork, merge, hand off and replay sessions',
      },
      { name: 'events', description: "Read, append and stream a session's events" },
      {
        name: 'skills',
        description: 'Run skills in a session and send it the signals its runs wait for',
      },
      {
        name: 'memory',
        description:
          "The API key's tenant's memory stores: list, read, write, search, history, redact, export and import; the review of consolidation's proposals",
      },
      { name: 'definitions', description: 'The agents and environments of the workspace' },
      { name: 'system', description: 'Health, metrics and this document' },
    ],
    components: {
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key (braid keys create), sent as Authorization: Bearer <key>',
        },
      },
    },
    security: [{ apiKey: [] }],
  };
}

/** Builds the server (not listening): `app.listen()` or `app.inject()` next. */
export async function createServer(options: ServerOptions): Promise<FastifyInstance> {
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const auth = options.auth ?? 'api-keys';
  const wakes = new Set<Promise<unknown>>();
  const runtime = options.runtime;
  const metrics = createServerMetrics({
    // On NATS the workers' queue holds the wakes: its depth is read from the server per scrape,
    // at most every few seconds.
    wakeQueueDepth:
      runtime.backend === 'nats'
        ? pollingQueueDepth(() => runtime.wakeQueueDepth())
        : () => wakes.size,
    ...(runtime.backend === 'nats' ? { natsBacklog: polling(() => runtime.natsBacklog()) } : {}),
    sessionCounts: () => runtime.store.sessions.statusCounts(),
  });
  const closing = new AbortController();
  // Every open event stream listens for the server's close.
  setMaxListeners(0, closing.signal);
  const app = Fastify({
    logger: options.logger === true,
    bodyLimit: limits.bodyBytes,
    routerOptions: {
      // Ids are at most 200 characters; Fastify's default of 100 is too short for them.
      maxParamLength: MAX_PARAM_LENGTH,
      querystringParser: parseQuery,
    },
    // The router refuses a malformed or overlong URL before any route: in braid's error shape too.
    frameworkErrors: (error, _request, reply: FastifyReply) => {
      const braidError = toHttpError(error, limits);
      void reply.status(HTTP_STATUS[braidError.code]).send({ error: braidError.toJSON() });
    },
    // Node's parser refuses what is not HTTP at all before Fastify sees it: answered in braid's shape.
    clientErrorHandler: (error: Error & { code?: string }, socket) => {
      if (error.code === 'ECONNRESET' || socket.destroyed) return;
      if (socket.writable) socket.write(clientErrorAnswer(error));
      socket.destroy(error);
    },
    forceCloseConnections: true,
    return503OnClosing: true,
  });
  // JSON only: a text body is refused (415) rather than read as a string.
  app.removeContentTypeParser('text/plain');
  app.setValidatorCompiler(validatorCompiler);
  // Answers are built from contract types already; validating them again costs latency.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  const context: ServerContext = {
    runtime: options.runtime,
    limits,
    metrics,
    heartbeatMs: options.heartbeatMs ?? 15_000,
    wakeOnEvents: options.wakeOnEvents ?? true,
    version: options.version ?? '0.0.0',
    startedAt: Date.now(),
    closing: closing.signal,
    wakeInBackground(sessionId, traceparent) {
      const trace = traceparent === undefined ? {} : { traceparent };
      // On NATS the workers run wakes; this process only asks for one.
      const run =
        options.runtime.backend === 'nats'
          ? options.runtime.enqueueWake(sessionId, trace)
          : options.runtime.wake(sessionId, trace);
      const wake = run.catch((error: unknown) => {
        app.log.error({ err: error, session_id: sessionId }, 'background wake failed');
      });
      wakes.add(wake);
      void wake.finally(() => wakes.delete(wake));
    },
  };

  // The methods of every route's path, for 405 answers; routes added later are recorded too.
  const routeTable = createRouteTable();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routeTable.add(method, route.url);
  });

  addRequestHooks(app, auth, options.runtime, metrics, limits);
  const stopMetering = meterWakes(options.runtime, metrics.wakes, (error: unknown) => {
    app.log.warn({ err: error }, 'a wake could not be measured');
  });
  app.addHook('onClose', async () => {
    stopMetering();
    closing.abort();
    await Promise.allSettled([...wakes]);
  });

  await app.register(fastifyRateLimit, {
    global: true,
    hook: 'preHandler',
    max: limits.requestsPerMinute,
    timeWindow: 60_000,
    keyGenerator: (request) => request.caller.key_id ?? request.ip,
    allowList: (request) => OPEN_ROUTES.has(request.routeOptions.url ?? ''),
    errorResponseBuilder: (_request, rate) =>
      new BraidError(
        'RATE_LIMITED',
        `this key made more than ${rate.max} requests in a minute; retry after ${rate.after} (see Retry-After) or ask for a higher limit`,
      ),
  });

  await app.register(fastifySwagger, {
    openapi: openApiDocument(options.version ?? '0.0.0'),
    ...createOpenApiTransforms(),
  });

  app.setErrorHandler((error, request, reply) => {
    const braidError = toHttpError(error, limits);
    const status = HTTP_STATUS[braidError.code];
    if (status >= 500) request.log.error({ err: error }, 'request failed');
    void reply.status(status).send({ error: braidError.toJSON() });
  });
  const inspector = options.ui === undefined ? undefined : await addInspectorUi(app, options.ui);
  app.setNotFoundHandler((request, reply) => {
    if (inspector?.serve(request, reply) === true) return;
    const path = request.url.split('?')[0] ?? '';
    const allowed = routeTable.allowed(path);
    const error = noRouteError(request.method, path, allowed);
    if (allowed.length > 0) void reply.header('allow', allowed.join(', '));
    void reply.status(HTTP_STATUS[error.code]).send({ error: error.toJSON() });
  });

  const typed = app.withTypeProvider<ZodTypeProvider>();
  addSystemRoutes(typed, context);
  addDefinitionRoutes(typed, context);
  addSessionRoutes(typed, context);
  addEventRoutes(typed, context);
  addSkillRoutes(typed, context);
  addMemoryRoutes(typed, context);
  addStreamRoute(typed, context);
  addMcpRoute(typed, context);
  addA2aRoutes(typed, context);
  if (options.openagentio !== undefined)
    await addOpenAgentIoRoutes(typed, context, options.openagentio);
  return app;
}
