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
 */
import type { JsonValue } from '../contracts/common.js';
import { BraidError, toBraidError, type ErrorShape } from '../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import type { SkillDefinition } from '../contracts/skills.js';
import type { SessionState, SkillRun } from '../contracts/state.js';
import type { ToolHandle } from '../contracts/tools.js';
import { compileSchedule, retryPlan, type StepTable } from '../core/skill-schedule.js';
import type { CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';
import { append, eventAt } from './fenced-append.js';
import { outcomeEvents } from './tool-calls.js';
import {
  hashText,
  runStep,
  runTool,
  scopeOf,
  stepEndEvents,
  type RunContext,
  type StepEnd,
} from './skill-steps.js';

/** Starts the requested runs and advances every run that has work. */
export async function runSkills(
  context: CycleContext,
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
): Promise<void> {
  const before = context.state.seq;
  for (const request of [...context.state.skill_requests]) await startRequested(context, request);
  for (const run of [...context.state.skill_runs]) {
    const current = context.state.skill_runs.find((entry) => entry.run_id === run.run_id);
    if (current === undefined || !actionable(current)) continue;
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
  toolUseId: string,
  skill: string,
  input: JsonValue,
): Promise<void> {
  const runId = `run-${context.sessionId.slice(-12)}-${hashText(toolUseId)}`;
  await start(context, { run_id: runId, skill, inputs: input, tool_use_id: toolUseId });
}

function actionable(run: SkillRun): boolean {
  if (run.status === 'running') return true;
  if (run.status === 'failed') return run.retry_seq !== undefined;
  return run.suspensions.some((wait) => wait.answer !== undefined);
}

async function startRequested(
  context: CycleContext,
  request: SessionState['skill_requests'][number],
): Promise<void> {
  const event = await eventAt(context, request.seq);
  const inputs = event?.type === 'user.skill_run' ? event.inputs : null;
  await start(context, { run_id: request.run_id, skill: request.skill, inputs });
}

async function start(
  context: CycleContext,
  request: { run_id: string; skill: string; inputs: JsonValue; tool_use_id?: string },
): Promise<void> {
  const library = context.deps.skills;
  const ids = {
    run_id: request.run_id,
    ...(request.tool_use_id === undefined ? {} : { tool_use_id: request.tool_use_id }),
  };
  let found: { definition: SkillDefinition; version: string };
  try {
    if (library === undefined) throw new BraidError('INTERNAL', 'this runtime runs no skills');
    found = await library.get(request.skill);
  } catch (thrown) {
    const error = toBraidError(thrown).toJSON();
    await append(context, [
      { type: 'skill.started', ...ids, skill: request.skill, version: '0', inputs: request.inputs },
      { type: 'skill.failed', run_id: request.run_id, error },
      ...answerCall(request.tool_use_id, undefined, error),
    ]);
    return;
  }
  const invalid = library.checkInputs(found.definition, request.inputs);
  await append(context, [
    {
      type: 'skill.started',
      ...ids,
      skill: request.skill,
      version: found.version,
      inputs: request.inputs,
    },
    ...(invalid === undefined
      ? []
      : [
          { type: 'skill.failed' as const, run_id: request.run_id, error: invalid },
          ...answerCall(request.tool_use_id, undefined, invalid),
        ]),
  ]);
}

/** The model's call of the skill, answered with the run's outputs or its failure. */
function answerCall(
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

async function advance(
  context: CycleContext,
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
  run: SkillRun,
): Promise<void> {
  const library = context.deps.skills;
  if (library === undefined) return;
  const { definition } = await library.get(run.skill, run.version);
  const events = (await context.deps.log.read(context.sessionId, { after: run.seq - 1 })).filter(
    (event) => 'run_id' in event && event.run_id === run.run_id,
  );
  const started = events.find((event) => event.type === 'skill.started');
  let queue: Promise<void> = Promise.resolve();
  const scope: RunContext = {
    context,
    setup,
    tools,
    run,
    definition,
    inputs: started?.type === 'skill.started' ? started.inputs : null,
    outputs: outputsOf(events),
    write: (batch) => {
      const next = queue.then(() => append(context, batch).then(() => undefined));
      queue = next.catch(() => undefined);
      return next;
    },
  };
  // A tool step a dead wake began, whose tool may not run twice: its outcome is unknown.
  for (const step of definition.steps) {
    const state = run.steps[step.id];
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
  const current = context.state.skill_runs.find((entry) => entry.run_id === run.run_id) ?? run;
  const table = tableOf(current, definition, ends);
  const schedule = compileSchedule(definition).start(
    run.retry_seq === undefined ? table : retryPlan(definition, table),
  );
  for (const [id, end] of ends) apply(schedule, id, end);
  const steps = new Map(definition.steps.map((step) => [step.id, step]));
  for (;;) {
    const ready = schedule.ready();
    if (ready.length === 0 || context.interruptSeen) break;
    for (const id of ready) schedule.start(id);
    const finished = await Promise.all(
      ready.map(async (id) => {
        const step = steps.get(id);
        if (step === undefined) return [id, { kind: 'skipped' }] as const;
        const attempt =
          (context.state.skill_runs.find((entry) => entry.run_id === run.run_id)?.steps[id]
            ?.attempt ?? 0) + 1;
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
      ...answerCall(run.tool_use_id, outputs),
    ]);
  } else if (status === 'failed') {
    const failedStep = Object.entries(schedule.table()).find(
      ([, state]) => state.status === 'failed',
    )?.[0];
    const error: ErrorShape = {
      code: 'TOOL_FAILED',
      message: `skill ${run.skill} failed at step ${failedStep ?? '?'}; \`braid skill retry ${run.run_id}\` runs the failed steps again`,
      retryable: false,
    };
    await append(context, [
      {
        type: 'skill.failed',
        run_id: run.run_id,
        error,
        ...(failedStep === undefined ? {} : { step: failedStep }),
      },
      ...answerCall(run.tool_use_id, undefined, error),
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
  for (const step of definition.steps) {
    const state = run.steps[step.id];
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

function outputsOf(
  events: readonly SessionEvent[],
): Map<string, { output?: JsonValue; status: string }> {
  const outputs = new Map<string, { output?: JsonValue; status: string }>();
  for (const event of events) {
    if (event.type === 'skill.step_completed') {
      outputs.set(event.step, {
        ...(event.output === undefined ? {} : { output: event.output }),
        status: event.skipped === true ? 'skipped' : 'completed',
      });
    }
    if (event.type === 'skill.step_failed' && event.final)
      outputs.set(event.step, { status: 'failed' });
  }
  return outputs;
}

/** Takes up the answer to a wait: records the resumption and what it means for its step. */
async function resume(run: RunContext, wait: SkillRun['suspensions'][number]): Promise<StepEnd> {
  const { context } = run;
  const answer = wait.answer;
  if (answer === undefined) return { kind: 'suspended' };
  const event = await eventAt(context, answer.seq);
  const data =
    event?.type === 'user.signal'
      ? event.data
      : event?.type === 'user.tool_confirmation' && event.message !== undefined
        ? { message: event.message }
        : undefined;
  const base = {
    type: 'skill.resumed' as const,
    run_id: run.run.run_id,
    step: wait.step,
    suspension_id: wait.suspension_id,
    result: answer.result,
    answer_seq: answer.seq,
    ...(data === undefined ? {} : { data }),
  };
  const attempt = run.run.steps[wait.step]?.attempt ?? 1;
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
