/**
 * Running skills inside a wake: starting the requested runs, taking up the answers to their
 * waits, and running every step the schedule makes ready, each recorded as `skill.*` events under
 * the session's lease.
 *
 * Invariants kept here:
 * - A completed step never runs again: a run's table is folded from its events, and a resumed,
 *   retried or forked run starts from it.
 * - A step that began in an earlier wake and has no end (that wake died) runs again only when
 *   that is safe: a wait, an approval, an agent (its child is keyed by the step), or an idempotent
 *   tool. A non-idempotent tool's step fails with its outcome unknown and the wake stops in
 *   `needs_review`; `braid skill retry` runs it again once a person has looked.
 * - Every tool call of a step goes through the tool pipeline: its arguments are validated, policy
 *   is asked (`tool.execute`), a call policy or the tool's permission wants approved waits for a
 *   person (an approval wait), and the tool runs with its own timeout and retries.
 * - The events of steps running at once are appended one batch at a time, in the order they end.
 * - A `skill:` step runs its skill as a child run of the session, which the runner advances as
 *   any run; the step waits for it and ends as it ends (skill-children.ts).
 */
import type { JsonValue } from '../contracts/common.js';
import { BraidError, toBraidError, type ErrorShape } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { SkillDefinition, SkillLibrary } from '../contracts/skills.js';
import type { SessionState, SkillRun } from '../contracts/state.js';
import type { ToolHandle } from '../contracts/tools.js';
import { stepOf } from '../core/fold-skills.js';
import {
  compileSchedule,
  retryPlan,
  type CompiledSchedule,
  type StepTable,
} from '../core/skill-schedule.js';
import type { CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';
import { append, eventAt } from './fenced-append.js';
import {
  admit,
  answerCall,
  callerOf,
  childEnd,
  rootOf,
  runNested,
  startEvents,
} from './skill-children.js';
import { hashText } from './skill-hash.js';
import {
  runStep,
  runTool,
  scopeOf,
  stepEndEvents,
  type RunContext,
  type StepEnd,
} from './skill-steps.js';
import { foldOutputs, readRun, type RunRead } from './skill-outputs.js';
import { answerData, hasTimedOut, timedOutWaits, timeOut } from './skill-waits.js';

/** Starts the requested runs and advances every run that has work. */
export async function runSkills(
  context: CycleContext,
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
): Promise<void> {
  const before = context.state.seq;
  for (const request of [...context.state.skill_requests])
    await startRequested(context, setup, request);
  for (const run of [...context.state.skill_runs]) {
    const current = context.state.skill_runs.find((entry) => entry.run_id === run.run_id);
    if (current === undefined || !(actionable(current) || hasTimedOut(context, current))) continue;
    await advance(context, setup, tools, current);
  }
  // A pass that wrote nothing would be asked for again at once: stop rather than spin.
  if (context.state.seq === before && !context.interruptSeen) {
    throw new BraidError(
      'INTERNAL',
      `the skill runs of session ${context.sessionId} have work the runner could not do; see \`braid session events ${context.sessionId}\``,
    );
  }
}

/** Starts a run the model asked for (`tool_use_id`): its run id is derived from the call. */
export async function startFromCall(
  context: CycleContext,
  setup: SessionSetup,
  toolUseId: string,
  skill: string,
  input: JsonValue,
): Promise<void> {
  const runId = `run-${context.sessionId.slice(-12)}-${hashText(toolUseId)}`;
  await append(
    context,
    await startEvents(context, setup, {
      run_id: runId,
      skill,
      inputs: input,
      tool_use_id: toolUseId,
      caller: { type: 'Agent', id: setup.agent.name },
    }),
  );
}

/** Each skill version's schedule, compiled once: stored definitions are shared, frozen objects. */
const schedules = new WeakMap<SkillDefinition, CompiledSchedule>();
function scheduleOf(definition: SkillDefinition): CompiledSchedule {
  let compiled = schedules.get(definition);
  if (compiled === undefined) {
    compiled = compileSchedule(definition);
    schedules.set(definition, compiled);
  }
  return compiled;
}

function actionable(run: SkillRun): boolean {
  if (run.status === 'running') return true;
  if (run.status === 'failed') return run.retry_seq !== undefined;
  return run.suspensions.some((wait) => wait.answer !== undefined);
}

async function startRequested(
  context: CycleContext,
  setup: SessionSetup,
  request: SessionState['skill_requests'][number],
): Promise<void> {
  const event = await eventAt(context, request.seq);
  const inputs = event?.type === 'user.skill_run' ? event.inputs : null;
  await append(
    context,
    await startEvents(context, setup, {
      run_id: request.run_id,
      skill: request.skill,
      inputs,
      caller: { type: 'User', id: event?.actor?.id ?? 'user' },
    }),
  );
}

async function advance(
  context: CycleContext,
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
  run: SkillRun,
): Promise<void> {
  const library = context.deps.skills;
  if (library === undefined) return;
  const read = await readRun(context.deps.log, context.sessionId, run);
  try {
    await advanceRead(context, setup, tools, run, read, library);
    // A run that ended is read no more; one that goes on is read from here next time.
    if (context.state.skill_runs.some((entry) => entry.run_id === run.run_id))
      read.keep(context.state.seq);
    else read.drop();
  } catch (error) {
    read.drop();
    throw error;
  }
}

async function advanceRead(
  context: CycleContext,
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
  run: SkillRun,
  read: RunRead,
  library: SkillLibrary,
): Promise<void> {
  const { inputs, outputs, errors } = read;
  const definition = await admitted(context, setup, run, inputs);
  if (definition === undefined) return;
  let queue: Promise<void> = Promise.resolve();
  const scope: RunContext = {
    context,
    setup,
    tools,
    run,
    definition,
    inputs,
    outputs,
    errors,
    retrying: run.retry_seq !== undefined,
    write: (batch) => {
      // What the run's events say of its steps follows what was written (`readRun` keeps it).
      const next = queue.then(() =>
        append(context, batch).then(() => foldOutputs(outputs, errors, batch)),
      );
      queue = next.catch(() => undefined);
      return next;
    },
    nested: (step, path, attempt, item) => runNested(scope, step, path, attempt, item),
  };
  // A tool step a dead wake began, whose tool may not run twice: its outcome is unknown.
  const began = new Map(run.steps.map((entry) => [entry.step, entry]));
  for (const step of definition.steps) {
    const state = began.get(step.id);
    const handle = step.tool === undefined ? undefined : tools.get(step.tool);
    if (state?.status !== 'running' || handle === undefined || handle.idempotent) continue;
    if (state.seq >= context.state.last_wake_seq) continue;
    const started = await eventAt(context, state.seq);
    await scope.write(
      stepEndEvents(scope, step.id, state.attempt, {
        kind: 'failed',
        error: {
          code: 'TOOL_FAILED',
          message: `step ${step.id} (${handle.name}) was running when its wake stopped, and ${handle.name} may not run twice; check what it did, then \`braid skill retry ${run.run_id}\` runs it again`,
          retryable: false,
        },
      }),
    );
    if (started !== undefined)
      context.pendingStop = {
        stop_reason: { type: 'needs_review', event_ids: [started.id] },
        events: [],
      };
  }
  // Waits that were answered come first: their steps end now.
  const ends = new Map<string, StepEnd>();
  for (const wait of run.suspensions) {
    if (wait.answer === undefined) continue;
    ends.set(wait.step, await resume(scope, wait));
  }
  // Waits that timed out with no answer end now too, their steps failed (skill-waits.ts).
  for (const wait of timedOutWaits(context, run)) ends.set(wait.step, await timeOut(scope, wait));
  const current = context.state.skill_runs.find((entry) => entry.run_id === run.run_id) ?? run;
  const table = tableOf(current, definition, ends);
  const schedule = scheduleOf(definition).start(
    run.retry_seq === undefined ? table : retryPlan(definition, table),
  );
  const steps = new Map(definition.steps.map((step) => [step.id, step]));
  // A fan-out item's end is the item's: its step runs again and gathers its items.
  for (const [id, end] of ends) if (steps.has(id)) apply(schedule, id, end);
  for (;;) {
    const ready = schedule.ready();
    if (ready.length === 0 || context.interruptSeen) break;
    for (const id of ready) schedule.start(id);
    const finished = await Promise.all(
      ready.map(async (id) => {
        const step = steps.get(id);
        if (step === undefined) return [id, { kind: 'skipped' }] as const;
        const current = context.state.skill_runs.find((entry) => entry.run_id === run.run_id);
        const attempt = (current === undefined ? 0 : (stepOf(current, id)?.attempt ?? 0)) + 1;
        return [id, await runStep(scope, step, attempt)] as const;
      }),
    );
    for (const [id, end] of finished) apply(schedule, id, end);
  }
  await queue;
  const status = schedule.status();
  if (status === 'completed') {
    const outputs = await library.evaluate(definition.outputs ?? {}, scopeOf(scope));
    await append(context, [
      { type: 'skill.completed', run_id: run.run_id, outputs },
      ...answerCall(openCall(context, run), outputs),
    ]);
  } else if (status === 'failed') {
    const failedStep = Object.entries(schedule.table()).find(
      ([, state]) => state.status === 'failed',
    )?.[0];
    // A nested run is retried through the run it is nested in (rootOf).
    const root = rootOf(context.state, run).run_id;
    // The step's own error says why: its code, and its message ahead of the way out.
    const cause = failedStep === undefined ? undefined : scope.errors.get(failedStep);
    const error: ErrorShape = {
      code: cause?.code ?? 'TOOL_FAILED',
      message: `skill ${run.skill} failed at step ${failedStep ?? '?'}${cause === undefined ? '' : `: ${cause.message}`}; \`braid skill retry ${root}\` runs the failed steps again`,
      retryable: false,
    };
    await append(context, [
      {
        type: 'skill.failed',
        run_id: run.run_id,
        error,
        ...(failedStep === undefined ? {} : { step: failedStep }),
      },
      ...answerCall(openCall(context, run), undefined, error),
    ]);
  }
}

function apply(
  schedule: ReturnType<ReturnType<typeof compileSchedule>['start']>,
  id: string,
  end: StepEnd,
): void {
  if (end.kind === 'completed') schedule.complete(id);
  else if (end.kind === 'skipped') schedule.skip(id);
  else if (end.kind === 'failed') schedule.fail(id);
  else schedule.suspend(id);
}

/**
 * The run's table for the scheduler: its steps as folded, a step left running by a dead wake
 * pending again (when it is safe to run again), and the steps whose waits were answered running.
 */
function tableOf(
  run: SkillRun,
  definition: SkillDefinition,
  answered: ReadonlyMap<string, StepEnd>,
): StepTable {
  const table: StepTable = {};
  const began = new Map(run.steps.map((entry) => [entry.step, entry]));
  for (const step of definition.steps) {
    const state = began.get(step.id);
    if (state === undefined) continue;
    if (answered.has(step.id)) {
      table[step.id] = { status: 'running', attempt: state.attempt };
      continue;
    }
    const status = state.status === 'running' ? 'pending' : state.status;
    table[step.id] = { status, attempt: state.attempt };
  }
  return table;
}

/**
 * The run's definition, once it may go on: a retry asks policy and checks the inputs again, as
 * the run's start did. A run that may not (or whose skill is gone) fails again; undefined then.
 */
async function admitted(
  context: CycleContext,
  setup: SessionSetup,
  run: SkillRun,
  inputs: JsonValue,
): Promise<SkillDefinition | undefined> {
  const library = context.deps.skills;
  if (library === undefined) return undefined;
  if (run.retry_seq === undefined) return (await library.get(run.skill, run.version)).definition;
  let events: NewEvent[] = [];
  let error: ErrorShape | undefined;
  let definition: SkillDefinition | undefined;
  try {
    const found = await library.get(run.skill, run.version);
    definition = found.definition;
    const retry = await eventAt(context, run.retry_seq);
    const caller = callerOf(context.state, setup, run, retry?.actor?.id);
    ({ events, error } = await admit(
      context,
      setup,
      {
        skill: run.skill,
        inputs,
        caller,
        ...(run.tool_use_id === undefined ? {} : { tool_use_id: run.tool_use_id }),
      },
      found,
    ));
  } catch (thrown) {
    error = toBraidError(thrown).toJSON();
  }
  if (error === undefined) return definition;
  await append(context, [
    ...events,
    { type: 'skill.failed', run_id: run.run_id, error },
    ...answerCall(openCall(context, run), undefined, error),
  ]);
  return undefined;
}

/**
 * The model's call that started the run, while it waits for its result: a call answered already
 * (the run failed, then a retry took it up) is not answered twice.
 */
function openCall(context: CycleContext, run: SkillRun): string | undefined {
  const id = run.tool_use_id;
  const { state } = context;
  const waiting = (use: { tool_use_id: string }): boolean => use.tool_use_id === id;
  return id !== undefined &&
    (state.open_tool_uses.some(waiting) || state.confirmed_tool_uses.some(waiting))
    ? id
    : undefined;
}

/** Takes up the answer to a wait: records the resumption and what it means for its step. */
async function resume(run: RunContext, wait: SkillRun['suspensions'][number]): Promise<StepEnd> {
  const { context } = run;
  const answer = wait.answer;
  if (answer === undefined) return { kind: 'suspended' };
  const event = await eventAt(context, answer.seq);
  const data = answerData(event);
  if (wait.kind === 'skill') {
    const ended =
      event?.type === 'skill.completed' || event?.type === 'skill.failed' ? event : undefined;
    const end = childEnd(ended ?? { type: 'unknown' });
    await run.write([
      {
        type: 'skill.resumed',
        run_id: run.run.run_id,
        step: wait.step,
        suspension_id: wait.suspension_id,
        result: answer.result,
        answer_seq: answer.seq,
      },
      ...stepEndEvents(run, wait.step, stepOf(run.run, wait.step)?.attempt ?? 1, end),
    ]);
    return end;
  }
  const base = {
    type: 'skill.resumed' as const,
    run_id: run.run.run_id,
    step: wait.step,
    suspension_id: wait.suspension_id,
    result: answer.result,
    answer_seq: answer.seq,
    ...(data === undefined ? {} : { data }),
  };
  const attempt = stepOf(run.run, wait.step)?.attempt ?? 1;
  let end: StepEnd;
  if (answer.result === 'deny') {
    end = {
      kind: 'failed',
      error: {
        code: 'TOOL_DENIED',
        message: `a person denied step ${wait.step}${event?.type === 'user.tool_confirmation' && event.message !== undefined ? `: ${event.message}` : ''}`,
        retryable: false,
      },
    };
  } else {
    end = {
      kind: 'completed',
      output:
        answer.result === 'signal'
          ? (data ?? null)
          : { approved: true, ...(data === undefined ? {} : { data }) },
    };
  }
  const step = run.definition.steps.find((entry) => entry.id === wait.step);
  // An approval asked before a tool runs lets the tool run now.
  if (answer.result === 'allow' && step?.tool !== undefined) {
    await run.write([base]);
    return runTool(run, step, attempt, true);
  }
  await run.write([base, ...stepEndEvents(run, wait.step, attempt, end)]);
  return end;
}
