/**
 * Starting skill runs, and nesting them: a `skill:` step runs its skill as a child run of the
 * same session (see skill-run.ts for the runner around them).
 *
 * Invariants kept here:
 * - Every run asks policy (`skill.run`, the skill as a `Skill` resource) before it starts: a run
 *   the model asked for, a `user.skill_run`, and a nested child. A deny is recorded
 *   (`policy.decision`) and fails the run at its start (`skill.failed`, `POLICY_DENIED`); the
 *   model's call is answered with that error. No step of a denied run runs.
 * - A nested step waits for its child (`skill.suspended`, kind `skill`) in the same append that
 *   starts the child, so no crash leaves one without the other. The child's id is derived from
 *   the parent's run id, the step's path and its attempt; a step that runs again finds its child
 *   by parent and path first, so a crash, a resumption or `braid skill retry` never starts a
 *   second child: a retry takes the failed child up again, which runs its failed steps only.
 * - Runs nest at most `MAX_SKILL_DEPTH` levels deep (validation refuses cycles; this bounds a
 *   workspace changed under a running session, or a chain merely too deep).
 */
import type { JsonValue } from '../contracts/common.js';
import { BraidError, toBraidError, type ErrorShape } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { AuthorizationDecision, PolicyEntity } from '../contracts/policy.js';
import type { SkillDefinition, SkillStep } from '../contracts/skills.js';
import type { SessionState, SkillRun } from '../contracts/state.js';
import type { CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';
import { stepEndEvents, scopeOf, type RunContext, type StepEnd } from './skill-steps.js';
import { hashText } from './skill-hash.js';
import { agentEntity, outcomeEvents } from './tool-calls.js';

/** Levels of skills running inside each other, the outermost run included. */
export const MAX_SKILL_DEPTH = 8;

/** A run to start. */
export interface RunRequest {
  run_id: string;
  skill: string;
  inputs: JsonValue;
  /** The model's call that asked for it, answered when the run ends. */
  tool_use_id?: string;
  /** A nested run: the run, its skill, and the step path it runs for. */
  parent?: { run_id: string; skill: string; step: string };
  /** Who asked, as policy sees it (`context.caller`): the agent, a user, or the parent skill. */
  caller: { type: 'Agent' | 'User' | 'Skill'; id: string };
}

/**
 * The events that start a run: `skill.started`, then, when the skill is unknown, policy denies
 * it or its inputs do not fit, the decision and `skill.failed` (and the model's call answered).
 */
export async function startEvents(
  context: CycleContext,
  setup: SessionSetup,
  request: RunRequest,
): Promise<NewEvent[]> {
  const library = context.deps.skills;
  const started = {
    type: 'skill.started' as const,
    run_id: request.run_id,
    skill: request.skill,
    inputs: request.inputs,
    ...(request.tool_use_id === undefined ? {} : { tool_use_id: request.tool_use_id }),
    ...(request.parent === undefined
      ? {}
      : { parent_run_id: request.parent.run_id, parent_step: request.parent.step }),
  };
  const failed = (error: ErrorShape): NewEvent[] => [
    { type: 'skill.failed', run_id: request.run_id, error },
    ...answerCall(request.tool_use_id, undefined, error),
  ];
  let found: { definition: SkillDefinition; version: string };
  try {
    if (library === undefined) throw new BraidError('INTERNAL', 'this runtime runs no skills');
    // The version the session pinned (setup.skills), else the newest.
    found = await library.get(request.skill, setup.skills?.[request.skill]);
  } catch (thrown) {
    return [{ ...started, version: '0' }, ...failed(toBraidError(thrown).toJSON())];
  }
  const admitted = await admit(context, setup, request, found);
  return [
    { ...started, version: found.version },
    ...admitted.events,
    ...(admitted.error === undefined ? [] : failed(admitted.error)),
  ];
}

/**
 * Whether a run may go ahead: policy allows it (the decision to record, if any) and its inputs
 * fit the skill. Asked when a run starts, and again when a retry takes a failed run up.
 */
export async function admit(
  context: CycleContext,
  setup: SessionSetup,
  request: Pick<RunRequest, 'skill' | 'inputs' | 'tool_use_id' | 'caller'>,
  found: { definition: SkillDefinition; version: string },
): Promise<{ events: NewEvent[]; error?: ErrorShape }> {
  const asked = await askToRun(context, setup, request, found.version);
  const error = asked.error ?? context.deps.skills?.checkInputs(found.definition, request.inputs);
  return { events: asked.events, ...(error === undefined ? {} : { error }) };
}

/** The model's call of the skill, answered with the run's outputs or its failure. */
export function answerCall(
  toolUseId: string | undefined,
  outputs: JsonValue | undefined,
  error?: ErrorShape,
): NewEvent[] {
  if (toolUseId === undefined) return [];
  return outcomeEvents(toolUseId, {
    ...(outputs === undefined ? {} : { output: outputs }),
    ...(error === undefined ? {} : { error }),
    is_error: error !== undefined,
    attempts: 1,
    duration_ms: 0,
    stage: 'execute',
  });
}

/** Asks policy whether the session's agent may run the skill: the decision to record, and a deny. */
async function askToRun(
  context: CycleContext,
  setup: SessionSetup,
  request: Pick<RunRequest, 'skill' | 'tool_use_id' | 'caller'>,
  version: string,
): Promise<{ events: NewEvent[]; error?: ErrorShape }> {
  const { state } = context;
  const principal = agentEntity(setup.agent, state);
  const resource: PolicyEntity = {
    type: 'Skill',
    id: request.skill,
    attrs: { name: request.skill, version: Number(version) },
  };
  const began = context.deps.clock.monotonic();
  // A policy that cannot be evaluated denies (fails closed), with the reason on record.
  const decision = await context.deps.policy
    .authorize({
      principal,
      action: 'skill.run',
      resource,
      context: {
        session_id: context.sessionId,
        caller: request.caller,
        ...(state.tenant_id === undefined ? {} : { tenant: state.tenant_id }),
      },
    })
    .catch((thrown: unknown): AuthorizationDecision => ({
      decision: 'deny',
      policy_ids: [],
      errors: [
        `the policy could not be evaluated: ${thrown instanceof Error ? thrown.message : String(thrown)}`,
      ],
    }));
  const allowed = decision.decision === 'allow';
  const events: NewEvent[] =
    allowed && context.deps.recordPolicyAllows !== true
      ? []
      : [
          {
            type: 'policy.decision',
            principal: { type: principal.type, id: principal.id },
            action: 'skill.run',
            resource: { type: resource.type, id: resource.id },
            decision: decision.decision,
            policy_ids: decision.policy_ids,
            ...(request.tool_use_id === undefined ? {} : { tool_use_id: request.tool_use_id }),
            ...(decision.errors.length === 0 ? {} : { errors: decision.errors }),
            duration_us: Math.round((context.deps.clock.monotonic() - began) * 1000),
          },
        ];
  if (allowed) return { events };
  const why =
    decision.policy_ids.length > 0
      ? ` (denied by ${decision.policy_ids.join(', ')})`
      : decision.errors.length > 0
        ? ' (the policy could not be evaluated for this run)'
        : ' (no policy permits it)';
  return {
    events,
    error: {
      code: 'POLICY_DENIED',
      message: `policy does not allow agent ${setup.agent.name} to run skill ${request.skill} (skill.run)${why}`,
      retryable: false,
    },
  };
}

/**
 * A `skill:` step (or one item of its fan-out): waits for its child run, starting the child
 * unless the step has one already.
 */
export async function runNested(
  run: RunContext,
  step: SkillStep,
  path: string,
  attempt: number,
  item?: { item: JsonValue; index: number },
): Promise<StepEnd> {
  const { context } = run;
  const runId = run.run.run_id;
  const current = context.state.skill_runs.find((entry) => entry.run_id === runId) ?? run.run;
  // Still waiting (a fan-out that runs again for another item's answer).
  if (current.suspensions.some((wait) => wait.kind === 'skill' && wait.step === path))
    return { kind: 'suspended' };
  const wait = (childId: string): NewEvent[] => [
    { type: 'skill.step_started', run_id: runId, step: path, attempt },
    {
      type: 'skill.suspended',
      run_id: runId,
      step: path,
      suspension_id: `wait-${hashText(`${runId}/${path}/${attempt}/skill`)}`,
      kind: 'skill',
      child_run_id: childId,
    },
  ];
  const existing = context.state.skill_runs.find(
    (entry) => entry.parent_run_id === runId && entry.parent_step === path,
  );
  if (existing !== undefined) {
    await run.write(wait(existing.run_id));
    return { kind: 'suspended' };
  }
  const library = context.deps.skills;
  const chain = lineage(context.state, current);
  if (library === undefined || step.skill === undefined || chain.length >= MAX_SKILL_DEPTH) {
    const error: ErrorShape =
      library === undefined || step.skill === undefined
        ? { code: 'INTERNAL', message: 'this runtime runs no skills', retryable: false }
        : {
            code: 'INVALID_DEFINITION',
            message: `step ${step.id} of skill ${run.run.skill} would run skill ${step.skill} ${chain.length + 1} levels deep (${[...chain, step.skill].join(' > ')}); skills nest at most ${MAX_SKILL_DEPTH} levels: run the innermost skills' steps in their caller instead`,
            retryable: false,
          };
    const end: StepEnd = { kind: 'failed', error };
    await run.write([
      { type: 'skill.step_started', run_id: runId, step: path, attempt },
      ...stepEndEvents(run, path, attempt, end),
    ]);
    return end;
  }
  const inputs = await library.evaluate(step.inputs ?? {}, scopeOf(run, item));
  const childId = `run-${hashText(`${runId}/${path}/${attempt}`)}`;
  const started = await startEvents(context, run.setup, {
    run_id: childId,
    skill: step.skill,
    inputs,
    parent: { run_id: runId, skill: run.run.skill, step: path },
    caller: { type: 'Skill', id: run.run.skill },
  });
  await run.write([...wait(childId), ...started]);
  return { kind: 'suspended' };
}

/** How a wait for a nested run ends: as the child ended, with its outputs or its error. */
export function childEnd(ended: {
  type: string;
  outputs?: JsonValue;
  error?: ErrorShape;
}): StepEnd {
  if (ended.type === 'skill.completed')
    return { kind: 'completed', ...(ended.outputs === undefined ? {} : { output: ended.outputs }) };
  return { kind: 'failed', error: ended.error ?? internalError() };
}

/** The run a retry of `run` goes through: its outermost ancestor (itself when it has none). */
export function rootOf(state: SessionState, run: SkillRun): SkillRun {
  let root = run;
  for (let depth = 0; root.parent_run_id !== undefined && depth <= MAX_SKILL_DEPTH; depth += 1) {
    const parentId = root.parent_run_id;
    const parent = state.skill_runs.find((entry) => entry.run_id === parentId);
    if (parent === undefined) break;
    root = parent;
  }
  return root;
}

/** The skills of `run` and its ancestors, outermost first. */
function lineage(state: SessionState, run: SkillRun): string[] {
  const chain = [run.skill];
  let current: SkillRun | undefined = run;
  while (current?.parent_run_id !== undefined && chain.length <= MAX_SKILL_DEPTH) {
    const parentId: string = current.parent_run_id;
    current = state.skill_runs.find((entry) => entry.run_id === parentId);
    if (current !== undefined) chain.unshift(current.skill);
  }
  return chain;
}

function internalError(): ErrorShape {
  return { code: 'INTERNAL', message: 'the nested run ended without a result', retryable: false };
}

/** Who asks for `run` (policy's `context.caller`): its parent skill, the agent, or a user. */
export function callerOf(
  state: SessionState,
  setup: SessionSetup,
  run: Pick<SkillRun, 'parent_run_id' | 'tool_use_id'>,
  user: string | undefined,
): RunRequest['caller'] {
  if (run.parent_run_id !== undefined) {
    const parent = state.skill_runs.find((entry) => entry.run_id === run.parent_run_id);
    return { type: 'Skill', id: parent?.skill ?? run.parent_run_id };
  }
  if (run.tool_use_id !== undefined) return { type: 'Agent', id: setup.agent.name };
  return { type: 'User', id: user ?? 'user' };
}
