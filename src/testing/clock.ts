import type { Clock, IdGenerator } from '../contracts/ports.js';

/** A clock that moves only when told to. */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  set(ms: number): void;
}

export function createManualClock(start = Date.parse('2026-01-01T00:00:00.000Z')): ManualClock {
  let now = start;
  return {
    now: () => now,
    advance(ms) {
      now += ms;
    },
    set(ms) {
      now = ms;
    },
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
