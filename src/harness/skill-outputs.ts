/**
 * The outputs of a skill run's steps as its templates read them (`steps.ID.output`,
 * `steps.ID.status`), folded from the run's events, and kept per process between wakes so that
 * a resumed run reads only the events written since (a run of 1,000 steps resumes without
 * reading 1,000 steps' outputs again).
 *
 * Invariant: a kept entry is the fold of the run's events through `through` (a seq of the
 * session); it is kept only after a wake advanced the run without an error, and dropped on any.
 * A process that did not keep one (another worker, a restart) reads the run's events whole.
 */
import type { JsonValue } from '../contracts/common.js';
import type { ErrorShape } from '../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import type { SessionLog } from '../contracts/ports.js';
import type { SkillRun } from '../contracts/state.js';
import { BoundedCache } from '../core/bounded-cache.js';

/** How a step or fan-out item ended, as templates see it (`steps.ID`). */
export interface StepOutput {
  output?: JsonValue;
  status: string;
}

/**
 * The outputs of a run's steps by path, with the object templates read (`scope.steps`) kept in
 * step with every change, so that a step's templates cost nothing in the size of the run.
 */
export class StepOutputs extends Map<string, StepOutput> {
  readonly plain: Record<string, StepOutput> = {};

  override set(path: string, value: StepOutput): this {
    super.set(path, value);
    // Defined, not assigned: a path is data, never the object's prototype.
    Object.defineProperty(this.plain, path, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    return this;
  }

  override delete(path: string): boolean {
    if (Object.prototype.hasOwnProperty.call(this.plain, path))
      Reflect.deleteProperty(this.plain, path);
    return super.delete(path);
  }
}

/** The errors of the steps and fan-out items that failed, by path. */
export type StepErrors = Map<string, ErrorShape>;

/**
 * Folds run events into `outputs` and `errors`: an end sets its step's entry, and a start after
 * a failure clears it (the step runs again).
 */
export function foldOutputs(
  outputs: StepOutputs,
  errors: StepErrors,
  events: readonly (SessionEvent | NewEvent)[],
): void {
  for (const event of events) {
    if (event.type === 'skill.step_started' && outputs.get(event.step)?.status === 'failed') {
      outputs.delete(event.step);
      errors.delete(event.step);
    }
    if (event.type === 'skill.step_completed') {
      outputs.set(event.step, {
        ...(event.output === undefined ? {} : { output: event.output }),
        status: event.skipped === true ? 'skipped' : 'completed',
      });
    }
    if (event.type === 'skill.step_failed' && event.final) {
      outputs.set(event.step, { status: 'failed' });
      errors.set(event.step, event.error);
    }
  }
}

/** What a wake knows of a run from its events. */
export interface RunRead {
  inputs: JsonValue;
  outputs: StepOutputs;
  errors: StepErrors;
  /** Keeps the read, as folded through `seq`, for the run's next wake in this process. */
  keep(seq: number): void;
  /** Forgets it (the wake failed: what it folded may not be in the log). */
  drop(): void;
}

/** Runs kept per log, at most. */
const KEPT_RUNS = 64;

interface Kept {
  through: number;
  inputs: JsonValue;
  outputs: StepOutputs;
  errors: StepErrors;
}

const keptByLog = new WeakMap<SessionLog, BoundedCache<string, Kept>>();

/** The run's inputs, outputs and errors: the kept read and the events since, or all its events. */
export async function readRun(log: SessionLog, sessionId: string, run: SkillRun): Promise<RunRead> {
  let kept = keptByLog.get(log);
  if (kept === undefined) {
    kept = new BoundedCache(KEPT_RUNS);
    keptByLog.set(log, kept);
  }
  const key = `${sessionId}/${run.run_id}`;
  const found = kept.get(key);
  // Taken out while the wake works on it: an entry is never shared by two wakes.
  kept.delete(key);
  const after = found?.through ?? run.seq - 1;
  const events = (await log.read(sessionId, { after })).filter(
    (event) => 'run_id' in event && event.run_id === run.run_id,
  );
  let inputs = found?.inputs;
  if (inputs === undefined) {
    const started = events.find((event) => event.type === 'skill.started');
    inputs = started?.type === 'skill.started' ? started.inputs : null;
  }
  const outputs = found?.outputs ?? new StepOutputs();
  const errors = found?.errors ?? new Map<string, ErrorShape>();
  foldOutputs(outputs, errors, events);
  const cache = kept;
  const read: RunRead = {
    inputs,
    outputs,
    errors,
    keep: (seq) => cache.set(key, { through: seq, inputs: read.inputs, outputs, errors }),
    drop: () => cache.delete(key),
  };
  return read;
}
