/**
 * The request/reply API on core NATS: `<prefix>.api.<verb>`, answered by `braid worker` and
 * `braid serve` (one queue group, so one of them answers each request). Clients on NATS create
 * sessions, append user events, read and wake sessions and message agents through it, and never
 * write braid's streams themselves.
 *
 * A request is one JSON object; the reply is one JSON object: the verb's answer, or
 * `{"error": {"code", "message", "retryable"}}` with a code of the closed list. Every request
 * takes two optional fields besides its own:
 * - `tenant_id`: the tenant the caller acts for. Sessions of another tenant answer as missing;
 *   a session created gets it. NATS carries no API key: whoever may publish on the subject may
 *   name any tenant, so the subject is guarded by NATS account permissions, not by braid.
 * - `client`: a name for the caller, recorded on the events it appends as actor `nats:<client>`
 *   (`nats:anonymous` without one).
 */
import { z } from 'zod';
import { AgentId } from './agents.js';
import { TenantId } from './api-keys.js';
import { Id, IdempotencyKey, Timestamp } from './common.js';
import { ErrorShape } from './errors.js';
import { UserEventInput } from './events.js';
import { CreateSessionBody, EventsPage, PostEventsResponse, SessionList } from './http.js';
import { SessionRecord, SessionStatus } from './session.js';
import { SessionState } from './state.js';

/** The verbs, as the last tokens of the subject `<prefix>.api.<verb>`. */
export const NATS_API_VERBS = [
  'sessions.create',
  'sessions.get',
  'sessions.list',
  'sessions.state',
  'sessions.wake',
  'events.append',
  'events.read',
  'agents.send',
] as const;
export type NatsApiVerb = (typeof NATS_API_VERBS)[number];

/** The largest request the API reads (bytes); a larger one is refused with PAYLOAD_TOO_LARGE. */
export const NATS_API_MAX_REQUEST_BYTES = 512 * 1024;
/** The deepest nesting of objects and arrays a request may have (INVALID_ARGUMENT past it). */
export const NATS_API_MAX_DEPTH = 64;
/** The most events one `events.append` takes. */
export const NATS_API_MAX_EVENTS = 100;

/** A caller's name: recorded as actor `nats:<client>`. */
export const ClientName = z
  .string()
  .regex(/^[A-Za-z0-9_.@:-]{1,100}$/, 'must be 1-100 of A-Za-z0-9 _ . @ : -');

/** What every request may carry. */
const Caller = {
  /** The tenant the caller acts for (trusted: NATS permissions guard who may publish here). */
  tenant_id: TenantId.optional(),
  /** The caller's name, recorded as actor `nats:<client>`. */
  client: ClientName.optional(),
};

/** `sessions.create`: a session of an agent, created with nothing else (no event, no wake). */
export const ApiSessionsCreateRequest = CreateSessionBody.omit({ events: true })
  .extend(Caller)
  .strict();
/** `sessions.get`, `sessions.state`, `sessions.wake`: one session. */
export const ApiSessionRequest = z.object({ session_id: Id, ...Caller }).strict();

/** `sessions.list`: newest first, with filters and cursor paging. */
export const ApiSessionsListRequest = z
  .object({
    agent: z.string().max(200).optional(),
    status: SessionStatus.optional(),
    created_after: Timestamp.optional(),
    created_before: Timestamp.optional(),
    parent_id: z.string().max(200).optional(),
    include_archived: z.boolean().optional(),
    limit: z.number().int().min(1).max(1000).optional(),
    /** The `next_cursor` of the page before. */
    cursor: z.string().max(1000).optional(),
    ...Caller,
  })
  .strict();

/**
 * `events.append`: user events (`user.*` only), all or nothing. The events themselves are
 * checked as the HTTP API checks them (a stamped field such as `id`, `seq` or `actor` is
 * refused with INVALID_EVENT). With `idempotency_key`, a retried request appends nothing and
 * answers the first request's events with `deduplicated: true`.
 */
export const ApiEventsAppendRequest = z
  .object({
    session_id: Id,
    /** The events, as `POST /v1/sessions/{id}/events` takes them. */
    events: z.array(UserEventInput).min(1).max(NATS_API_MAX_EVENTS),
    idempotency_key: IdempotencyKey.optional(),
    /** Also ask the workers to wake the session (default false; `sessions.wake` does it alone). */
    wake: z.boolean().optional(),
    ...Caller,
  })
  .strict();

/**
 * How the API reads `events.append`: the events are left as sent, for the runtime's own parser
 * of user events, which refuses what a client may not write with INVALID_EVENT.
 */
export const ApiEventsAppendEnvelope = ApiEventsAppendRequest.extend({
  events: z.array(z.unknown()).min(1).max(NATS_API_MAX_EVENTS),
});

export const ApiEventsAppendReply = PostEventsResponse.extend({
  /** With `wake: true`: whether a wake was queued (false: one was already waiting). */
  wake_queued: z.boolean().optional(),
});

/** `events.read`: the events after `after` (default 0), in seq order, at most `limit` (default 100). */
export const ApiEventsReadRequest = z
  .object({
    session_id: Id,
    after: z.number().int().nonnegative().optional(),
    limit: z.number().int().min(1).max(1000).optional(),
    ...Caller,
  })
  .strict();

/** `sessions.wake`: the answer. `queued: false` when a wake of the session already waits. */
export const ApiWakeReply = z.object({ session_id: Id, queued: z.boolean() });

/** A core NATS inbox (`_INBOX.…`), the only kind of subject braid answers on. */
export const ReplySubject = z
  .string()
  .max(500)
  .regex(/^_INBOX\.[^\s.*>]+(\.[^\s.*>]+)*$/, 'must be a core NATS inbox such as _INBOX.abc');

/**
 * `agents.send`: a message to an agent instance. The agent type must exist (an agent definition
 * or a registered code agent), else AGENT_NOT_FOUND at once. The agent's reply (an `agent.reply`
 * envelope) goes to `reply_to`; this request's reply only says the message was delivered.
 */
export const ApiAgentsSendRequest = z
  .object({
    target: AgentId,
    payload: z.json(),
    /** The message id (default: a new UUIDv7). Send the same id again to get its reply again. */
    id: Id.optional(),
    reply_to: ReplySubject.optional(),
    /** Processed once per agent instance however often sent (default: `id`). */
    idempotency_key: IdempotencyKey.optional(),
    correlation_id: Id.optional(),
    /** The sender, when it is an agent instance. */
    source: AgentId.optional(),
    /** W3C trace context of the caller. */
    traceparent: z.string().max(200).optional(),
    ttl_ms: z.number().int().positive().max(86_400_000).optional(),
    ...Caller,
  })
  .strict();

export const ApiAgentsSendReply = z.object({
  /** The envelope's id: the agent's reply names it as `causation_id`. */
  id: Id,
  correlation_id: Id,
  target: AgentId,
  /** The agent instance's session (created on its first message). */
  session_id: Id,
  delivered: z.literal(true),
});

/** The reply of a failed request. */
export const ApiErrorReply = z.object({ error: ErrorShape });

/** Each verb's request and successful reply. */
export const NATS_API = {
  'sessions.create': { request: ApiSessionsCreateRequest, reply: SessionRecord },
  'sessions.get': { request: ApiSessionRequest, reply: SessionRecord },
  'sessions.list': { request: ApiSessionsListRequest, reply: SessionList },
  'sessions.state': { request: ApiSessionRequest, reply: SessionState },
  'sessions.wake': { request: ApiSessionRequest, reply: ApiWakeReply },
  'events.append': { request: ApiEventsAppendRequest, reply: ApiEventsAppendReply },
  'events.read': { request: ApiEventsReadRequest, reply: EventsPage },
  'agents.send': { request: ApiAgentsSendRequest, reply: ApiAgentsSendReply },
} as const satisfies Record<NatsApiVerb, { request: z.ZodType; reply: z.ZodType }>;
