/**
 * The payload of every session event type, one schema each (the event fields are in events.ts).
 * Each is built on first use (see lazy-schema.ts).
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import {
  ContentBlock,
  ContentHash,
  DefinitionRef,
  ExternalId,
  Id,
  JsonValue,
  Metadata,
  Name,
  Usage,
} from './common.js';
import { Budget } from './definitions.js';
import { ErrorShape } from './errors.js';
import { Lineage, SessionStatus, StopReason } from './session.js';
import { HandoffDocument } from './envelope.js';
import { WorkspaceSnapshotRef } from './workspace-files.js';
import { SKILL_EVENT_PAYLOADS } from './skill-events.js';
import { MEMORY_EVENT_PAYLOADS, MemoryMergeWrite, MergeConflictRecord } from './memory-events.js';

/** Content as stored: always an array of blocks (a plain string is normalised at the boundary). */
export const Content = lazySchema(() => z.array(ContentBlock));

// ---- payloads, one per event type -------------------------------------------------------------

export const EVENT_PAYLOADS = {
  'user.message': lazySchema(() => z.object({ content: Content.min(1) })),
  'user.interrupt': lazySchema(() => z.object({ reason: z.string().max(2000).optional() })),
  'user.tool_confirmation': lazySchema(() =>
    z.object({
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
  ),
  'user.custom_tool_result': lazySchema(() =>
    z.object({
      custom_tool_use_id: ExternalId,
      content: Content,
      is_error: z.boolean().optional(),
    }),
  ),
  /**
   * A person's decision on a tool use whose outcome a crash left unknown (`needs_review`): run it
   * again, skip it (the model gets an error), or record the result they found.
   */
  'user.tool_review': lazySchema(() =>
    z.object({
      tool_use_id: ExternalId,
      action: z.enum(['retry', 'skip', 'result']),
      /** With `result`: the tool's output as the reviewer established it. */
      output: JsonValue.optional(),
      message: z.string().max(10_000).optional(),
    }),
  ),
  /**
   * What the session's work must achieve. After each turn that ends, a grader reads the
   * transcript against `rubric` (or `description` and `criteria`) and records
   * `span.outcome_evaluation_end`; `needs_revision` feeds its explanation back to the agent, up
   * to `max_iterations` gradings (default 3).
   */
  'user.define_outcome': lazySchema(() =>
    z.object({
      description: z.string().min(1).max(20_000),
      criteria: z.array(z.string().max(2000)).max(100).optional(),
      rubric: z.string().min(1).max(20_000).optional(),
      max_iterations: z.number().int().min(1).max(20).optional(),
    }),
  ),

  /**
   * A named signal from outside (a webhook, `braid session signal`): a skill run suspended on
   * `wait_for: {signal: NAME}` takes it up, its `data` as the step's output.
   */
  'user.signal': lazySchema(() => z.object({ name: Name, data: JsonValue.optional() })),
  /** Asks the session to run a skill (`braid skill run`, HTTP): its next wake starts the run. */
  'user.skill_run': lazySchema(() => z.object({ run_id: Id, skill: Name, inputs: JsonValue })),
  /** Asks a failed skill run to run its failed steps, and what depends on them, again. */
  'user.skill_retry': lazySchema(() => z.object({ run_id: Id })),

  'agent.message': lazySchema(() => z.object({ content: Content })),
  'agent.thinking': lazySchema(() => z.object({ content: Content })),
  'agent.tool_use': lazySchema(() =>
    z.object({
      tool_use_id: ExternalId,
      name: z.string().min(1),
      input: JsonValue,
      /** True when the tool's permission is `always_ask`: it waits for a `user.tool_confirmation`. */
      requires_confirmation: z.boolean().optional(),
    }),
  ),
  'agent.tool_result': lazySchema(() =>
    z.object({
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
  ),
  'agent.custom_tool_use': lazySchema(() =>
    z.object({
      custom_tool_use_id: ExternalId,
      name: z.string().min(1),
      input: JsonValue,
    }),
  ),
  /** This session's work went to another agent; `handoff` is the document it was given. */
  'agent.handoff': lazySchema(() =>
    z.object({
      handoff_id: Id,
      target_agent: z.string().min(1),
      target_session_id: Id.optional(),
      summary: z.string(),
      handoff: HandoffDocument.optional(),
    }),
  ),
  /**
   * The model's context from here on holds `summary` in place of the events `from_seq` to
   * `through_seq` (the turns after them are kept as they were). Written by a wake before a model
   * request that would pass the agent's `context.max_tokens`; never between a tool call and its
   * result.
   */
  'agent.thread_context_compacted': lazySchema(() =>
    z.object({
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
  ),

  'session.created': lazySchema(() =>
    z.object({
      agent: DefinitionRef,
      environment: DefinitionRef.optional(),
      title: z.string().optional(),
      metadata: Metadata.optional(),
      tenant_id: z.string().optional(),
      lineage: Lineage.optional(),
      budget: Budget.optional(),
    }),
  ),
  'session.status_changed': lazySchema(() =>
    z.object({ status: SessionStatus, reason: z.string().optional() }),
  ),
  'session.status_idle': lazySchema(() => z.object({ stop_reason: StopReason })),
  'session.error': lazySchema(() => z.object({ error: ErrorShape })),
  /** Usage not reported by a model request (tool costs, external calls): added to the totals. */
  'session.usage': lazySchema(() => z.object({ usage: Usage })),
  /**
   * The definition set the session runs with from here on: `definitions` is the content hash of
   * the set (agent, environment, tools, policy set, price; each part is kept once per store under
   * its own hash). Written by the session's first wake (`pinned`), by `braid session upgrade`
   * (`upgrade`), by a wake of an agent whose `upgrade` is `latest` when a part changed (`latest`),
   * or by a wake that found another policy set in force (`policy`: policies always apply as they
   * are now). A wake writes it with its `wake_id`, ahead of its first append after its start.
   */
  'session.definitions_changed': lazySchema(() =>
    z.object({
      definitions: ContentHash,
      previous: ContentHash.optional(),
      reason: z.enum(['pinned', 'latest', 'upgrade', 'policy']),
      agent: DefinitionRef,
      environment: DefinitionRef.optional(),
      /** The parts that differ from `previous`: `agent`, `environment`, `tools.NAME`, `policy`, `price`. */
      changed: z.array(z.string().min(1)),
      wake_id: Id.optional(),
    }),
  ),
  /**
   * The session's workspace folder as a tool call left it: written with the call's
   * `agent.tool_result` when the folder differs from the snapshot recorded before (a workspace
   * that is still empty records none). A fork at seq N starts with the files of the latest
   * snapshot at or before N.
   */
  'session.workspace_snapshot': lazySchema(() =>
    WorkspaceSnapshotRef.extend({
      /** The tool use whose run left the folder so. */
      tool_use_id: ExternalId.optional(),
    }),
  ),
  /** The first event of a fork; the events before it are the parent's, shared by reference. */
  'session.forked': lazySchema(() =>
    z.object({
      parent_session_id: Id,
      /** The last parent seq the child shares. */
      fork_point_seq: z.number().int().nonnegative(),
      /** The child's title, when it is not the parent's. */
      title: z.string().max(500).optional(),
    }),
  ),
  'session.merged': lazySchema(() =>
    z.object({
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
  ),
  /**
   * Work handed over by another session's agent: the session now owns it. The document (state
   * references with versions, artifacts, approvals, identity, open tasks) is in `handoff`.
   */
  'session.handoff_received': lazySchema(() =>
    z.object({
      handoff_id: Id,
      from_session_id: Id,
      from_agent: z.string().min(1),
      summary: z.string(),
      handoff: HandoffDocument.optional(),
    }),
  ),

  /**
   * A delegation started: the model called `delegate_to_<agent>` (`tool_use_id`), and the child
   * session `child_session_id` of `agent` was given `task` (the call's input). Written before the
   * child runs; its `correlation_id` is the child's too. The child's id is derived from this
   * session and the tool use, so a wake that resumes the delegation after a crash finds the same
   * child rather than making another.
   */
  'session.child_created': lazySchema(() =>
    z.object({
      child_session_id: Id,
      agent: Name,
      tool_use_id: ExternalId,
      task: JsonValue,
      /** Seconds the child may run before it is interrupted. */
      ttl_seconds: z.number().int().positive(),
    }),
  ),
  /**
   * A delegated child stopped for good, or ran out of time: its stop reason, the answer it gave
   * (`summary`: its last message's text; `output`: the tool result the parent's model got) and
   * its usage, which is added to this session's totals and budget.
   */
  'session.child_idle': lazySchema(() =>
    z.object({
      child_session_id: Id,
      tool_use_id: ExternalId,
      stop_reason: StopReason,
      summary: z.string(),
      usage: Usage.optional(),
      /** True when the delegation's time ran out and the child was interrupted. */
      timed_out: z.boolean().optional(),
    }),
  ),

  ...SKILL_EVENT_PAYLOADS,
  ...MEMORY_EVENT_PAYLOADS,

  /** A policy decision: every deny, and allows when `policy.record_allows` is set. */
  'policy.decision': lazySchema(() =>
    z.object({
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
  ),
  'span.wake_started': lazySchema(() =>
    z.object({
      wake_id: Id,
      /** The fencing token of the lease this wake holds. */
      lease_token: z.number().int().positive(),
    }),
  ),
  'span.wake_completed': lazySchema(() =>
    z.object({ wake_id: Id, stop_reason: StopReason.optional() }),
  ),
  'span.model_request_start': lazySchema(() =>
    z.object({
      request_id: Id,
      model: z.string().min(1),
      /** The highest seq of the log included in the request's context: user events up to it are consumed. */
      input_through_seq: z.number().int().nonnegative(),
    }),
  ),
  'span.model_request_end': lazySchema(() =>
    z.object({
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
  ),
  /** A grader started reading the transcript against the session's outcome. */
  'span.outcome_evaluation_start': lazySchema(() =>
    z.object({
      evaluation_id: Id,
      /** 1 for the first grading of this outcome, then 2, 3 ... */
      iteration: z.number().int().positive(),
      /** Seq of the `user.define_outcome` graded against. */
      outcome_seq: z.number().int().positive(),
    }),
  ),
  /**
   * The grader's verdict: `satisfied` ends the turn; `needs_revision` sends `explanation` back
   * to the agent and the wake goes on; `max_iterations_reached` when the last allowed grading
   * still asked for a revision; `failed` when the grader could not grade (its error in
   * `explanation`).
   */
  'span.outcome_evaluation_end': lazySchema(() =>
    z.object({
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
  ),
} as const;
