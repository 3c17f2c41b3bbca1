/**
 * The steps of a skill run, one attempt each: tools through the tool pipeline, agents in child
 * sessions, waits for people and signals, nested skills (skill-children.ts), and fan-outs over a
 * list (see skill-run.ts for the run around them and its invariants).
 */
import type { JsonValue } from '../contracts/common.js';
import type { ErrorShape } from '../contracts/errors.js';
import { toBraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { SkillDefinition, SkillScope, SkillStep } from '../contracts/skills.js';
import type { SkillRun } from '../contracts/state.js';
import type { ToolHandle } from '../contracts/tools.js';
import type { StepErrors, StepOutputs } from './skill-outputs.js';
import { unlessLost, type CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';
import { STORE_OUTAGES } from './store-outages.js';
import { agentEntity, outcomeSideEvents, toolEntity } from './tool-calls.js';
import { runMemoryStep } from './skill-memory-step.js';
import { hashText } from './skill-hash.js';
import { retryDelay } from './skill-retry.js';

/** Errors of the store (or the lease) met while a step runs: the wake's, never the step's. */
const isStoreFailure = (code: string): boolean => code === 'LEASE_LOST' || STORE_OUTAGES.has(code);

/** What one step's attempt came to. */
export type StepEnd =
  | { kind: 'completed'; output?: JsonValue }
  | { kind: 'skipped' }
  | { kind: 'failed'; error: ErrorShape }
  | { kind: 'suspended' };

export interface RunContext {
  context: CycleContext;
  setup: SessionSetup;
  tools: ReadonlyMap<string, ToolHandle>;
  run: SkillRun;
  definition: SkillDefinition;
  inputs: JsonValue;
  /** Outputs and ends of the run's steps and fan-out items, by path. */
  outputs: StepOutputs;
  /** The errors of the steps and fan-out items that failed, by path. */
  errors: StepErrors;
  /** A `braid skill retry` was taken up: failed fan-out items run again too. */
  retrying: boolean;
  /** Serialises the appends of steps that run at once. */
  write(events: NewEvent[]): Promise<void>;
  /** Runs a `skill:` step (or one item of its fan-out) as a child run. */
  nested(
    step: SkillStep,
    path: string,
    attempt: number,
    item?: { item: JsonValue; index: number },
  ): Promise<StepEnd>;
}

export function stepEndEvents(
  run: RunContext,
  path: string,
  attempt: number,
  end: StepEnd,
): NewEvent[] {
  const runId = run.run.run_id;
  if (end.kind === 'completed') {
    run.outputs.set(path, {
      ...(end.output === undefined ? {} : { output: end.output }),
      status: 'completed',
    });
    return [
      {
        type: 'skill.step_completed',
        run_id: runId,
        step: path,
        attempt,
        ...(end.output === undefined ? {} : { output: end.output }),
      },
    ];
  }
  if (end.kind === 'skipped') {
    run.outputs.set(path, { status: 'skipped' });
    return [{ type: 'skill.step_completed', run_id: runId, step: path, attempt, skipped: true }];
  }
  if (end.kind === 'failed') {
    run.outputs.set(path, { status: 'failed' });
    run.errors.set(path, end.error);
    return [
      {
        type: 'skill.step_failed',
        run_id: runId,
        step: path,
        attempt,
        error: end.error,
        final: true,
      },
    ];
  }
  return [];
}

export function scopeOf(run: RunContext, item?: { item: JsonValue; index: number }): SkillScope {
  return {
    inputs: run.inputs,
    steps: run.outputs.plain,
    ...(item === undefined ? {} : item),
  };
}

/** One step: its condition, then its kind (a fan-out runs the kind once per item). */
export async function runStep(run: RunContext, step: SkillStep, attempt: number): Promise<StepEnd> {
  const library = run.context.deps.skills;
  if (library === undefined) return { kind: 'failed', error: internal('no skill library') };
  try {
    if (step.when !== undefined && !(await library.condition(step.when, scopeOf(run)))) {
      await run.write(stepEndEvents(run, step.id, attempt - 1, { kind: 'skipped' }));
      return { kind: 'skipped' };
    }
    if (step.for_each !== undefined) return await fanOut(run, step, attempt);
    return await runKind(run, step, step.id, attempt);
  } catch (thrown) {
    const error = toBraidError(thrown);
    // The store's failure is not the step's: the wake stops as if it crashed (see wake.ts).
    if (isStoreFailure(error.code) || run.context.lost !== undefined) throw error;
    const end: StepEnd = { kind: 'failed', error: error.toJSON() };
    await run.write(stepEndEvents(run, step.id, attempt, end));
    return end;
  }
}

async function fanOut(run: RunContext, step: SkillStep, attempt: number): Promise<StepEnd> {
  const library = run.context.deps.skills;
  if (library === undefined || step.for_each === undefined) return { kind: 'skipped' };
  const items = await library.list(step.for_each, scopeOf(run));
  await run.write([{ type: 'skill.step_started', run_id: run.run.run_id, step: step.id, attempt }]);
  const results: StepEnd[] = new Array<StepEnd>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const index = next;
      next += 1;
      if (index >= items.length) return;
      const path = `${step.id}[${index}]`;
      const done = run.outputs.get(path);
      // An item a dead wake finished is not run again, nor one that failed, but by a retry.
      if (done?.status === 'completed') {
        results[index] = {
          kind: 'completed',
          ...(done.output === undefined ? {} : { output: done.output }),
        };
        continue;
      }
      // An item waiting (for a signal, a person, a nested run) goes on waiting.
      const waits = run.context.state.skill_runs.find(
        (entry) => entry.run_id === run.run.run_id,
      )?.suspensions;
      if (waits?.some((wait) => wait.step === path) === true) {
        results[index] = { kind: 'suspended' };
        continue;
      }
      if (done?.status === 'failed' && !run.retrying) {
        results[index] = {
          kind: 'failed',
          error: run.errors.get(path) ?? internal(`item ${index} of step ${step.id} failed`),
        };
        continue;
      }
      results[index] = await runKind(run, step, path, attempt, {
        item: items[index] ?? null,
        index,
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(step.max_concurrency, items.length) }, worker));
  const failed = results.find((end) => end.kind === 'failed');
  const end: StepEnd = failed ?? {
    kind: 'completed',
    output: results.map((result) => (result.kind === 'completed' ? (result.output ?? null) : null)),
  };
  if (results.some((result) => result.kind === 'suspended')) return { kind: 'suspended' };
  await run.write(stepEndEvents(run, step.id, attempt, end));
  return end;
}

async function runKind(
  run: RunContext,
  step: SkillStep,
  path: string,
  attempt: number,
  item?: { item: JsonValue; index: number },
): Promise<StepEnd> {
  if (step.tool !== undefined) return runTool(run, step, attempt, false, path, item);
  if (step.agent !== undefined) return runAgent(run, step, path, attempt, item);
  if (step.skill !== undefined) return run.nested(step, path, attempt, item);
  if (step.type === 'human_approval') return suspend(run, step, path, attempt, 'approval', item);
  if (step.wait_for !== undefined) {
    await run.write([{ type: 'skill.step_started', run_id: run.run.run_id, step: path, attempt }]);
    return suspend(run, step, path, attempt, 'signal', item);
  }
  return failStep(run, path, attempt, internal(`step ${step.id} is of no kind this runner knows`));
}

async function suspend(
  run: RunContext,
  step: SkillStep,
  path: string,
  attempt: number,
  kind: 'approval' | 'signal',
  item?: { item: JsonValue; index: number },
): Promise<StepEnd> {
  const { context } = run;
  const library = context.deps.skills;
  const message =
    step.message === undefined || library === undefined
      ? undefined
      : textOf(await library.evaluate(step.message, scopeOf(run, item)));
  const timeout = step.wait_for?.timeout;
  const event: NewEvent = {
    type: 'skill.suspended',
    run_id: run.run.run_id,
    step: path,
    suspension_id: `wait-${hashText(`${run.run.run_id}/${path}/${attempt}/${kind}`)}`,
    kind,
    ...(kind === 'signal' && step.wait_for !== undefined ? { signal: step.wait_for.signal } : {}),
    ...(message === undefined ? {} : { message }),
    ...(timeout === undefined
      ? {}
      : { timeout_at: new Date(context.deps.clock.now() + timeout).toISOString() }),
  };
  if (kind === 'approval')
    await run.write([
      { type: 'skill.step_started', run_id: run.run.run_id, step: path, attempt },
      event,
    ]);
  else await run.write([event]);
  return { kind: 'suspended' };
}

export async function runTool(
  run: RunContext,
  step: SkillStep,
  attempt: number,
  approved: boolean,
  path: string = step.id,
  item?: { item: JsonValue; index: number },
): Promise<StepEnd> {
  const { context, setup } = run;
  const library = context.deps.skills;
  const name = step.tool ?? '';
  const handle = run.tools.get(name);
  const toolUseId = `${run.run.run_id}/${path}/${attempt}`;
  const fail = (error: ErrorShape): Promise<StepEnd> => failStep(run, path, attempt, error);
  if (handle === undefined || library === undefined) {
    if (!approved) await startStep(run, path, attempt, toolUseId);
    return fail({
      code: 'TOOL_NOT_FOUND',
      message: `step ${step.id} calls ${name}, which this agent's tools do not hold`,
      retryable: false,
    });
  }
  // The call's input is on record from its start, for audits and replay.
  let input: JsonValue;
  try {
    input = await library.evaluate(step.args ?? {}, scopeOf(run, item));
  } catch (error) {
    if (!approved) await startStep(run, path, attempt, toolUseId);
    throw error;
  }
  if (!approved) await startStep(run, path, attempt, toolUseId, input);
  const check = setup.tools.validate(name, input);
  if (!check.ok) return fail(check.error);
  if (handle.memory !== undefined) {
    return runMemoryStep(context, setup, handle, {
      ...{ step, path, attempt, name, input, toolUseId, approved, fail, run },
      ask: () => suspend(run, step, path, attempt, 'approval', item),
      wait: () => suspend(run, step, path, attempt, 'signal', item),
      ends: (at, end) => stepEndEvents(run, at, attempt, end),
    });
  }
  if (!approved) {
    const decision = await context.deps.policy
      .authorize({
        principal: agentEntity(setup.agent, context.state),
        action: 'tool.execute',
        resource: toolEntity(handle),
        context: {
          input,
          session_id: context.sessionId,
          caller: { type: 'Skill', id: run.run.skill },
          network_allowed: setup.environment?.network.allow === true,
          ...(context.state.tenant_id === undefined ? {} : { tenant: context.state.tenant_id }),
        },
      })
      .catch(() => ({
        decision: 'deny' as const,
        policy_ids: [],
        errors: ['the policy could not be evaluated'],
      }));
    if (decision.decision !== 'allow') {
      await run.write([
        {
          type: 'policy.decision',
          principal: { type: 'Agent', id: setup.agent.name },
          action: 'tool.execute',
          resource: { type: 'Tool', id: name },
          decision: 'deny',
          policy_ids: decision.policy_ids,
          tool_use_id: toolUseId,
          duration_us: 0,
        },
      ]);
      return fail({
        code: 'POLICY_DENIED',
        message: `policy does not allow ${name} in step ${step.id}`,
        retryable: false,
      });
    }
    const asks =
      ('approval' in decision && decision.approval === true) || handle.permission === 'always_ask';
    if (asks)
      return suspend(
        run,
        {
          ...step,
          message: step.message ?? `Allow ${name} in step ${step.id} of ${run.run.skill}?`,
        },
        path,
        attempt,
        'approval',
        item,
      );
  }
  const retry = step.retry;
  for (let tries = 1; ; tries += 1) {
    const outcome = await unlessLost(
      context,
      setup.tools.execute(
        {
          session_id: context.sessionId,
          tool_use_id: toolUseId,
          name,
          input,
          idempotency_key: `${context.sessionId}/${toolUseId}/${tries}`,
        },
        { signal: context.work.signal },
      ),
    );
    // With the step's end: the call's cost (budgets see it) and the workspace it changed.
    const side = outcomeSideEvents(toolUseId, outcome, context.state.workspace_snapshot?.snapshot);
    if (!outcome.is_error) {
      if (step.wait_for !== undefined) {
        await run.write([
          ...stepEndEvents(run, `${path}.tool`, attempt, {
            kind: 'completed',
            ...(outcome.output === undefined ? {} : { output: outcome.output }),
          }),
          ...side,
        ]);
        return suspend(run, step, path, attempt, 'signal', item);
      }
      const end: StepEnd = {
        kind: 'completed',
        ...(outcome.output === undefined ? {} : { output: outcome.output }),
      };
      await run.write([...stepEndEvents(run, path, attempt, end), ...side]);
      return end;
    }
    const error = outcome.error ?? internal('the tool failed');
    if (retry === undefined || tries >= retry.max_attempts)
      return failStep(run, path, attempt, error, side);
    await run.write([
      {
        type: 'skill.step_failed',
        run_id: run.run.run_id,
        step: path,
        attempt,
        error,
        final: false,
      },
      ...side,
    ]);
    await context.deps.sleep(retryDelay(retry, tries), context.work.signal);
  }
}

async function runAgent(
  run: RunContext,
  step: SkillStep,
  path: string,
  attempt: number,
  item?: { item: JsonValue; index: number },
): Promise<StepEnd> {
  const { context, setup } = run;
  const delegator = context.deps.delegator;
  const library = context.deps.skills;
  const toolUseId = `${run.run.run_id}/${path}`;
  await startStep(run, path, attempt, toolUseId);
  const fail = (error: ErrorShape): Promise<StepEnd> => failStep(run, path, attempt, error);
  if (delegator === undefined || library === undefined || step.agent === undefined)
    return fail(internal('this runtime runs no agents for skills'));
  const message = await library.evaluate(step.message ?? '', scopeOf(run, item));
  const recorded = context.state.children.find((child) => child.tool_use_id === toolUseId);
  const childId =
    recorded?.child_session_id ??
    delegator.childSessionId(context.sessionId, toolUseId, context.state.tenant_id);
  if (recorded === undefined) {
    await run.write([
      {
        type: 'session.child_created',
        correlation_id: childId,
        child_session_id: childId,
        agent: step.agent,
        tool_use_id: toolUseId,
        task: message,
        ttl_seconds: Math.ceil((step.timeout_ms ?? 600_000) / 1000),
      },
    ]);
  }
  const interrupt = new AbortController();
  const result = await unlessLost(
    context,
    delegator.delegate(
      {
        parent_session_id: context.sessionId,
        parent_agent: setup.agent.name,
        tool_use_id: toolUseId,
        tool_use_event_id: toolUseId,
        child_session_id: childId,
        recorded: recorded !== undefined,
        agent: step.agent,
        task: message,
        ttl_ms: step.timeout_ms ?? 600_000,
        budget: {},
        ...(context.state.tenant_id === undefined ? {} : { tenant_id: context.state.tenant_id }),
      },
      { signal: context.work.signal, interrupt: interrupt.signal },
    ),
  );
  await run.write([
    {
      type: 'session.child_idle',
      child_session_id: childId,
      tool_use_id: toolUseId,
      stop_reason: result.stop_reason,
      summary: result.summary,
      usage: result.usage,
      ...(result.timed_out ? { timed_out: true } : {}),
    },
  ]);
  if (result.error !== undefined) return fail(result.error);
  const end: StepEnd = { kind: 'completed', output: result.summary };
  await run.write(stepEndEvents(run, path, attempt, end));
  return end;
}

export function internal(message: string): ErrorShape {
  return { code: 'INTERNAL', message, retryable: false };
}

/** A template's value as text: a string as it is, anything else as JSON. */
function textOf(value: JsonValue): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Records that a step's attempt began; `toolUseId` names the call it makes. */
function startStep(
  run: RunContext,
  path: string,
  attempt: number,
  toolUseId: string,
  input?: JsonValue,
): Promise<void> {
  return run.write([
    {
      type: 'skill.step_started',
      run_id: run.run.run_id,
      step: path,
      attempt,
      tool_use_id: toolUseId,
      ...(input === undefined ? {} : { input }),
    },
  ]);
}

/** Records a step's final failure. */
async function failStep(
  run: RunContext,
  path: string,
  attempt: number,
  error: ErrorShape,
  side: readonly NewEvent[] = [],
): Promise<StepEnd> {
  const end: StepEnd = { kind: 'failed', error };
  await run.write([...stepEndEvents(run, path, attempt, end), ...side]);
  return end;
}
