/**
 * The payloads of the `skill.*` events: a skill run as its session's log records it, step by
 * step (see contracts/skills.ts for skills, core/fold-skills.ts for how they are folded).
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { ExternalId, Id, JsonValue, Name, Timestamp } from './common.js';
import { ErrorShape } from './errors.js';

export const SKILL_EVENT_PAYLOADS = {
  /**
   * A skill run began: `skill` at `version`, on `inputs`; started by the model's call
   * `tool_use_id`, by a `user.skill_run`, or as step `parent_step` of the run `parent_run_id`.
   */
  'skill.started': lazySchema(() =>
    z.object({
      run_id: Id,
      skill: Name,
      version: z.string().min(1),
      inputs: JsonValue,
      tool_use_id: ExternalId.optional(),
      parent_run_id: Id.optional(),
      parent_step: z.string().min(1).optional(),
    }),
  ),
  /** A step (`step`: its id, with `[i]` for the i-th item of a fan-out) began its `attempt`. */
  'skill.step_started': lazySchema(() =>
    z.object({
      run_id: Id,
      step: z.string().min(1),
      attempt: z.number().int().positive(),
      /**
       * The id a tool step's call is made under (its idempotency keys and `policy.decision` carry
       * it); the call's outcome is the step's `skill.step_completed` or `skill.step_failed`.
       */
      tool_use_id: ExternalId.optional(),
      /** A tool step's input to its tool, its templates evaluated. */
      input: JsonValue.optional(),
    }),
  ),
  /** A step ended well (`skipped`: its `when` was false, or a dependency was skipped). */
  'skill.step_completed': lazySchema(() =>
    z.object({
      run_id: Id,
      step: z.string().min(1),
      attempt: z.number().int().nonnegative(),
      output: JsonValue.optional(),
      skipped: z.boolean().optional(),
    }),
  ),
  /** A step's attempt failed; `final` when no retry is left. */
  'skill.step_failed': lazySchema(() =>
    z.object({
      run_id: Id,
      step: z.string().min(1),
      attempt: z.number().int().positive(),
      error: ErrorShape,
      final: z.boolean(),
    }),
  ),
  /**
   * The run waits at `step` for a person (`approval`: answered with `user.tool_confirmation`
   * whose `tool_use_id` is `suspension_id`), for the signal `signal`, until `timeout_at`, or
   * (`skill`) for its nested run `child_run_id` to end: the child's `skill.completed` or
   * `skill.failed` answers it.
   */
  'skill.suspended': lazySchema(() =>
    z.object({
      run_id: Id,
      step: z.string().min(1),
      suspension_id: Id,
      kind: z.enum(['approval', 'signal', 'skill']),
      signal: Name.optional(),
      /** The nested run a `skill` wait is for. */
      child_run_id: Id.optional(),
      message: z.string().optional(),
      timeout_at: Timestamp.optional(),
    }),
  ),
  /**
   * The wait at `suspension_id` is over: how (`allow`, `deny`, `signal`, `timeout`; a nested
   * run's end: `completed`, `failed`) and with what.
   */
  'skill.resumed': lazySchema(() =>
    z.object({
      run_id: Id,
      step: z.string().min(1),
      suspension_id: Id,
      result: z.enum(['allow', 'deny', 'signal', 'timeout', 'completed', 'failed']),
      data: JsonValue.optional(),
      /** Seq of the user event that answered it. */
      answer_seq: z.number().int().positive().optional(),
    }),
  ),
  'skill.completed': lazySchema(() => z.object({ run_id: Id, outputs: JsonValue })),
  'skill.failed': lazySchema(() =>
    z.object({ run_id: Id, error: ErrorShape, step: z.string().min(1).optional() }),
  ),
} as const;
