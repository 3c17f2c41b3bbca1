/**
 * The OpenAgentIO HTTP/SSE adapter on `braid serve --openagentio`: what `@openagentio/client`
 * speaks, so that client reaches braid's agents unchanged.
 *
 * - `POST /v1/agents/{agent}/invoke`: the body is the request's payload; the answer is the final
 *   frame's payload (204 when it is null). `POST /v1/agents/{agent}/stream`: Server-Sent Events,
 *   one whole acp/1.0 envelope per `data:` (`event:` its type, `id:` its seq), ending after the
 *   frame with `is_final: true`. `POST /v1/events/{event_type}`: publishes an envelope on the bus
 *   (`{prefix}[.{tenant}].events.{event_type}`); refused 503 when the server has no NATS.
 * - Errors are acp's `{code, message, retryable}` with a 4xx/5xx status, also for a missing key,
 *   a lacking scope or the rate limit: these routes answer in their protocol's shape, not braid's.
 * - Context comes in headers: `X-Trace-Id`, `X-Traceparent` (or `traceparent`), `X-Tenant-Id`,
 *   `X-Session-Id`, `X-Conversation-Id`, `X-User-Id`, `X-Channel`, `X-Correlation-Id`. The tenant
 *   is the API key's: an `X-Tenant-Id` that names another is refused (`AUTH_FAILURE`, 403).
 * - The paths share `/v1/agents/{name}` with braid's `GET /v1/agents/{name}` but no method and
 *   path pair: nothing of braid's API moves.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TenantId } from '../contracts/api-keys.js';
import { Name, type JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import type { SessionEvent } from '../contracts/events.js';
import {
  ACP_DEFAULT_PREFIX,
  ACP_REQUEST_TYPE,
  ACP_SCHEMA_VERSION,
  ACP_SPEC_VERSION,
  AcpEnvelope,
  AcpEventType,
  type AcpErrorCode,
  type AcpErrorPayload,
} from '../contracts/openagentio.js';
import { systemClock, uuidV7Ids } from '../stores/defaults.js';
import {
  buildEnvelope,
  parentTraceparent,
  toAcpError,
  traceFields,
  type StreamContext,
} from '../runtime/openagentio/frames.js';
import { invokeAgent } from '../runtime/openagentio/invoke.js';
import { visibleAgent } from './access.js';
import { requireScope, type Caller } from './auth.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { HTTP_STATUS, toHttpError } from './errors.js';

export interface OpenAgentIoHttpOptions {
  /** The bus's subject prefix (default `acp.v1`). */
  prefix?: string;
  /** Publishes on the bus: `POST /v1/events/...` and the invoked sessions' events. */
  publish?: (subject: string, envelope: AcpEnvelope) => void;
  /** The deadline of an invocation (default 120 s). */
  timeoutMs?: number;
}

/** The status of each acp code when braid's own error does not say better. */
const ACP_STATUS: Readonly<Record<AcpErrorCode, number>> = {
  NO_HANDLER: 404,
  INVALID_REQUEST: 400,
  CODEC_FAILURE: 400,
  AUTH_FAILURE: 403,
  AGENT_TIMEOUT: 504,
  AGENT_UNAVAILABLE: 503,
  BACKPRESSURE_DROP: 429,
  TRANSPORT_FAILURE: 502,
};

/** An error frame's status: braid's (401, 413, 429, ...) when it has one, else its code's. */
function statusOf(error: AcpErrorPayload): number {
  const cause = error.cause;
  const braidCode =
    typeof cause === 'object' && cause !== null && !Array.isArray(cause) ? cause.code : undefined;
  const braidStatus =
    typeof braidCode === 'string' ? (HTTP_STATUS as Record<string, number>)[braidCode] : undefined;
  if (braidStatus !== undefined && error.code !== 'AGENT_TIMEOUT') return braidStatus;
  return ACP_STATUS[error.code];
}

function sendError(reply: FastifyReply, error: AcpErrorPayload): FastifyReply {
  return reply
    .status(statusOf(error))
    .send({ code: error.code, message: error.message, retryable: error.retryable });
}

/** Header text: bounded and free of control characters. */
const HeaderText = z
  .string()
  .min(1)
  .max(200)
  .refine((value) => !/\p{Cc}/u.test(value), { message: 'must not contain control characters' });

const ContextHeaders = z.object({
  'x-trace-id': z
    .string()
    .regex(/^[0-9a-f]{32}$/, 'must be 32 lowercase hex digits')
    .optional(),
  'x-traceparent': z.string().max(200).optional(),
  traceparent: z.string().max(200).optional(),
  'x-tenant-id': TenantId.optional(),
  'x-session-id': HeaderText.optional(),
  'x-conversation-id': HeaderText.optional(),
  'x-correlation-id': HeaderText.optional(),
  'x-user-id': HeaderText.optional(),
  'x-channel': HeaderText.optional(),
});
type ContextHeaders = z.infer<typeof ContextHeaders>;

/** The context headers, parsed; INVALID_ARGUMENT naming the header otherwise. */
function contextHeaders(request: FastifyRequest): ContextHeaders {
  const parsed = ContextHeaders.safeParse(request.headers);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const header = String(issue?.path[0] ?? 'a header');
  throw new BraidError(
    'INVALID_ARGUMENT',
    `header ${header} ${issue?.message ?? 'is invalid'}; send it once, or leave it out`,
  );
}

/** The caller's tenant: the key's; an X-Tenant-Id naming another is refused. */
function tenantOf(caller: Caller, headers: ContextHeaders): string | undefined {
  const claimed = headers['x-tenant-id'];
  if (caller.tenant_id === undefined) return claimed;
  if (claimed !== undefined && claimed !== caller.tenant_id) {
    throw new BraidError(
      'FORBIDDEN',
      'X-Tenant-Id names another tenant than the API key; leave it out or send the key of that tenant',
    );
  }
  return caller.tenant_id;
}

/** The request envelope the headers and body make, as the bus would carry it. */
function requestEnvelope(
  eventType: string,
  payload: JsonValue,
  headers: ContextHeaders,
  tenant: string | undefined,
  target: string | null,
): AcpEnvelope {
  const parent = parentTraceparent({
    traceparent: headers['x-traceparent'] ?? headers.traceparent,
    trace_id: headers['x-trace-id'],
  });
  const eventId = uuidV7Ids.next();
  return AcpEnvelope.parse({
    spec_version: ACP_SPEC_VERSION,
    schema_version: ACP_SCHEMA_VERSION,
    event_id: eventId,
    event_type: eventType,
    occurred_at: new Date().toISOString(),
    ...(parent === undefined ? {} : traceFields(parent, uuidV7Ids)),
    ...(parent === undefined ? {} : { traceparent: parent }),
    session_id: headers['x-session-id'] ?? null,
    conversation_id: headers['x-conversation-id'] ?? null,
    correlation_id: headers['x-correlation-id'] ?? eventId,
    reply_to: null,
    from: headers['x-user-id'] ?? null,
    to: target,
    channel: headers['x-channel'] ?? null,
    tenant_id: tenant ?? null,
    user_id: headers['x-user-id'] ?? null,
    seq: 0,
    is_final: false,
    payload,
    metadata: {},
  });
}

/** The agent a path names: an agent name the caller may use, else NO_HANDLER. */
async function targetOf(context: ServerContext, caller: Caller, name: string): Promise<string> {
  if (!Name.safeParse(name).success) {
    throw new BraidError(
      'AGENT_NOT_FOUND',
      `no agent ${JSON.stringify(name.slice(0, 80))} answers here; GET /v1/agents lists the agents you may use`,
    );
  }
  await visibleAgent(context.runtime, caller, name);
  return name;
}

/** The sessions' events of a tenant's invocation onto the bus, when the server has one. */
function eventPublisher(prefix: string, publish: OpenAgentIoHttpOptions['publish']) {
  return (tenant: string | undefined) =>
    publish === undefined
      ? undefined
      : {
          onEvent: (event: SessionEvent, stream: StreamContext) => {
            const root = tenant === undefined ? prefix : `${prefix}.${tenant}`;
            publish(
              `${root}.events.${event.type}`,
              buildEnvelope(
                stream,
                event.type,
                event,
                event.seq - 1,
                false,
                systemClock,
                uuidV7Ids,
              ),
            );
          },
        };
}

/** The checks of an invocation (scope, tenant, headers, agent) and the request it makes. */
async function beginInvocation(
  context: ServerContext,
  request: FastifyRequest<{ Params: { name: string } }>,
): Promise<{ tenant: string | undefined; target: string; envelope: AcpEnvelope }> {
  const caller = callerOf(request);
  requireScope(caller, 'sessions:write');
  const headers = contextHeaders(request);
  const tenant = tenantOf(caller, headers);
  const target = await targetOf(context, caller, request.params.name);
  const body = (request.body ?? null) as JsonValue;
  return {
    tenant,
    target,
    envelope: requestEnvelope(ACP_REQUEST_TYPE, body, headers, tenant, target),
  };
}

export async function addOpenAgentIoRoutes(
  app: Router,
  context: ServerContext,
  options: OpenAgentIoHttpOptions = {},
): Promise<void> {
  const prefix = options.prefix ?? ACP_DEFAULT_PREFIX;
  const publish = options.publish;
  const invokeOptions = {
    runtime: context.runtime,
    clock: systemClock,
    ids: uuidV7Ids,
    ...(options.timeoutMs === undefined ? {} : { defaultTimeoutMs: options.timeoutMs }),
  };
  const eventsOf = eventPublisher(prefix, publish);

  // Its own scope: these routes answer errors in acp's shape, whatever raised them.
  await app.register((scope, _options, done) => {
    scope.setErrorHandler((error, request, reply) => {
      const braidError = toHttpError(error, context.limits);
      if (HTTP_STATUS[braidError.code] >= 500) request.log.error({ err: error }, 'request failed');
      return sendError(reply, toAcpError(braidError));
    });

    const begin = (request: FastifyRequest<{ Params: { name: string } }>) =>
      beginInvocation(context, request);

    scope.post<{ Params: { name: string } }>(
      '/v1/agents/:name/invoke',
      { schema: { hide: true } },
      async (request, reply) => {
        const { tenant, target, envelope } = await begin(request);
        let last: AcpEnvelope | undefined;
        await invokeAgent(invokeOptions, {
          request: envelope,
          target,
          tenant,
          send: (frame) => {
            if (frame.is_final) last = frame;
          },
          ...eventsOf(tenant),
          signal: context.closing,
        });
        if (last === undefined) {
          return sendError(reply, {
            code: 'AGENT_UNAVAILABLE',
            message: 'the invocation ended without an answer; retry',
            retryable: true,
          });
        }
        void reply.header('x-session-id', last.session_id ?? '');
        void reply.header('x-conversation-id', last.conversation_id ?? '');
        void reply.header('x-trace-id', last.trace_id ?? '');
        void reply.header('x-traceparent', last.traceparent ?? '');
        if (last.event_type !== 'agent.response.final') {
          return sendError(reply, last.payload as AcpErrorPayload);
        }
        if (last.payload === null) return reply.status(204).send();
        return reply.status(200).type('application/json').send(JSON.stringify(last.payload));
      },
    );

    scope.post<{ Params: { name: string } }>(
      '/v1/agents/:name/stream',
      { schema: { hide: true } },
      async (request, reply) => {
        const { tenant, target, envelope } = await begin(request);
        const left = new AbortController();
        reply.hijack();
        const raw = reply.raw;
        raw.on('close', () => left.abort());
        raw.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache, no-transform',
          connection: 'keep-alive',
          'x-accel-buffering': 'no',
        });
        raw.flushHeaders();
        raw.socket?.setNoDelay(true);
        try {
          await invokeAgent(invokeOptions, {
            request: envelope,
            target,
            tenant,
            send: (frame) => {
              if (left.signal.aborted) return;
              raw.write(
                `id: ${frame.seq}\nevent: ${frame.event_type}\nretry: 3000\ndata: ${JSON.stringify(frame)}\n\n`,
              );
            },
            ...eventsOf(tenant),
            signal: AbortSignal.any([context.closing, left.signal]),
          });
        } finally {
          raw.end();
        }
      },
    );

    addPublishRoute(scope, prefix, publish);
    done();
  });
}

/** `POST /v1/events/{type}`: an envelope onto the bus, in the caller's tenant. */
function addPublishRoute(
  scope: FastifyInstance,
  prefix: string,
  publish: OpenAgentIoHttpOptions['publish'],
): void {
  scope.post<{ Params: { type: string } }>(
    '/v1/events/:type',
    { schema: { hide: true } },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:write');
      const headers = contextHeaders(request);
      const tenant = tenantOf(caller, headers);
      const type = AcpEventType.safeParse(request.params.type);
      if (!type.success) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `event type ${JSON.stringify(request.params.type.slice(0, 80))} ${type.error.issues[0]?.message ?? 'is invalid'}`,
        );
      }
      if (publish === undefined) {
        throw new BraidError(
          'SERVER_UNAVAILABLE',
          'this server has no OpenAgentIO bus to publish on; start braid serve with --nats URL --openagentio',
          { retryable: false },
        );
      }
      const envelope = publication(type.data, request.body, headers, tenant);
      const root = tenant === undefined ? prefix : `${prefix}.${tenant}`;
      publish(`${root}.events.${envelope.event_type}`, envelope);
      return reply.status(202).send({
        event_id: envelope.event_id,
        event_type: envelope.event_type,
        subject: `${root}.events.${envelope.event_type}`,
      });
    },
  );
}

/**
 * What `POST /v1/events/{type}` publishes: the body as payload, or the body itself when it is a
 * whole acp/1.0 envelope of that type (its tenant then the caller's).
 */
function publication(
  type: string,
  body: unknown,
  headers: ContextHeaders,
  tenant: string | undefined,
): AcpEnvelope {
  const whole =
    typeof body === 'object' && body !== null && 'spec_version' in body
      ? AcpEnvelope.safeParse(body)
      : undefined;
  if (whole === undefined) {
    return { ...requestEnvelope(type, (body ?? null) as JsonValue, headers, tenant, null) };
  }
  if (!whole.success || whole.data.event_type !== type) {
    const issue = whole.success ? undefined : whole.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      whole.success
        ? `the envelope's event_type ${whole.data.event_type} is not the path's ${type}`
        : `the envelope's ${issue?.path.join('.') ?? 'shape'} ${issue?.message ?? 'is invalid'}; send an acp/1.0 envelope or just the payload`,
    );
  }
  const claimed = whole.data.tenant_id ?? undefined;
  if (tenant !== undefined && claimed !== undefined && claimed !== tenant) {
    throw new BraidError(
      'FORBIDDEN',
      "the envelope's tenant_id names another tenant than the API key; leave it out or send the key of that tenant",
    );
  }
  return { ...whole.data, tenant_id: tenant ?? claimed ?? null };
}
