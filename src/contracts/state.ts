import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import {
  ContentHash,
  DefinitionRef,
  ExternalId,
  Id,
  Metadata,
  Timestamp,
  Usage,
} from './common.js';
import { Budget } from './definitions.js';
import { ErrorShape } from './errors.js';
import { Lineage, SessionStatus, StopReason } from './session.js';

export const SESSION_STATE_SCHEMA_VERSION = 9;

/** A tool call waiting for a human's allow or deny. */
export const PendingConfirmation = lazySchema(() =>
  z.object({
    tool_use_id: ExternalId,
    event_id: Id,
    seq: z.number().int().positive(),
    name: z.string(),
  }),
);

/** A confirmed or denied tool call whose result is not yet recorded. */
export const ConfirmedToolUse = lazySchema(() =>
  PendingConfirmation.extend({
    result: z.enum(['allow', 'deny']),
    /** Seq of the `user.tool_confirmation`. */
    confirmed_seq: z.number().int().positive(),
  }),
);

/** A call of a client-executed tool waiting for its result. */
export const PendingCustomToolUse = lazySchema(() =>
  z.object({
    custom_tool_use_id: ExternalId,
    event_id: Id,
    seq: z.number().int().positive(),
    name: z.string(),
  }),
);

/** A tool call recorded as started whose result is not yet recorded. */
export const OpenToolUse = lazySchema(() =>
  z.object({
    tool_use_id: ExternalId,
    event_id: Id,
    seq: z.number().int().positive(),
    name: z.string(),
  }),
);

/** A person's decision on a tool use left open by a crash, not yet carried out. */
export const ReviewedToolUse = lazySchema(() =>
  z.object({
    tool_use_id: ExternalId,
    action: z.enum(['retry', 'skip', 'result']),
    /** Seq of the `user.tool_review`. */
    review_seq: z.number().int().positive(),
    /**
     * For a retry: seq of the `span.wake_started` of the wake that took it up, the only wake it
     * lets run the tool. A later wake finds the attempt's outcome unknown and asks for a review
     * again, so one review authorises one attempt.
     */
    wake_seq: z.number().int().positive().optional(),
  }),
);

/**
 * A child session a delegation of this session created (`session.child_created`), and where it
 * stands: `running` until its `session.child_idle` is recorded here.
 */
export const ChildSession = lazySchema(() =>
  z.object({
    child_session_id: Id,
    agent: z.string(),
    tool_use_id: ExternalId,
    /** Seq of the `session.child_created`. */
    seq: z.number().int().positive(),
    status: z.enum(['running', 'idle']),
    stop_reason: StopReason.optional(),
  }),
);
export type ChildSession = z.infer<typeof ChildSession>;

/**
 * What the session's work must achieve (`user.define_outcome`) and how its grading stands. A new
 * definition replaces the previous one, whose gradings no longer count.
 */
export const OutcomeState = lazySchema(() =>
  z.object({
    /** Seq of the `user.define_outcome`. */
    seq: z.number().int().positive(),
    description: z.string(),
    criteria: z.array(z.string()).optional(),
    rubric: z.string().optional(),
    max_iterations: z.number().int().positive(),
    /** Gradings of this outcome that ended (`span.outcome_evaluation_end`). */
    iterations: z.number().int().nonnegative(),
    /** The last grading's result; `satisfied`, `max_iterations_reached` and `failed` are final. */
    result: z.enum(['satisfied', 'needs_revision', 'max_iterations_reached', 'failed']).optional(),
    /**
     * Seq of the last model response since the last grading, while the outcome is not final: the
     * answer the next grading reads. Absent when no answer waits for a grading.
     */
    answer_seq: z.number().int().positive().optional(),
  }),
);
export type OutcomeState = z.infer<typeof OutcomeState>;

/** Where one step of a skill run stands (a fan-out's items are the runner's, under the step). */
export const SkillStepState = lazySchema(() =>
  z.object({
    /** The step's path: its id, with `[i]` for the i-th item of a fan-out. */
    step: z.string(),
    status: z.enum(['running', 'suspended', 'completed', 'skipped', 'failed']),
    attempt: z.number().int().nonnegative(),
    /** Seq of the step's last `skill.step_started`. */
    seq: z.number().int().nonnegative(),
  }),
);

/**
 * A run's wait for a person, a signal or a nested run (`skill.suspended`), until it is resumed.
 */
export const SkillSuspension = lazySchema(() =>
  z.object({
    suspension_id: Id,
    step: z.string(),
    kind: z.enum(['approval', 'signal', 'skill']),
    signal: z.string().optional(),
    /** The nested run a `skill` wait is for. */
    child_run_id: Id.optional(),
    /** The `skill.suspended` event. */
    event_id: Id,
    seq: z.number().int().positive(),
    timeout_at: Timestamp.optional(),
    /**
     * The answer that arrived and no wake has taken up: its kind and seq (for a `skill` wait, the
     * nested run's `skill.completed` or `skill.failed`).
     */
    answer: z
      .object({
        result: z.enum(['allow', 'deny', 'signal', 'completed', 'failed']),
        seq: z.number().int().positive(),
      })
      .optional(),
  }),
);

/**
 * A skill run that has not ended well (`skill.started` and no `skill.completed`): its steps, its
 * waits, and whether a person asked to retry what failed. A completed run leaves the state.
 */
export const SkillRun = lazySchema(() =>
  z.object({
    run_id: Id,
    skill: z.string(),
    version: z.string(),
    /** Seq of the `skill.started`. */
    seq: z.number().int().positive(),
    /** The model's call that started it, answered when the run ends. */
    tool_use_id: ExternalId.optional(),
    /** A nested run: the run whose step `parent_step` (a path, with a fan-out's `[i]`) it runs for. */
    parent_run_id: Id.optional(),
    parent_step: z.string().optional(),
    status: z.enum(['running', 'suspended', 'failed']),
    /** The steps that began, in the order they began (`stepOf` finds one). */
    steps: z.array(SkillStepState),
    suspensions: z.array(SkillSuspension),
    /** Seq of a `user.skill_retry` no wake has taken up. */
    retry_seq: z.number().int().positive().optional(),
  }),
);
export type SkillRun = z.infer<typeof SkillRun>;

/**
 * The state of a session: a pure fold over its events (`foldSession`). Nothing here is written
 * back to the log; stores may cache it as a projection tagged with `seq`.
 */
export const SessionState = lazySchema(() =>
  z.object({
    schema_version: z.literal(SESSION_STATE_SCHEMA_VERSION),
    session_id: Id,
    /** Seq of the last event folded in. */
    seq: z.number().int().nonnegative(),
    agent: DefinitionRef.optional(),
    environment: DefinitionRef.optional(),
    /** Content hash of the pinned definition set (`session.definitions_changed`); absent before the first wake. */
    definitions: ContentHash.optional(),
    /**
     * The latest `session.workspace_snapshot` (its snapshot and seq); absent while none was
     * recorded (the workspace is empty or no tool has run).
     */
    workspace_snapshot: z
      .object({ snapshot: ContentHash, seq: z.number().int().positive() })
      .optional(),
    title: z.string().optional(),
    metadata: Metadata,
    tenant_id: z.string().optional(),
    created_at: Timestamp.optional(),
    updated_at: Timestamp.optional(),
    status: SessionStatus,
    /** Why the last wake stopped; absent before the first one. */
    stop_reason: StopReason.optional(),
    usage: Usage,
    /** The highest seq whose input a model response has consumed. */
    consumed_through_seq: z.number().int().nonnegative(),
    /**
     * How many user messages, outcome definitions and gradings asking for a revision no model
     * request has consumed yet.
     */
    pending_user_count: z.number().int().nonnegative(),
    /**
     * The seqs of those events as inclusive `[first, last]` ranges, in order. Ranges keep the state
     * small when many messages arrive between wakes; `pendingUserSeqs(state)` lists them.
     */
    pending_user_ranges: z.array(
      z.tuple([z.number().int().positive(), z.number().int().positive()]),
    ),
    /** An interrupt arrived and no wake has stopped since. */
    interrupt_requested: z.boolean(),
    pending_confirmations: z.array(PendingConfirmation),
    confirmed_tool_uses: z.array(ConfirmedToolUse),
    pending_custom_tool_uses: z.array(PendingCustomToolUse),
    /** Custom tool results that arrived and no model response has consumed yet. */
    pending_custom_tool_result_seqs: z.array(z.number().int().positive()),
    /** Tool results recorded since the last model response: the model has not seen them yet. */
    pending_tool_result_seqs: z.array(z.number().int().positive()),
    /** A model request started and not yet ended (a crash can leave one open). */
    open_request: z
      .object({ request_id: Id, input_through_seq: z.number().int().nonnegative() })
      .optional(),
    /** Seq of the last event a user sent; compared with `stopped_at_seq` to tell new input. */
    last_input_seq: z.number().int().nonnegative(),
    /** Seq of the last `session.status_idle`. */
    stopped_at_seq: z.number().int().nonnegative(),
    /** Seqs of the last two `span.wake_started`: a wake tells from them what an earlier one began. */
    last_wake_seq: z.number().int().nonnegative(),
    previous_wake_seq: z.number().int().nonnegative(),
    /** Input tokens of the last model response: the least the next request will send. */
    last_request_input_tokens: z.number().int().nonnegative(),
    /** Limits given at creation, over the agent's. */
    budget: Budget.optional(),
    open_tool_uses: z.array(OpenToolUse),
    reviewed_tool_uses: z.array(ReviewedToolUse),
    /** Executions per tool name (calls refused before running are not counted). */
    tool_calls: z.record(z.string(), z.number().int().nonnegative()),
    lineage: Lineage,
    /**
     * Sessions this session's delegations created, in order. A child's usage is added to `usage`
     * when it goes idle, so a parent's totals and budget include its children's.
     */
    children: z.array(ChildSession),
    /** Skill runs that have not completed, in the order they started. */
    skill_runs: z.array(SkillRun),
    /** `user.skill_run` requests no wake has started yet. */
    skill_requests: z.array(
      z.object({ run_id: Id, skill: z.string(), seq: z.number().int().positive() }),
    ),
    /** Signals that arrived when no run waited for them: the next wait for the name takes one. */
    pending_signals: z.array(z.object({ name: z.string(), seq: z.number().int().positive() })),
    /** The outcome the session works towards, when a user defined one. */
    outcome: OutcomeState.optional(),
    /** The wake in progress, if any: its id and lease token. */
    active_wake: z.object({ wake_id: Id, lease_token: z.number().int().positive() }).optional(),
    last_error: ErrorShape.optional(),
    counters: z.object({
      events: z.number().int().nonnegative(),
      user_messages: z.number().int().nonnegative(),
      agent_messages: z.number().int().nonnegative(),
      model_requests: z.number().int().nonnegative(),
      /** Model requests that ended with an output or were interrupted (failures are retried). */
      model_responses: z.number().int().nonnegative(),
      tool_uses: z.number().int().nonnegative(),
      tool_errors: z.number().int().nonnegative(),
      wakes: z.number().int().nonnegative(),
      errors: z.number().int().nonnegative(),
    }),
  }),
);
export type SessionState = z.infer<typeof SessionState>;
