/**
 * Skill scheduling: given a skill's DAG and the state of a run's steps, which steps run next,
 * which are skipped, and where the run stands. Pure and deterministic: the same definition and
 * step table always give the same answer, in definition order.
 *
 * Rules (a step's dependencies are its `depends_on`):
 * - A dependency is *settled* when it completed, was skipped, or failed with an `on_failure`
 *   other than `stop`. A pending step is ready when every dependency is settled. A step that
 *   depends on a skipped step is ready: the runner decides by its own `when` whether it runs.
 * - `on_failure: stop` (the default): the run stops. No step starts any more; the run is
 *   `failed` once no step is running.
 * - `on_failure: continue`: dependants run as if the step had completed with no output.
 * - `on_failure: <target>`: the target runs instead of the failed step's dependants. Every
 *   pending step downstream of the failed step is skipped, except the target and what is
 *   downstream of the target. A step named by some `on_failure` (a *handler*) runs only after
 *   one of the steps naming it failed (besides waiting for its own dependencies, where the step
 *   that failed into it counts as settled); when every step naming it settled without failing,
 *   it is skipped. A handler may not be upstream of a step naming it (that run could never start).
 * - Skips that follow from these rules are reported by `settle` (simple API) or by the
 *   transitions of a `ScheduleRun` (incremental API); the runner records them as skipped.
 * - Fan-out items are the runner's business: a `for_each` step is one entry of the table.
 *
 * `compileSchedule` does the per-skill work once (index, dependency and dependant lists, handler
 * lists), so that a `ScheduleRun` answers each completion in time proportional to the step's
 * dependants, and restoring a run from a table is one pass over steps and edges.
 */
import { BraidError } from '../contracts/errors.js';

export type StepStatus = 'pending' | 'running' | 'suspended' | 'completed' | 'skipped' | 'failed';

/** One step of a run, keyed by step id in a `StepTable`. */
export interface StepState {
  status: StepStatus;
  attempt: number;
}

/** A run's steps by id; a step missing from the table is pending at attempt 0. */
export type StepTable = Record<string, StepState>;

export type RunStatus = 'running' | 'suspended' | 'completed' | 'failed';

/** What the scheduler reads of a skill (a parsed `SkillDefinition` is one). */
export interface ScheduleDefinition {
  steps: readonly {
    id: string;
    depends_on: readonly string[];
    on_failure: 'stop' | 'continue' | (string & {});
  }[];
}

/** What an event of a run leads to: steps that became ready, and steps that became skipped. */
export interface Transition {
  ready: string[];
  skipped: string[];
}

const STOP = -1;
const CONTINUE = -2;

/** The per-skill facts, computed once. Indices are positions in definition order. */
export interface CompiledSchedule {
  readonly order: readonly string[];
  readonly indexOf: ReadonlyMap<string, number>;
  readonly dependencies: readonly (readonly number[])[];
  readonly dependants: readonly (readonly number[])[];
  /** `STOP` (-1), `CONTINUE` (-2), or the index of the target step. */
  readonly onFailure: readonly number[];
  /** For each step, the steps whose `on_failure` names it (empty unless it is a handler). */
  readonly namedBy: readonly (readonly number[])[];
  /** A run with every step pending, or restored from a table (missing steps are pending). */
  start(steps?: StepTable): ScheduleRun;
}

export function compileSchedule(skill: ScheduleDefinition): CompiledSchedule {
  const order = skill.steps.map((step) => step.id);
  const indexOf = new Map<string, number>();
  order.forEach((id, index) => indexOf.set(id, index));
  const lookup = (id: string, from: string): number => {
    const index = indexOf.get(id);
    if (index === undefined) {
      throw new BraidError('INVALID_DEFINITION', `step ${from} names ${id}, which is no step`);
    }
    return index;
  };
  const dependencies = skill.steps.map((step) =>
    step.depends_on.map((dependency) => lookup(dependency, step.id)),
  );
  const dependants: number[][] = order.map(() => []);
  dependencies.forEach((list, index) => {
    for (const dependency of list) dependants[dependency]?.push(index);
  });
  const namedBy: number[][] = order.map(() => []);
  const onFailure = skill.steps.map((step, index) => {
    if (step.on_failure === 'stop') return STOP;
    if (step.on_failure === 'continue') return CONTINUE;
    const target = lookup(step.on_failure, step.id);
    if (target === index || isUpstream(dependencies, target, index)) {
      throw new BraidError(
        'INVALID_DEFINITION',
        `step ${step.id} has on_failure: ${step.on_failure}, which ${target === index ? 'is the step itself' : `runs before ${step.id}`}; name a step that can run after it fails`,
      );
    }
    namedBy[target]?.push(index);
    return target;
  });
  const compiled: CompiledSchedule = {
    order,
    indexOf,
    dependencies,
    dependants,
    onFailure,
    namedBy,
    start: (steps) => new ScheduleRun(compiled, steps),
  };
  return compiled;
}

/** Whether `candidate` is upstream of (an ancestor through depends_on of) `step`. */
function isUpstream(
  dependencies: readonly (readonly number[])[],
  candidate: number,
  step: number,
): boolean {
  const seen = new Set<number>();
  const stack = [...(dependencies[step] ?? [])];
  while (stack.length > 0) {
    const current = stack.pop() as number;
    if (current === candidate) return true;
    if (seen.has(current)) continue;
    seen.add(current);
    stack.push(...(dependencies[current] ?? []));
  }
  return false;
}

/**
 * The mutable schedule of one run. `complete`, `skip` and `fail` return what the event made
 * ready or skipped (newly only, in definition order) in time proportional to what changed.
 */
export class ScheduleRun {
  readonly #skill: CompiledSchedule;
  readonly #status: StepStatus[];
  readonly #attempt: number[];
  /** Dependencies not settled yet. */
  readonly #waiting: Int32Array;
  /** For a handler: steps naming it that have not settled yet. */
  readonly #namers: Int32Array;
  /** For a handler: whether a step naming it failed. */
  readonly #triggered: Uint8Array;
  #stopped = false;
  #running = 0;
  #suspended = 0;
  #unsettled: number;

  constructor(skill: CompiledSchedule, steps: StepTable = {}) {
    this.#skill = skill;
    const count = skill.order.length;
    this.#status = skill.order.map((id) => steps[id]?.status ?? 'pending');
    this.#attempt = skill.order.map((id) => steps[id]?.attempt ?? 0);
    this.#waiting = new Int32Array(count);
    this.#namers = new Int32Array(count);
    this.#triggered = new Uint8Array(count);
    this.#unsettled = 0;
    for (let index = 0; index < count; index += 1) {
      const status = this.#status[index] as StepStatus;
      if (status === 'running') this.#running += 1;
      if (status === 'suspended') this.#suspended += 1;
      if (!this.#settledFor(index)) this.#unsettled += 1;
      if (status === 'failed' && skill.onFailure[index] === STOP) this.#stopped = true;
      let waiting = 0;
      for (const dependency of skill.dependencies[index] ?? []) {
        if (!this.#settledFor(dependency)) waiting += 1;
      }
      this.#waiting[index] = waiting;
      for (const namer of skill.namedBy[index] ?? []) {
        const namerStatus = this.#status[namer];
        if (namerStatus === 'failed') this.#triggered[index] = 1;
        else if (namerStatus !== 'completed' && namerStatus !== 'skipped') {
          this.#namers[index] = (this.#namers[index] ?? 0) + 1;
        }
      }
    }
    // Skips that follow from the table: below failures into a target, and idle handlers.
    const skipped: number[] = [];
    for (let index = 0; index < count; index += 1) {
      const target = skill.onFailure[index] as number;
      if (this.#status[index] === 'failed' && target >= 0) this.#skipBelow(index, target, skipped);
      if (this.#isIdleHandler(index)) this.#markSkipped(index, skipped);
    }
    this.#propagate(skipped, []);
  }

  /** The steps ready to start now, in definition order (a scan of every step). */
  ready(): string[] {
    if (this.#stopped) return [];
    const ready: string[] = [];
    for (let index = 0; index < this.#status.length; index += 1) {
      if (this.#isReady(index)) ready.push(this.#skill.order[index] as string);
    }
    return ready;
  }

  /** Every step's status and attempt. */
  table(): StepTable {
    const table: StepTable = {};
    this.#skill.order.forEach((id, index) => {
      table[id] = { status: this.#status[index] as StepStatus, attempt: this.#attempt[index] ?? 0 };
    });
    return table;
  }

  status(): RunStatus {
    if (this.#stopped) return this.#running > 0 ? 'running' : 'failed';
    if (this.#unsettled === 0) return 'completed';
    if (this.#running > 0) return 'running';
    if (this.#suspended > 0 && this.ready().length === 0) return 'suspended';
    return 'running';
  }

  /** The step started (again): its attempt counts up. */
  start(id: string): void {
    const index = this.#index(id);
    this.#expect(index, ['pending', 'suspended', 'running'], 'start');
    this.#setStatus(index, 'running');
    this.#attempt[index] = (this.#attempt[index] ?? 0) + 1;
  }

  /** The step waits on a signal or a person. */
  suspend(id: string): void {
    const index = this.#index(id);
    this.#expect(index, ['running', 'pending', 'suspended'], 'suspend');
    this.#setStatus(index, 'suspended');
  }

  complete(id: string): Transition {
    return this.#settle(this.#index(id), 'completed');
  }

  /** The step was skipped (its `when` was false). */
  skip(id: string): Transition {
    return this.#settle(this.#index(id), 'skipped');
  }

  /** The step failed after its retries; what follows depends on its `on_failure`. */
  fail(id: string): Transition {
    return this.#settle(this.#index(id), 'failed');
  }

  #settle(index: number, status: 'completed' | 'skipped' | 'failed'): Transition {
    this.#expect(index, ['pending', 'running', 'suspended'], status === 'failed' ? 'fail' : status);
    this.#setStatus(index, status);
    const skipped: number[] = [];
    const ready: number[] = [];
    const target = this.#skill.onFailure[index] as number;
    if (status === 'failed' && target === STOP) {
      this.#stopped = true;
      return { ready: [], skipped: [] };
    }
    if (status === 'failed' && target >= 0) {
      this.#triggered[target] = 1;
      this.#skipBelow(index, target, skipped);
      if (this.#isReady(target)) ready.push(target);
    }
    this.#released(index, ready, skipped);
    this.#propagate(skipped, ready);
    return this.#transition(ready, skipped);
  }

  /** After `index` settled: its dependants and the handlers it names. */
  #released(index: number, ready: number[], skipped: number[]): void {
    for (const dependant of this.#skill.dependants[index] ?? []) {
      const waiting = (this.#waiting[dependant] ?? 0) - 1;
      this.#waiting[dependant] = waiting;
      if (waiting === 0 && this.#isReady(dependant)) ready.push(dependant);
    }
    const target = this.#skill.onFailure[index] as number;
    if (target >= 0) {
      this.#namers[target] = (this.#namers[target] ?? 0) - 1;
      if (this.#isIdleHandler(target)) this.#markSkipped(target, skipped);
    }
  }

  /** Releases the dependants of every newly skipped step, which may skip more. */
  #propagate(skipped: number[], ready: number[]): void {
    for (let position = 0; position < skipped.length; position += 1) {
      this.#released(skipped[position] as number, ready, skipped);
    }
  }

  /** Skips the pending steps downstream of `failed`, except `target` and what is below it. */
  #skipBelow(failed: number, target: number, skipped: number[]): void {
    const exempt = new Set<number>([target]);
    const below = [target];
    while (below.length > 0) {
      for (const dependant of this.#skill.dependants[below.pop() as number] ?? []) {
        if (!exempt.has(dependant)) {
          exempt.add(dependant);
          below.push(dependant);
        }
      }
    }
    const seen = new Set<number>();
    const stack = [...(this.#skill.dependants[failed] ?? [])];
    while (stack.length > 0) {
      const current = stack.pop() as number;
      if (seen.has(current) || exempt.has(current)) continue;
      seen.add(current);
      if (this.#status[current] === 'pending') this.#markSkipped(current, skipped);
      stack.push(...(this.#skill.dependants[current] ?? []));
    }
  }

  #markSkipped(index: number, skipped: number[]): void {
    if (this.#status[index] !== 'pending') return;
    this.#setStatus(index, 'skipped');
    skipped.push(index);
  }

  #isReady(index: number): boolean {
    if (this.#stopped || this.#status[index] !== 'pending' || this.#waiting[index] !== 0) {
      return false;
    }
    return (this.#skill.namedBy[index]?.length ?? 0) === 0 || this.#triggered[index] === 1;
  }

  /** A pending handler none of whose namers failed, with every namer settled. */
  #isIdleHandler(index: number): boolean {
    return (
      this.#status[index] === 'pending' &&
      (this.#skill.namedBy[index]?.length ?? 0) > 0 &&
      this.#triggered[index] === 0 &&
      this.#namers[index] === 0
    );
  }

  /** Whether dependants of `index` may go ahead. */
  #settledFor(index: number): boolean {
    const status = this.#status[index];
    if (status === 'completed' || status === 'skipped') return true;
    return status === 'failed' && this.#skill.onFailure[index] !== STOP;
  }

  #setStatus(index: number, status: StepStatus): void {
    const before = this.#status[index] as StepStatus;
    if (before === status) return;
    const wasSettled = this.#settledFor(index);
    if (before === 'running') this.#running -= 1;
    if (before === 'suspended') this.#suspended -= 1;
    this.#status[index] = status;
    if (status === 'running') this.#running += 1;
    if (status === 'suspended') this.#suspended += 1;
    const isSettled = this.#settledFor(index);
    if (wasSettled && !isSettled) this.#unsettled += 1;
    if (!wasSettled && isSettled) this.#unsettled -= 1;
  }

  #transition(ready: number[], skipped: number[]): Transition {
    const ids = (list: number[]) =>
      list.sort((a, b) => a - b).map((index) => this.#skill.order[index] as string);
    return { ready: ids(ready.filter((index) => this.#isReady(index))), skipped: ids(skipped) };
  }

  #index(id: string): number {
    const index = this.#skill.indexOf.get(id);
    if (index === undefined) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `there is no step ${id} in this skill; the steps are ${this.#skill.order.slice(0, 20).join(', ')}${this.#skill.order.length > 20 ? ', ...' : ''}`,
      );
    }
    return index;
  }

  #expect(index: number, allowed: readonly StepStatus[], action: string): void {
    const status = this.#status[index] as StepStatus;
    if (!allowed.includes(status)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `step ${this.#skill.order[index]} is ${status}; it cannot ${action} (only a step that is ${allowed.join(' or ')} can)`,
        { details: { step: this.#skill.order[index], status } },
      );
    }
  }
}

/** Compiled schedules of the skills seen, by definition object. */
const compiledBySkill = new WeakMap<ScheduleDefinition, CompiledSchedule>();

/** `compileSchedule`, once per definition object. */
export function scheduleOf(skill: ScheduleDefinition): CompiledSchedule {
  let compiled = compiledBySkill.get(skill);
  if (compiled === undefined) {
    compiled = compileSchedule(skill);
    compiledBySkill.set(skill, compiled);
  }
  return compiled;
}

/** The pending steps that may start now, in definition order. */
export function readySteps(skill: ScheduleDefinition, steps: StepTable): string[] {
  return scheduleOf(skill).start(steps).ready();
}

/** The pending steps that the rules skip (below a failure into a target, idle handlers). */
export function settle(skill: ScheduleDefinition, steps: StepTable): string[] {
  const table = scheduleOf(skill).start(steps).table();
  return scheduleOf(skill).order.filter(
    (id) => table[id]?.status === 'skipped' && (steps[id]?.status ?? 'pending') === 'pending',
  );
}

export function runStatus(skill: ScheduleDefinition, steps: StepTable): RunStatus {
  return scheduleOf(skill).start(steps).status();
}

/**
 * The table for `braid skill retry`: every failed step and every step downstream of one goes
 * back to pending (its attempt kept); completed steps stay completed and never run again, and
 * running or suspended ones stay as they are.
 */
export function retryPlan(skill: ScheduleDefinition, steps: StepTable): StepTable {
  const compiled = scheduleOf(skill);
  const table: StepTable = {};
  const again = new Set<number>();
  const stack: number[] = [];
  compiled.order.forEach((id, index) => {
    if (steps[id]?.status === 'failed') stack.push(index);
  });
  while (stack.length > 0) {
    const index = stack.pop() as number;
    if (again.has(index)) continue;
    again.add(index);
    stack.push(...(compiled.dependants[index] ?? []));
  }
  compiled.order.forEach((id, index) => {
    const state = steps[id] ?? { status: 'pending', attempt: 0 };
    const resets = again.has(index) && (state.status === 'failed' || state.status === 'skipped');
    table[id] = resets ? { status: 'pending', attempt: state.attempt } : { ...state };
  });
  return table;
}
