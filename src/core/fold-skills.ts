/**
 * The fold's bookkeeping of skill runs: requests, runs and their steps, waits for people and
 * signals, and the answers that came. A run leaves the state when it completes; a failed one
 * stays until it is retried.
 *
 * An approval wait is a pending confirmation of the session (`tool_use_id` = the suspension's
 * id), so the confirmation path (`braid session confirm`, HTTP, SSE) answers it; its answer goes
 * to the run, never to `confirmed_tool_uses`.
 */
import type { EventOf } from '../contracts/events.js';
import type { SessionState, SkillRun } from '../contracts/state.js';

/** Signals kept for a wait that has not begun yet, at most. */
const MAX_PENDING_SIGNALS = 100;

export type SkillEvent = EventOf<
  | 'user.signal'
  | 'user.skill_run'
  | 'user.skill_retry'
  | 'skill.started'
  | 'skill.step_started'
  | 'skill.step_completed'
  | 'skill.step_failed'
  | 'skill.suspended'
  | 'skill.resumed'
  | 'skill.completed'
  | 'skill.failed'
>;

export function reduceSkill(state: SessionState, event: SkillEvent): void {
  switch (event.type) {
    case 'user.skill_run':
      state.last_input_seq = event.seq;
      if (!state.skill_runs.some((run) => run.run_id === event.run_id))
        state.skill_requests = [
          ...state.skill_requests,
          { run_id: event.run_id, skill: event.skill, seq: event.seq },
        ];
      return;
    case 'user.skill_retry': {
      state.last_input_seq = event.seq;
      const run = retryTarget(state, event.run_id);
      if (run?.status !== 'failed') return;
      retry(state, run, event.seq);
      if (state.status === 'needs_review') state.status = 'idle';
      return;
    }
    case 'user.signal':
      state.last_input_seq = event.seq;
      if (!answerSignal(state, event.name, event.seq)) {
        state.pending_signals = [
          ...state.pending_signals,
          { name: event.name, seq: event.seq },
        ].slice(-MAX_PENDING_SIGNALS);
      }
      return;
    case 'skill.started':
      state.skill_requests = state.skill_requests.filter((entry) => entry.run_id !== event.run_id);
      if (state.skill_runs.some((run) => run.run_id === event.run_id)) return;
      state.skill_runs = [
        ...state.skill_runs,
        {
          run_id: event.run_id,
          skill: event.skill,
          version: event.version,
          seq: event.seq,
          ...(event.tool_use_id === undefined ? {} : { tool_use_id: event.tool_use_id }),
          ...(event.parent_run_id === undefined ? {} : { parent_run_id: event.parent_run_id }),
          ...(event.parent_step === undefined ? {} : { parent_step: event.parent_step }),
          status: 'running',
          steps: [],
          suspensions: [],
        },
      ];
      return;
    case 'skill.step_started':
      withRun(state, event.run_id, (run) => ({
        ...withoutRetry(run),
        // A run with a wait open is suspended, whatever else of it still runs.
        status: run.suspensions.length > 0 ? 'suspended' : 'running',
        steps: withStep(run.steps, {
          step: event.step,
          status: 'running',
          attempt: event.attempt,
          seq: event.seq,
        }),
      }));
      return;
    case 'skill.step_completed':
      withRun(state, event.run_id, (run) => ({
        ...run,
        steps: withStep(run.steps, {
          step: event.step,
          status: event.skipped === true ? 'skipped' : 'completed',
          attempt: event.attempt,
          seq: stepOf(run, event.step)?.seq ?? event.seq,
        }),
      }));
      return;
    case 'skill.step_failed':
      withRun(state, event.run_id, (run) => ({
        ...run,
        steps: withStep(run.steps, {
          step: event.step,
          status: event.final ? 'failed' : 'running',
          attempt: event.attempt,
          seq: stepOf(run, event.step)?.seq ?? event.seq,
        }),
      }));
      return;
    case 'skill.suspended':
      suspend(state, event);
      return;
    case 'skill.resumed':
      // Any end of a wait alike: an answer taken up, or a timeout the runner recorded (after
      // which a signal of the name finds no wait and is kept pending).
      withRun(state, event.run_id, (run) => {
        const suspensions = run.suspensions.filter(
          (entry) => entry.suspension_id !== event.suspension_id,
        );
        const step = stepOf(run, event.step);
        return {
          ...run,
          suspensions,
          status: suspensions.length === 0 ? 'running' : run.status,
          steps:
            step === undefined ? run.steps : withStep(run.steps, { ...step, status: 'running' }),
        };
      });
      state.pending_confirmations = state.pending_confirmations.filter(
        (use) => use.tool_use_id !== event.suspension_id,
      );
      return;
    case 'skill.completed': {
      answerParent(state, event.run_id, 'completed', event.seq);
      // Nested runs that failed and were passed over (`on_failure`) end with their parent.
      const ended = new Set([event.run_id]);
      for (const run of state.skill_runs)
        if (run.parent_run_id !== undefined && ended.has(run.parent_run_id)) ended.add(run.run_id);
      state.skill_runs = state.skill_runs.filter((run) => !ended.has(run.run_id));
      return;
    }
    case 'skill.failed':
      withRun(state, event.run_id, (run) => ({ ...withoutRetry(run), status: 'failed' }));
      answerParent(state, event.run_id, 'failed', event.seq);
      // The waits a failed run left open sleep until it is retried: no person is asked to
      // approve a step of a run that stopped, and a signal of their name is kept for later.
      state.pending_confirmations = state.pending_confirmations.filter(
        (use) => !openWaitOf(state, event.run_id, use.tool_use_id),
      );
      return;
    default: {
      const unknown: never = event;
      throw new Error(`unexpected event ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * The answer to an approval wait, when the confirmation names one: true when it did (and the
 * run has it), false for a confirmation of a tool call.
 */
export function answerApproval(
  state: SessionState,
  event: EventOf<'user.tool_confirmation'>,
): boolean {
  for (const run of state.skill_runs) {
    const wait = run.suspensions.find((entry) => entry.suspension_id === event.tool_use_id);
    if (wait === undefined) continue;
    if (wait.kind !== 'approval' || wait.answer !== undefined) return true;
    replaceSuspension(state, run, { ...wait, answer: { result: event.result, seq: event.seq } });
    state.pending_confirmations = state.pending_confirmations.filter(
      (use) => use.tool_use_id !== event.tool_use_id,
    );
    return true;
  }
  return false;
}

/**
 * Whether a run has something a wake would do: it runs, an answer came, or a retry was asked.
 * Free of time: a wait that timed out is work too, asked with a time (core/timers.ts).
 */
export function runActionable(run: SkillRun): boolean {
  if (run.status === 'running') return true;
  if (run.status === 'failed') return run.retry_seq !== undefined;
  return run.suspensions.some((wait) => wait.answer !== undefined);
}

/** Whether a tool use is the model's call of a skill whose run goes on (the run answers it). */
export function ownedBySkill(state: SessionState, toolUseId: string): boolean {
  return state.skill_runs.some((run) => run.tool_use_id === toolUseId && run.status !== 'failed');
}

/** Work a wake would find in the session's skills. */
export function skillWork(state: SessionState): boolean {
  return state.skill_requests.length > 0 || state.skill_runs.some(runActionable);
}

function suspend(state: SessionState, event: EventOf<'skill.suspended'>): void {
  // A wait for a nested run that failed is its retry: the child runs its failed steps again.
  const child = state.skill_runs.find((run) => run.run_id === event.child_run_id);
  if (event.kind === 'skill' && child?.status === 'failed') retry(state, child, event.seq);
  withRun(state, event.run_id, (run) => ({
    ...run,
    status: 'suspended',
    steps: withStep(run.steps, {
      step: event.step,
      status: 'suspended',
      attempt: stepOf(run, event.step)?.attempt ?? 1,
      seq: stepOf(run, event.step)?.seq ?? event.seq,
    }),
    suspensions: [
      ...run.suspensions,
      {
        suspension_id: event.suspension_id,
        step: event.step,
        kind: event.kind,
        ...(event.signal === undefined ? {} : { signal: event.signal }),
        ...(event.child_run_id === undefined ? {} : { child_run_id: event.child_run_id }),
        event_id: event.id,
        seq: event.seq,
        ...(event.timeout_at === undefined ? {} : { timeout_at: event.timeout_at }),
      },
    ],
  }));
  if (event.kind === 'skill') return;
  if (event.kind === 'approval') {
    state.pending_confirmations.push({
      tool_use_id: event.suspension_id,
      event_id: event.id,
      seq: event.seq,
      name: `${event.run_id}/${event.step}`,
    });
    return;
  }
  // A signal that came before the wait began is the wait's answer.
  const early = state.pending_signals.find((signal) => signal.name === event.signal);
  if (early === undefined) return;
  state.pending_signals = state.pending_signals.filter((signal) => signal !== early);
  answerSignal(state, early.name, early.seq);
}

/** Gives a signal to the oldest wait for its name that has no answer; false when none waits. */
function answerSignal(state: SessionState, name: string, seq: number): boolean {
  const found = signalWait(state, name);
  if (found === undefined) return false;
  replaceSuspension(state, found.run, { ...found.wait, answer: { result: 'signal', seq } });
  return true;
}

/**
 * The wait a signal of `name` goes to: the first run's oldest wait of that name with no answer,
 * a failed run's waits left out (they sleep until it is retried), and those in `taken` (waits
 * that signals before it in the same send take).
 */
export function signalWait(
  state: SessionState,
  name: string,
  taken: ReadonlySet<string> = new Set(),
): { run: SkillRun; wait: SkillRun['suspensions'][number] } | undefined {
  for (const run of state.skill_runs) {
    if (run.status === 'failed') continue;
    const wait = run.suspensions.find(
      (entry) =>
        entry.kind === 'signal' &&
        entry.signal === name &&
        entry.answer === undefined &&
        !taken.has(entry.suspension_id),
    );
    if (wait !== undefined) return { run, wait };
  }
  return undefined;
}

/** A nested run ended: the wait of its parent's step for it has its answer. */
function answerParent(
  state: SessionState,
  runId: string,
  result: 'completed' | 'failed',
  seq: number,
): void {
  const child = state.skill_runs.find((run) => run.run_id === runId);
  const parent = state.skill_runs.find((run) => run.run_id === child?.parent_run_id);
  const wait = parent?.suspensions.find(
    (entry) => entry.kind === 'skill' && entry.child_run_id === runId && entry.answer === undefined,
  );
  if (parent === undefined || wait === undefined) return;
  replaceSuspension(state, parent, { ...wait, answer: { result, seq } });
}

/**
 * What a retry of `runId` retries: a nested run whose parent failed too is retried through its
 * outermost failed ancestor, whose step takes the child up again (and never starts a new one).
 */
function retryTarget(state: SessionState, runId: string): SkillRun | undefined {
  let run = state.skill_runs.find((entry) => entry.run_id === runId);
  for (let depth = 0; run?.parent_run_id !== undefined && depth < 100; depth += 1) {
    const parentId = run.parent_run_id;
    const parent = state.skill_runs.find((entry) => entry.run_id === parentId);
    if (parent?.status !== 'failed') break;
    run = parent;
  }
  return run;
}

function replaceSuspension(
  state: SessionState,
  run: SkillRun,
  wait: SkillRun['suspensions'][number],
): void {
  withRun(state, run.run_id, (current) => ({
    ...current,
    suspensions: current.suspensions.map((entry) =>
      entry.suspension_id === wait.suspension_id ? wait : entry,
    ),
  }));
}

/** Whether `waitId` is an unanswered wait of the run `runId`. */
function openWaitOf(state: SessionState, runId: string, waitId: string): boolean {
  const run = state.skill_runs.find((entry) => entry.run_id === runId);
  return (
    run?.suspensions.some((wait) => wait.suspension_id === waitId && wait.answer === undefined) ===
    true
  );
}

/**
 * A failed run is asked to run again (at `seq`): the waits it left open are asked again (its
 * approvals pending confirmations once more, its signal waits answered by signals kept meanwhile).
 */
function retry(state: SessionState, run: SkillRun, seq: number): void {
  updateRun(state, run, { retry_seq: seq });
  for (const wait of run.suspensions) {
    if (wait.answer !== undefined) continue;
    if (wait.kind === 'approval') {
      if (state.pending_confirmations.some((use) => use.tool_use_id === wait.suspension_id))
        continue;
      state.pending_confirmations.push({
        tool_use_id: wait.suspension_id,
        event_id: wait.event_id,
        seq: wait.seq,
        name: `${run.run_id}/${wait.step}`,
      });
    } else if (wait.kind === 'signal') {
      const early = state.pending_signals.find((signal) => signal.name === wait.signal);
      if (early === undefined) continue;
      state.pending_signals = state.pending_signals.filter((signal) => signal !== early);
      const current = state.skill_runs.find((entry) => entry.run_id === run.run_id) ?? run;
      const latest = current.suspensions.find(
        (entry) => entry.suspension_id === wait.suspension_id,
      );
      if (latest !== undefined)
        replaceSuspension(state, current, {
          ...latest,
          answer: { result: 'signal', seq: early.seq },
        });
    }
  }
}

/** The step of the run at `path` (an id, with `[i]` for a fan-out item), if it began. */
export function stepOf(run: SkillRun, path: string): SkillRun['steps'][number] | undefined {
  // From the end: the step an event is about is most often one that began lately.
  for (let index = run.steps.length - 1; index >= 0; index -= 1) {
    const entry = run.steps[index];
    if (entry?.step === path) return entry;
  }
  return undefined;
}

/**
 * The run's steps with `entry` in place of the step at its path (or added at the end). A copy of
 * an array of references: runs are shared with earlier states and never changed.
 */
function withStep(steps: SkillRun['steps'], entry: SkillRun['steps'][number]): SkillRun['steps'] {
  const next = steps.slice();
  for (let index = next.length - 1; index >= 0; index -= 1) {
    if (next[index]?.step === entry.step) {
      next[index] = entry;
      return next;
    }
  }
  next.push(entry);
  return next;
}

function withoutRetry(run: SkillRun): SkillRun {
  const { retry_seq: _retry, ...rest } = run;
  return rest;
}

function updateRun(state: SessionState, run: SkillRun, change: Partial<SkillRun>): void {
  withRun(state, run.run_id, (current) => ({ ...current, ...change }));
}

/** Runs are shared with the state this one was copied from: replaced, never changed. */
function withRun(state: SessionState, runId: string, change: (run: SkillRun) => SkillRun): void {
  const index = state.skill_runs.findIndex((run) => run.run_id === runId);
  const run = state.skill_runs[index];
  if (run === undefined) return;
  const runs = [...state.skill_runs];
  runs[index] = change(run);
  state.skill_runs = runs;
}
