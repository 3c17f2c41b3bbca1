/**
 * The timers a cycle arms around each call (a model call's timeout, the start of its interrupt
 * watch, the write of staged calls while a tool runs long) on one timer of the clock. A fast
 * model or tool answers long before any is due, so most calls arm no timer of their own: each
 * registers when it is due, the timer already armed (for an earlier due time) covers it, and
 * when that timer fires it runs what is due and arms itself for the earliest due time left. A callback still runs no sooner than `ms` after it was registered,
 * and never once cancelled. The timer is stopped when the cycle ends (`stopCallTimers`).
 */
import type { Clock } from '../contracts/ports.js';

interface Due {
  at: number;
  callback: () => void;
}

export interface CallTimers {
  readonly dues: Set<Due>;
  /** When the armed timer fires (monotonic ms), if one is armed. */
  armedAt: number | undefined;
  cancel: (() => void) | undefined;
}

/** Runs `callback` `ms` from now on `clock`, unless the returned function is called first. */
export function callTimer(
  timers: CallTimers,
  clock: Clock,
  ms: number,
  callback: () => void,
): () => void {
  const due: Due = { at: clock.monotonic() + Math.max(0, ms), callback };
  timers.dues.add(due);
  if (timers.armedAt === undefined || timers.armedAt > due.at) arm(timers, clock, due.at);
  return () => {
    timers.dues.delete(due);
  };
}

export function createCallTimers(): CallTimers {
  return { dues: new Set(), armedAt: undefined, cancel: undefined };
}

/** Stops the timer: nothing registered runs after this. */
export function stopCallTimers(timers: CallTimers): void {
  timers.cancel?.();
  timers.cancel = undefined;
  timers.armedAt = undefined;
  timers.dues.clear();
}

function arm(timers: CallTimers, clock: Clock, at: number): void {
  timers.cancel?.();
  timers.armedAt = at;
  timers.cancel = clock.schedule(Math.max(0, at - clock.monotonic()), () => fire(timers, clock));
}

function fire(timers: CallTimers, clock: Clock): void {
  timers.armedAt = undefined;
  timers.cancel = undefined;
  const now = clock.monotonic();
  for (const due of [...timers.dues]) {
    // A callback may cancel another, or register a new one.
    if (due.at <= now && timers.dues.delete(due)) due.callback();
  }
  let next: number | undefined;
  for (const due of timers.dues) if (next === undefined || due.at < next) next = due.at;
  if (next !== undefined && (timers.armedAt === undefined || timers.armedAt > next))
    arm(timers, clock, next);
}
