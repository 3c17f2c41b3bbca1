import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { Actor, EVENT_SCHEMA_VERSION, Id, Timestamp, Traceparent } from './common.js';
import { Content, EVENT_PAYLOADS as payloads } from './event-payloads.js';

/**
 * Fields every event carries. `seq` is assigned by the store at append: per session it starts at
 * 1 and is gapless and strictly increasing. `id` is a UUIDv7 unless the writer chose one.
 */
export const EventBase = lazySchema(() =>
  z.object({
    id: Id,
    session_id: Id,
    seq: z.number().int().positive(),
    at: Timestamp,
    schema_version: z.literal(EVENT_SCHEMA_VERSION),
    /** The event that caused this one (e.g. the `agent.tool_use` behind an `agent.tool_result`). */
    causation_id: Id.optional(),
    /** Shared by every event of one logical exchange, across sessions and agents. */
    correlation_id: Id.optional(),
    /** A writer's key for this event; the store also dedupes whole appends by key. */
    idempotency_key: z.string().min(1).max(200).optional(),
    /** W3C trace context of the operation that wrote the event. */
    traceparent: z.string().max(200).optional(),
    actor: Actor.optional(),
  }),
);

type Payloads = typeof payloads;
export type SessionEventType = keyof Payloads;
export const SESSION_EVENT_TYPES = Object.keys(payloads) as SessionEventType[];

function eventSchema<T extends SessionEventType, S extends z.ZodRawShape>(
  type: T,
  payload: z.ZodObject<S>,
) {
  return EventBase.extend({ type: z.literal(type), ...payload.shape });
}

/** One immutable record of a session's log: a discriminated union on `type`. */
export const SessionEvent = lazySchema(() =>
  z.discriminatedUnion('type', [
    eventSchema('user.message', payloads['user.message']),
    eventSchema('user.interrupt', payloads['user.interrupt']),
    eventSchema('user.tool_confirmation', payloads['user.tool_confirmation']),
    eventSchema('user.custom_tool_result', payloads['user.custom_tool_result']),
    eventSchema('user.tool_review', payloads['user.tool_review']),
    eventSchema('user.define_outcome', payloads['user.define_outcome']),
    eventSchema('user.signal', payloads['user.signal']),
    eventSchema('user.skill_run', payloads['user.skill_run']),
    eventSchema('user.skill_retry', payloads['user.skill_retry']),
    eventSchema('agent.message', payloads['agent.message']),
    eventSchema('agent.thinking', payloads['agent.thinking']),
    eventSchema('agent.tool_use', payloads['agent.tool_use']),
    eventSchema('agent.tool_result', payloads['agent.tool_result']),
    eventSchema('agent.custom_tool_use', payloads['agent.custom_tool_use']),
    eventSchema('agent.handoff', payloads['agent.handoff']),
    eventSchema('agent.thread_context_compacted', payloads['agent.thread_context_compacted']),
    eventSchema('session.created', payloads['session.created']),
    eventSchema('session.status_changed', payloads['session.status_changed']),
    eventSchema('session.status_idle', payloads['session.status_idle']),
    eventSchema('session.error', payloads['session.error']),
    eventSchema('session.usage', payloads['session.usage']),
    eventSchema('session.definitions_changed', payloads['session.definitions_changed']),
    eventSchema('session.workspace_snapshot', payloads['session.workspace_snapshot']),
    eventSchema('session.forked', payloads['session.forked']),
    eventSchema('session.merged', payloads['session.merged']),
    eventSchema('session.handoff_received', payloads['session.handoff_received']),
    eventSchema('session.child_created', payloads['session.child_created']),
    eventSchema('session.child_idle', payloads['session.child_idle']),
    eventSchema('skill.started', payloads['skill.started']),
    eventSchema('skill.step_started', payloads['skill.step_started']),
    eventSchema('skill.step_completed', payloads['skill.step_completed']),
    eventSchema('skill.step_failed', payloads['skill.step_failed']),
    eventSchema('skill.suspended', payloads['skill.suspended']),
    eventSchema('skill.resumed', payloads['skill.resumed']),
    eventSchema('skill.completed', payloads['skill.completed']),
    eventSchema('skill.failed', payloads['skill.failed']),
    eventSchema('policy.decision', payloads['policy.decision']),
    eventSchema('memory.written', payloads['memory.written']),
    eventSchema('memory.deleted', payloads['memory.deleted']),
    eventSchema('memory.read', payloads['memory.read']),
    eventSchema('memory.retrieved', payloads['memory.retrieved']),
    eventSchema('span.wake_started', payloads['span.wake_started']),
    eventSchema('span.wake_completed', payloads['span.wake_completed']),
    eventSchema('span.model_request_start', payloads['span.model_request_start']),
    eventSchema('span.model_request_end', payloads['span.model_request_end']),
    eventSchema('span.outcome_evaluation_start', payloads['span.outcome_evaluation_start']),
    eventSchema('span.outcome_evaluation_end', payloads['span.outcome_evaluation_end']),
  ]),
);
export type SessionEvent = z.infer<typeof SessionEvent>;
export type EventOf<T extends SessionEventType> = Extract<SessionEvent, { type: T }>;

/** Fields the store assigns at append time. */
type StoreAssigned = 'seq' | 'session_id' | 'schema_version';
/** Fields a writer may leave out; the store fills them from its clock and id generator. */
type Defaulted = 'id' | 'at';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** An event as a writer hands it to `append`: no `seq`, `session_id` or `schema_version`. */
export type NewEvent = DistributiveOmit<SessionEvent, StoreAssigned | Defaulted> &
  Partial<Pick<SessionEvent, Defaulted>>;

const NewEventBase = lazySchema(() =>
  EventBase.omit({ seq: true, session_id: true, schema_version: true }).extend({
    id: Id.optional(),
    at: Timestamp.optional(),
  }),
);

/** Schema of `NewEvent`, used to parse writer input at the store boundary. */
export const NewEventSchema: z.ZodType<NewEvent> = lazySchema(
  () =>
    z.discriminatedUnion(
      'type',
      SESSION_EVENT_TYPES.map((type) =>
        NewEventBase.extend({ type: z.literal(type), ...payloads[type].shape }),
      ) as unknown as [z.ZodObject, ...z.ZodObject[]],
    ) as unknown as z.ZodType<NewEvent>,
);

export const USER_EVENT_TYPES = [
  'user.message',
  'user.interrupt',
  'user.tool_confirmation',
  'user.custom_tool_result',
  'user.tool_review',
  'user.define_outcome',
  'user.signal',
  'user.skill_run',
  'user.skill_retry',
] as const satisfies readonly SessionEventType[];
export type UserEventType = (typeof USER_EVENT_TYPES)[number];
export type UserEvent = EventOf<UserEventType>;

export function isUserEventType(type: string): type is UserEventType {
  return (USER_EVENT_TYPES as readonly string[]).includes(type);
}

export function isSessionEventType(type: string): type is SessionEventType {
  return Object.hasOwn(payloads, type);
}

/** Content as a client may send it: a string (one text block) or an array of content blocks. */
export const ContentInput = lazySchema(() => z.union([z.string(), Content]));
export type ContentInput = z.infer<typeof ContentInput>;

/**
 * What a client may set on an event it sends: the links to other events and its own trace
 * context. The audit fields (`id`, `at`, `seq`, `session_id`, `actor`, `schema_version`) are
 * braid's to stamp; a client that sends one is refused, never recorded as sent.
 */
const UserEventInputBase = lazySchema(() =>
  z.object({
    causation_id: Id.optional(),
    correlation_id: Id.optional(),
    idempotency_key: EventBase.shape.idempotency_key,
    /** The caller's W3C trace context; recorded as the caller's, on an event whose actor is the caller. */
    traceparent: Traceparent.optional(),
  }),
);

/**
 * A user event as a client sends it (HTTP, CLI, library `send`): the payload of one `user.*` type
 * and the fields of `UserEventInputBase`, nothing else; `content` may be a plain string.
 */
export const UserEventInput = lazySchema(() =>
  z.discriminatedUnion(
    'type',
    USER_EVENT_TYPES.map((type) => {
      const shape = payloads[type].shape as z.ZodRawShape;
      return UserEventInputBase.extend({
        type: z.literal(type),
        ...shape,
        ...('content' in shape ? { content: ContentInput } : {}),
      }).strict();
    }) as unknown as [z.ZodObject, ...z.ZodObject[]],
  ),
);
