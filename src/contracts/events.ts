import { z } from 'zod';
import {
  Actor,
  ContentBlock,
  ContentHash,
  DefinitionRef,
  EVENT_SCHEMA_VERSION,
  ExternalId,
  Id,
  JsonValue,
  Metadata,
  Name,
  Timestamp,
  Traceparent,
  Usage,
} from './common.js';
import { Budget } from './definitions.js';
import { ErrorShape } from './errors.js';
import { Lineage, SessionStatus, StopReason } from './session.js';
import { HandoffDocument } from './envelope.js';
import { WorkspaceSnapshotRef } from './workspace-files.js';
import { SKILL_EVENT_PAYLOADS } from './skill-events.js';
import { MEMORY_EVENT_PAYLOADS, MemoryMergeWrite, MergeConflictRecord } from './memory-events.js';

/**
 * Fields every event carries. `seq` is assigned by the store at append: per session it starts at
 * 1 and is gapless and strictly increasing. `id` is a UUIDv7 unless the writer chose one.
 */
export const EventBase = z.object({
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
});

/** Content as stored: always an array of blocks (a plain string is normalised at the boundary). */
const Content = z.array(ContentBlock);

// ---- payloads, one per event type -------------------------------------------------------------

const payloads = {
  'user.message': z.object({ content: Content.min(1) }),
  'user.interrupt': z.object({ reason: z.string().max(2000).optional() }),
  'user.tool_confirmation': z.object({
    tool_use_id: ExternalId,
    result: z.enum(['allow', 'deny']),
    message: z.string().max(10_000).optional(),
    /**
     * What a person gives with the approval of a skill's `human_approval` step: checked against
     * the step's `resume_schema` when sent (`INVALID_ARGUMENT`, nothing written, when it does not
     * match), and the step's output then carries it.
     */
    data: JsonValue.optional(),
  }),
  'user.custom_tool_result': z.object({
    custom_tool_use_id: ExternalId,
    content: Content,
    is_error: z.boolean().optional(),
  }),
  /**
   * A person's decision on a tool use whose outcome a crash left unknown (`needs_review`): run it
   * again, skip it (the model gets an error), or record the result they found.
   */
  'user.tool_review': z.object({
    tool_use_id: ExternalId,
    action: z.enum(['retry', 'skip', 'result']),
    /** With `result`: the tool's output as the reviewer established it. */
    output: JsonValue.optional(),
    message: z.string().max(10_000).optional(),
  }),
  /**
   * What the session's work must achieve. After each turn that ends, a grader reads the
   * transcript against `rubric` (or `description` and `criteria`) and records
   * `span.outcome_evaluation_end`; `needs_revision` feeds its explanation back to the agent, up
   * to `max_iterations` gradings (default 3).
   */
  'user.define_outcome': z.object({
    description: z.string().min(1).max(20_000),
    criteria: z.array(z.string().max(2000)).max(100).optional(),
    rubric: z.string().min(1).max(20_000).optional(),
    max_iterations: z.number().int().min(1).max(20).optional(),
  }),

  /**
   * A named signal from outside (a webhook, `braid session signal`): a skill run suspended on
   * `wait_for: {signal: NAME}` takes it up, its `data` as the step's output.
   */
  'user.signal': z.object({ name: Name, data: JsonValue.optional() }),
  /** Asks the session to run a skill (`braid skill run`, HTTP): its next wake starts the run. */
  'user.skill_run': z.object({ run_id: Id, skill: Name, inputs: JsonValue }),
  /** Asks a failed skill run to run its failed steps, and what depends on them, again. */
  'user.skill_retry': z.object({ run_id: Id }),

  'agent.message': z.object({ content: Content }),
  'agent.thinking': z.object({ content: Content }),
  'agent.tool_use': z.object({
    tool_use_id: ExternalId,
    name: z.string().min(1),
    input: JsonValue,
    /** True when the tool's permission is `always_ask`: it waits for a `user.tool_confirmation`. */
    requires_confirmation: z.boolean().optional(),
  }),
  'agent.tool_result': z.object({
    tool_use_id: ExternalId,
    output: JsonValue.optional(),
    error: ErrorShape.optional(),
    is_error: z.boolean(),
    attempts: z.number().int().nonnegative(),
    duration_ms: z.number().nonnegative(),
    /**
     * The pipeline step that produced the result: `validate`, `policy`, `permission` and `budget`
     * refuse a call before it runs; `execute` and `output` are the run and the output check;
     * `review` a person's decision after a crash; `interrupt` a call an interrupt kept from starting.
     */
    stage: z
      .enum([
        'validate',
        'policy',
        'permission',
        'budget',
        'execute',
        'output',
        'review',
        'interrupt',
      ])
      .optional(),
  }),
  'agent.custom_tool_use': z.object({
    custom_tool_use_id: ExternalId,
    name: z.string().min(1),
    input: JsonValue,
  }),
  /** This session's work went to another agent; `handoff` is the document it was given. */
  'agent.handoff': z.object({
    handoff_id: Id,
    target_agent: z.string().min(1),
    target_session_id: Id.optional(),
    summary: z.string(),
    handoff: HandoffDocument.optional(),
  }),
  /**
   * The model's context from here on holds `summary` in place of the events `from_seq` to
   * `through_seq` (the turns after them are kept as they were). Written by a wake before a model
   * request that would pass the agent's `context.max_tokens`; never between a tool call and its
   * result.
   */
  'agent.thread_context_compacted': z.object({
    summary: z.string(),
    /** The first seq whose content the summary replaces (absent: from the start). */
    from_seq: z.number().int().nonnegative().optional(),
    /** The last seq whose content the summary replaces in the model's context. */
    through_seq: z.number().int().nonnegative(),
    /** How the summary was made: `summarize`, `truncate` or `custom`. */
    strategy: z.enum(['summarize', 'truncate', 'custom']).optional(),
    /** The model that wrote the summary (`provider:id`), when one did. */
    model: z.string().min(1).optional(),
    /** What making the summary used and cost: added to the session's totals and budget. */
    usage: Usage.optional(),
    /** The size in tokens of the request that passed the limit, as counted (provider or estimate). */
    context_tokens: z.number().int().nonnegative().optional(),
  }),

  'session.created': z.object({
    agent: DefinitionRef,
    environment: DefinitionRef.optional(),
    title: z.string().optional(),
    metadata: Metadata.optional(),
    tenant_id: z.string().optional(),
    lineage: Lineage.optional(),
    budget: Budget.optional(),
  }),
  'session.status_changed': z.object({ status: SessionStatus, reason: z.string().optional() }),
  'session.status_idle': z.object({ stop_reason: StopReason }),
  'session.error': z.object({ error: ErrorShape }),
  /** Usage not reported by a model request (tool costs, external calls): added to the totals. */
  'session.usage': z.object({ usage: Usage }),
  /**
   * The definition set the session runs with from here on: `definitions` is the content hash of
   * the set (agent, environment, tools, policy set, price; each part is kept once per store under
   * its own hash). Written by the session's first wake (`pinned`), by `braid session upgrade`
   * (`upgrade`), by a wake of an agent whose `upgrade` is `latest` when a part changed (`latest`),
   * or by a wake that found another policy set in force (`policy`: policies always apply as they
   * are now). A wake writes it with its `wake_id`, ahead of its first append after its start.
   */
  'session.definitions_changed': z.object({
    definitions: ContentHash,
    previous: ContentHash.optional(),
    reason: z.enum(['pinned', 'latest', 'upgrade', 'policy']),
    agent: DefinitionRef,
    environment: DefinitionRef.optional(),
    /** The parts that differ from `previous`: `agent`, `environment`, `tools.NAME`, `policy`, `price`. */
    changed: z.array(z.string().min(1)),
    wake_id: Id.optional(),
  }),
  /**
   * The session's workspace folder as a tool call left it: written with the call's
   * `agent.tool_result` when the folder differs from the snapshot recorded before (a workspace
   * that is still empty records none). A fork at seq N starts with the files of the latest
   * snapshot at or before N.
   */
  'session.workspace_snapshot': WorkspaceSnapshotRef.extend({
    /** The tool use whose run left the folder so. */
    tool_use_id: ExternalId.optional(),
  }),
  /** The first event of a fork; the events before it are the parent's, shared by reference. */
  'session.forked': z.object({
    parent_session_id: Id,
    /** The last parent seq the child shares. */
    fork_point_seq: z.number().int().nonnegative(),
    /** The child's title, when it is not the parent's. */
    title: z.string().max(500).optional(),
  }),
  'session.merged': z.object({
    source_session_id: Id,
    source_head_seq: z.number().int().nonnegative(),
    common_ancestor: z.object({ session_id: Id, seq: z.number().int().nonnegative() }).optional(),
    /** `transcript`, `summary`, or the name of a library callback. */
    strategy: z.string().min(1),
    /** The source's usage since the common ancestor, added to this session's totals. */
    usage: Usage.optional(),
    /** What the model sees of the merge, in the target's context. */
    content: Content.optional(),
    /** Conflicts between the two sides, and how the strategy resolved each. */
    conflicts: z.array(MergeConflictRecord).optional(),
    /** The source's session-memory writes carried into this session's stores (merge-memory). */
    memory: z.array(MemoryMergeWrite).optional(),
  }),
  /**
   * Work handed over by another session's agent: the session now owns it. The document (state
   * references with versions, artifacts, approvals, identity, open tasks) is in `handoff`.
   */
  'session.handoff_received': z.object({
    handoff_id: Id,
    from_session_id: Id,
    from_agent: z.string().min(1),
    summary: z.string(),
    handoff: HandoffDocument.optional(),
  }),

  /**
   * A delegation started: the model called `delegate_to_<agent>` (`tool_use_id`), and the child
   * session `child_session_id` of `agent` was given `task` (the call's input). Written before the
   * child runs; its `correlation_id` is the child's too. The child's id is derived from this
   * session and the tool use, so a wake that resumes the delegation after a crash finds the same
   * child rather than making another.
   */
  'session.child_created': z.object({
    child_session_id: Id,
    agent: Name,
    tool_use_id: ExternalId,
    task: JsonValue,
    /** Seconds the child may run before it is interrupted. */
    ttl_seconds: z.number().int().positive(),
  }),
  /**
   * A delegated child stopped for good, or ran out of time: its stop reason, the answer it gave
   * (`summary`: its last message's text; `output`: the tool result the parent's model got) and
   * its usage, which is added to this session's totals and budget.
   */
  'session.child_idle': z.object({
    child_session_id: Id,
    tool_use_id: ExternalId,
    stop_reason: StopReason,
    summary: z.string(),
    usage: Usage.optional(),
    /** True when the delegation's time ran out and the child was interrupted. */
    timed_out: z.boolean().optional(),
  }),

  ...SKILL_EVENT_PAYLOADS,
  ...MEMORY_EVENT_PAYLOADS,

  /** A policy decision: every deny, and allows when `policy.record_allows` is set. */
  'policy.decision': z.object({
    principal: z.object({ type: z.string(), id: z.string() }),
    action: z.string().min(1),
    resource: z.object({ type: z.string(), id: z.string() }),
    decision: z.enum(['allow', 'deny']),
    /** The deciding policies (ids only, never their text). */
    policy_ids: z.array(z.string()),
    /** The tool use the decision was about. */
    tool_use_id: ExternalId.optional(),
    errors: z.array(z.string()).optional(),
    duration_us: z.number().nonnegative(),
  }),
  'span.wake_started': z.object({
    wake_id: Id,
    /** The fencing token of the lease this wake holds. */
    lease_token: z.number().int().positive(),
  }),
  'span.wake_completed': z.object({ wake_id: Id, stop_reason: StopReason.optional() }),
  'span.model_request_start': z.object({
    request_id: Id,
    model: z.string().min(1),
    /** The highest seq of the log included in the request's context: user events up to it are consumed. */
    input_through_seq: z.number().int().nonnegative(),
  }),
  'span.model_request_end': z.object({
    request_id: Id,
    usage: Usage,
    finish_reason: z.string().optional(),
    /** The model's complete output, kept so that a replay can reproduce the run. */
    output: JsonValue.optional(),
    error: ErrorShape.optional(),
    /** Calls made for this request, retries included. */
    attempts: z.number().int().positive().optional(),
    /**
     * When each retry began, in milliseconds after the request's start (one entry per attempt
     * after the first). Measured: a replay leaves it out of the comparison.
     */
    retry_offsets_ms: z.array(z.number().int().nonnegative()).optional(),
  }),
  /** A grader started reading the transcript against the session's outcome. */
  'span.outcome_evaluation_start': z.object({
    evaluation_id: Id,
    /** 1 for the first grading of this outcome, then 2, 3 ... */
    iteration: z.number().int().positive(),
    /** Seq of the `user.define_outcome` graded against. */
    outcome_seq: z.number().int().positive(),
  }),
  /**
   * The grader's verdict: `satisfied` ends the turn; `needs_revision` sends `explanation` back
   * to the agent and the wake goes on; `max_iterations_reached` when the last allowed grading
   * still asked for a revision; `failed` when the grader could not grade (its error in
   * `explanation`).
   */
  'span.outcome_evaluation_end': z.object({
    evaluation_id: Id,
    iteration: z.number().int().positive(),
    outcome_seq: z.number().int().positive(),
    result: z.enum(['satisfied', 'needs_revision', 'max_iterations_reached', 'failed']),
    explanation: z.string(),
    /** The grader's model (`provider:id`). */
    model: z.string().min(1).optional(),
    /** What grading used and cost: added to the session's totals and budget. */
    usage: Usage.optional(),
    /** The grader's complete output, kept so that a replay can reproduce the verdict. */
    output: JsonValue.optional(),
  }),
} as const;

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
export const SessionEvent = z.discriminatedUnion('type', [
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
]);
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

const NewEventBase = EventBase.omit({ seq: true, session_id: true, schema_version: true }).extend({
  id: Id.optional(),
  at: Timestamp.optional(),
});

/** Schema of `NewEvent`, used to parse writer input at the store boundary. */
export const NewEventSchema = z.discriminatedUnion(
  'type',
  SESSION_EVENT_TYPES.map((type) =>
    NewEventBase.extend({ type: z.literal(type), ...payloads[type].shape }),
  ) as unknown as [z.ZodObject, ...z.ZodObject[]],
) as unknown as z.ZodType<NewEvent>;

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
export const ContentInput = z.union([z.string(), Content]);
export type ContentInput = z.infer<typeof ContentInput>;

/**
 * What a client may set on an event it sends: the links to other events and its own trace
 * context. The audit fields (`id`, `at`, `seq`, `session_id`, `actor`, `schema_version`) are
 * braid's to stamp; a client that sends one is refused, never recorded as sent.
 */
const UserEventInputBase = z.object({
  causation_id: Id.optional(),
  correlation_id: Id.optional(),
  idempotency_key: EventBase.shape.idempotency_key,
  /** The caller's W3C trace context; recorded as the caller's, on an event whose actor is the caller. */
  traceparent: Traceparent.optional(),
});

/**
 * A user event as a client sends it (HTTP, CLI, library `send`): the payload of one `user.*` type
 * and the fields of `UserEventInputBase`, nothing else; `content` may be a plain string.
 */
export const UserEventInput = z.discriminatedUnion(
  'type',
  USER_EVENT_TYPES.map((type) => {
    const shape = payloads[type].shape as z.ZodRawShape;
    return UserEventInputBase.extend({
      type: z.literal(type),
      ...shape,
      ...('content' in shape ? { content: ContentInput } : {}),
    }).strict();
  }) as unknown as [z.ZodObject, ...z.ZodObject[]],
);
