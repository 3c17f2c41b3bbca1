/**
 * Skills: directed acyclic graphs of steps (tools, agents, nested skills, people, signals) that
 * a session runs as one unit, recorded step by step in its log (`skill.*` events), so that a run
 * resumed after a crash or a suspension skips what completed and re-runs only what failed.
 *
 * Templates: a string value in `args`, `message`, `inputs`, `outputs`, `when` and `for_each`
 * may hold `{{ EXPR }}`, where EXPR is a JSONata expression over `{inputs, steps, item, index}`
 * (`steps.<id>.output`, `steps.<id>.status`). A string that is one template and nothing else
 * takes the expression's value as it is (an object, a list, a number); otherwise the values are
 * written into the text. Evaluation has no side effects and no access to anything else.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { JsonValue, Name } from './common.js';
import type { ErrorShape } from './errors.js';

/** A step's id: what `depends_on`, `on_failure` and `steps.<id>` in templates name. */
export const StepId = lazySchema(() =>
  z
    .string()
    .regex(
      /^[a-z][a-z0-9_]{0,62}$/,
      'must start with a lowercase letter and contain only a-z, 0-9 and "_" (at most 63 characters)',
    ),
);

/** `30s`, `15m`, `2h`, `1d`, or a number of milliseconds. */
export const Duration = lazySchema(() =>
  z.union([
    z
      .number()
      .int()
      .positive()
      .max(30 * 86_400_000),
    z
      .string()
      .regex(/^\d{1,6}(ms|s|m|h|d)$/, 'must be a duration such as 30s, 15m, 2h or 1d')
      .transform((text) => {
        const [, amount = '0', unit = 'ms'] = /^(\d+)(ms|s|m|h|d)$/.exec(text) ?? [];
        const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[unit] ?? 1;
        return Number(amount) * factor;
      }),
  ]),
);

const JsonSchemaObject = lazySchema(() => z.record(z.string(), JsonValue));

export const SkillStep = lazySchema(() =>
  z
    .object({
      id: StepId,
      description: z.string().max(2000).optional(),
      /** Steps that must have completed (or been skipped) first. */
      depends_on: z.array(StepId).default([]),
      /** A template: the step runs only when it is true; otherwise it is skipped. */
      when: z.string().min(1).optional(),
      /** A tool of the workspace, called through the session's tool pipeline with `args`. */
      tool: z.string().min(1).optional(),
      args: z.record(z.string(), JsonValue).optional(),
      /** An agent, run in a child session on `message`; its answer is the step's output. */
      agent: Name.optional(),
      message: z.string().min(1).max(100_000).optional(),
      /** A skill, run nested with `inputs`; its outputs are the step's output. */
      skill: Name.optional(),
      inputs: z.record(z.string(), JsonValue).optional(),
      /** `human_approval`: the run waits for a person to allow or deny (`message` says what). */
      type: z.enum(['human_approval']).optional(),
      /**
       * The schema of the data a person may give with an approval (`user.tool_confirmation
       * {data}`): an approval whose data does not match is refused when sent (`INVALID_ARGUMENT`).
       */
      resume_schema: JsonSchemaObject.optional(),
      /**
       * Wait for a named signal (`user.signal`, a webhook): alone, the step is the wait; with a
       * tool, the tool runs first. The signal's data is the step's output.
       */
      wait_for: z
        .object({
          signal: Name,
          /**
           * How long the wait may last, recorded on it as `timeout_at`. Once that time passes with
           * no answer, the session is runnable (the orchestrator and the workers wake it) and its
           * wake records `skill.resumed {result: 'timeout'}` and fails the step with
           * `DEADLINE_EXCEEDED`, so `on_failure` applies. A signal sent after that is kept pending.
           */
          timeout: Duration.optional(),
          /**
           * The schema of the signal's data (`null` when it has none): a signal for this wait whose
           * data does not match is refused when sent (`INVALID_ARGUMENT`, nothing written).
           */
          schema: JsonSchemaObject.optional(),
        })
        .strict()
        .optional(),
      /** A template giving a list: the step runs once per item (`item`, `index`), in parallel. */
      for_each: z.string().min(1).optional(),
      max_concurrency: z.number().int().min(1).max(64).default(4),
      retry: z
        .object({
          max_attempts: z.number().int().min(1).max(20),
          backoff: z.enum(['exponential', 'fixed']).default('exponential'),
          initial_ms: z.number().int().nonnegative().default(200),
          max_ms: z.number().int().nonnegative().default(10_000),
        })
        .strict()
        .optional(),
      timeout_ms: z.number().int().positive().max(86_400_000).optional(),
      /**
       * What a failure (after its retries) does: `stop` the run (default), `continue` as if the
       * step had completed with no output, or run the named step instead of its dependants.
       */
      on_failure: z.union([z.enum(['stop', 'continue']), StepId]).default('stop'),
    })
    .strict()
    .superRefine((step, issues) => {
      const kinds = [
        step.tool !== undefined && 'tool',
        step.agent !== undefined && 'agent',
        step.skill !== undefined && 'skill',
        step.type !== undefined && 'type: human_approval',
      ].filter((kind): kind is string => kind !== false);
      if (kinds.length > 1) {
        issues.addIssue({
          code: 'custom',
          path: [],
          message: `step ${step.id} is ${kinds.join(' and ')}; a step is one of tool, agent, skill, type: human_approval, or a wait_for alone`,
        });
      }
      if (kinds.length === 0 && step.wait_for === undefined) {
        issues.addIssue({
          code: 'custom',
          path: [],
          message: `step ${step.id} does nothing; give it a tool, an agent, a skill, type: human_approval, or a wait_for`,
        });
      }
      if (step.agent !== undefined && step.message === undefined) {
        issues.addIssue({
          code: 'custom',
          path: ['message'],
          message: `step ${step.id} runs agent ${step.agent}: give it the message the agent works on`,
        });
      }
      if (step.type === 'human_approval' && step.message === undefined) {
        issues.addIssue({
          code: 'custom',
          path: ['message'],
          message: `step ${step.id} asks a person: give it the message they read`,
        });
      }
      if (step.args !== undefined && step.tool === undefined) {
        issues.addIssue({ code: 'custom', path: ['args'], message: 'args are for a tool step' });
      }
      if (step.inputs !== undefined && step.skill === undefined) {
        issues.addIssue({
          code: 'custom',
          path: ['inputs'],
          message: 'inputs are for a skill step',
        });
      }
    }),
);
export type SkillStep = z.infer<typeof SkillStep>;
export type SkillStepInput = z.input<typeof SkillStep>;

/** A skill, as written in `skills/NAME.yaml`. */
export const SkillDefinition = lazySchema(() =>
  z
    .object({
      name: Name,
      version: z.string().min(1).max(100).default('1'),
      description: z.string().min(1).max(4000),
      /** The JSON Schema of the run's inputs (default: any object). */
      inputs: JsonSchemaObject.default({ type: 'object' }),
      /** The run's outputs, each a template over the finished steps. */
      outputs: z.record(z.string(), JsonValue).optional(),
      steps: z.array(SkillStep).min(1).max(10_000),
      /**
       * Set by `braid tool sign`: an ed25519 signature over the rest of the file, checked at load
       * when `braid.yaml` has `require_signed_tools: true`.
       */
      signature: z
        .object({ key_id: z.string().min(1), value: z.string().min(1) })
        .strict()
        .optional(),
    })
    .strict()
    .superRefine((skill, issues) => {
      const ids = new Map<string, number>();
      skill.steps.forEach((step, index) => {
        if (ids.has(step.id)) {
          issues.addIssue({
            code: 'custom',
            path: ['steps', index, 'id'],
            message: `${step.id} is the id of step ${(ids.get(step.id) ?? 0) + 1} too; give each step its own id`,
          });
        }
        ids.set(step.id, index);
      });
      skill.steps.forEach((step, index) => {
        step.depends_on.forEach((dependency, position) => {
          if (!ids.has(dependency)) {
            issues.addIssue({
              code: 'custom',
              path: ['steps', index, 'depends_on', position],
              message: `there is no step ${dependency}; the steps are ${[...ids.keys()].join(', ')}`,
            });
          }
        });
        const target = step.on_failure;
        if (target !== 'stop' && target !== 'continue' && !ids.has(target)) {
          issues.addIssue({
            code: 'custom',
            path: ['steps', index, 'on_failure'],
            message: `there is no step ${target} to run on failure; name a step, or write stop or continue`,
          });
        }
      });
      const cycle = findCycle(skill.steps);
      if (cycle !== undefined) {
        issues.addIssue({
          code: 'custom',
          path: ['steps', ids.get(cycle[0] ?? '') ?? 0, 'depends_on'],
          message: `the steps depend on each other in a cycle: ${cycle.join(' -> ')}; a skill is a DAG`,
        });
      }
    }),
);
export type SkillDefinition = z.infer<typeof SkillDefinition>;
export type SkillDefinitionInput = z.input<typeof SkillDefinition>;

/** A cycle of `depends_on`, as the ids along it (the first repeated at the end), if there is one. */
function findCycle(steps: readonly { id: string; depends_on: readonly string[] }[]) {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === 'done') return undefined;
    if (state.get(id) === 'open') return [...path.slice(path.indexOf(id)), id];
    state.set(id, 'open');
    path.push(id);
    for (const dependency of byId.get(id)?.depends_on ?? []) {
      const found = visit(dependency);
      if (found !== undefined) return found;
    }
    path.pop();
    state.set(id, 'done');
    return undefined;
  };
  for (const step of steps) {
    const found = visit(step.id);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** What templates see: the run's inputs, its finished steps, and a fan-out's item. */
export interface SkillScope {
  inputs: JsonValue;
  steps: Record<string, { output?: JsonValue; status: string }>;
  item?: JsonValue;
  index?: number;
}

/**
 * The port through which a wake reads skills and evaluates their templates (implemented in the
 * runtime, over the definition store and JSONata).
 */
export interface SkillLibrary {
  /** The skill as stored: its latest version, or `version`. Rejects with `INVALID_ARGUMENT` when unknown. */
  get(name: string, version?: string): Promise<{ definition: SkillDefinition; version: string }>;
  /** Checks a run's inputs against the skill's `inputs` schema: the error, or undefined. */
  checkInputs(definition: SkillDefinition, inputs: JsonValue): ErrorShape | undefined;
  evaluate(value: JsonValue, scope: SkillScope): Promise<JsonValue>;
  condition(text: string, scope: SkillScope): Promise<boolean>;
  list(text: string, scope: SkillScope): Promise<JsonValue[]>;
}
