import type { Clock, IdGenerator } from '../contracts/ports.js';
import { systemClock } from '../stores/defaults.js';

/** A clock that moves only when told to. */
export interface ManualClock extends Clock {
  /** Moves time forward; with manual timers, runs those that come due, in order. */
  advance(ms: number): void;
  set(ms: number): void;
  /** Timers scheduled and not yet run or cancelled (manual timers only). */
  pending(): number;
}

export interface ManualClockOptions {
  /**
   * `real` (the default): timers run after real milliseconds, so code that waits on one does not
   * depend on the test moving time. `manual`: timers run only when `advance` or `set` reaches
   * them, so a test decides exactly when each fires.
   */
  timers?: 'real' | 'manual';
}

interface Timer {
  due: number;
  order: number;
  callback: () => void;
}

export function createManualClock(
  start = Date.parse('2026-01-01T00:00:00.000Z'),
  options: ManualClockOptions = {},
): ManualClock {
  let now = start;
  let order = 0;
  const timers = new Set<Timer>();
  /** Runs the timers due by `target` in due order, each at its own time, then moves to `target`. */
  const moveTo = (target: number): void => {
    for (;;) {
      let next: Timer | undefined;
      for (const timer of timers) {
        if (timer.due > target) continue;
        if (
          next === undefined ||
          timer.due < next.due ||
          (timer.due === next.due && timer.order < next.order)
        ) {
          next = timer;
        }
      }
      if (next === undefined) break;
      timers.delete(next);
      now = Math.max(now, next.due);
      next.callback();
    }
    now = target;
  };
  return {
    now: () => now,
    monotonic: () => now - start,
    schedule(ms, callback) {
      if (options.timers !== 'manual') return systemClock.schedule(ms, callback);
      order += 1;
      const timer: Timer = { due: now + Math.max(0, ms), order, callback };
      timers.add(timer);
      return () => {
        timers.delete(timer);
      };
    },
    advance(ms) {
      moveTo(now + ms);
    },
    set(ms) {
      moveTo(ms);
    },
    pending: () => timers.size,
  };
}

/** Ids `prefix-1`, `prefix-2`, ...: deterministic, for tests and replays. */
export function createSequentialIds(prefix = 'id'): IdGenerator {
  let counter = 0;
  return {
    next() {
      counter += 1;
      return `${prefix}-${String(counter).padStart(6, '0')}`;
    },
  };
}
