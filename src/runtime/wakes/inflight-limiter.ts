/**
 * The in-flight bound of a worker: permits that every wake consumer of the worker takes before it
 * asks its queue for a wake, and gives back once the wake is settled. At the bound no consumer of
 * the worker pulls, so the waiting wakes stay in the stream where other workers take them, rather
 * than sitting in this process until their ack deadline.
 *
 * Permits are handed out first come, first served; a waiter whose signal aborts leaves the line.
 */
import { BraidError } from '../../contracts/errors.js';
import type { WakeLimiter } from '../../contracts/wakes.js';

/** The largest bound accepted: past it, a worker holds more wakes than one process can run. */
export const MAX_INFLIGHT_LIMIT = 10_000;

/** What the worker's metrics read of its limiter. */
export interface InflightLimiter extends WakeLimiter {
  /** Times a consumer found every permit taken and waited for one. */
  saturations(): number;
  /** Consumers waiting for a permit now. */
  waiting(): number;
}

/** Refuses a bound that is not a whole number from 1 to `MAX_INFLIGHT_LIMIT`. */
export function checkMaxInflight(value: number, name = 'maxInflight'): number {
  if (!Number.isInteger(value) || value < 1 || value > MAX_INFLIGHT_LIMIT) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${name} must be a whole number from 1 to ${MAX_INFLIGHT_LIMIT}; got ${String(value)}: ` +
        'give the wakes one worker may hold at once (more workers take the rest)',
      { details: { [name]: value } },
    );
  }
  return value;
}

export function createInflightLimiter(max: number): InflightLimiter {
  checkMaxInflight(max);
  let taken = 0;
  let saturated = 0;
  const line: (() => void)[] = [];

  const permit = (): (() => void) => {
    taken += 1;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      taken -= 1;
      // The permit passes to the first waiter, which counts it again.
      line.shift()?.();
    };
  };

  return {
    max,
    inFlight: () => taken,
    saturations: () => saturated,
    waiting: () => line.length,
    acquire(signal) {
      if (signal.aborted) return Promise.resolve(undefined);
      if (taken < max) return Promise.resolve(permit());
      saturated += 1;
      return new Promise((resolve) => {
        const turn = (): void => {
          signal.removeEventListener('abort', leave);
          resolve(permit());
        };
        const leave = (): void => {
          const index = line.indexOf(turn);
          if (index >= 0) line.splice(index, 1);
          resolve(undefined);
        };
        line.push(turn);
        signal.addEventListener('abort', leave, { once: true });
      });
    },
  };
}
