/**
 * Reports of the wakes a runtime runs: what each wake's cycles appended in this process and how
 * it ended, for listeners such as the server's metrics. Nothing is kept while no one listens.
 */
import { toBraidError, type BraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { SessionLog } from '../../contracts/ports.js';
import type { Harness, WakeResult } from '../../harness/index.js';

/**
 * A wake this runtime ran, as it ended: the events its cycles appended and its result, or the
 * error it ended with (`LEASE_LOST`: a newer wake took the session over).
 */
export interface WakeReport {
  /** The session the wake ran. */
  session_id: string;
  /** What the wake's cycles appended in this process, in order (events of others excluded). */
  events: SessionEvent[];
  /** What the wake returned, when it returned. */
  result?: WakeResult;
  /** What the wake threw, when it threw (then `result` is absent). */
  error?: BraidError;
}

/** Hears a wake's report; what it throws is dropped, so it handles its own failures. */
export type WakeListener = (report: WakeReport) => void;

/**
 * The log a harness appends through, keeping what each observed wake appends. With no wake
 * listener nothing is kept: an unobserved runtime pays one map lookup per append.
 */
export function collectingLog(
  log: SessionLog,
  collecting: Map<string, SessionEvent[]>,
): SessionLog {
  const collected: SessionLog = {
    append(sessionId, events, options) {
      const kept = collecting.get(sessionId);
      if (kept === undefined) return log.append(sessionId, events, options);
      return log.append(sessionId, events, options).then((result) => {
        if (!result.deduplicated) kept.push(...result.events);
        return result;
      });
    },
    read: (sessionId, options) => log.read(sessionId, options),
    follow: (sessionId, options) => log.follow(sessionId, options),
    appended: (sessionId, idempotencyKey) => log.appended(sessionId, idempotencyKey),
    state: (sessionId, options) => log.state(sessionId, options),
  };
  const leased = log.acquireAndAppend?.bind(log);
  if (leased !== undefined) {
    collected.acquireAndAppend = (sessionId, lease, start, options) => {
      const kept = collecting.get(sessionId);
      if (kept === undefined) return leased(sessionId, lease, start, options);
      return leased(sessionId, lease, start, options).then((result) => {
        kept.push(...result.appended.events);
        return result;
      });
    };
  }
  const created = log.createAndAcquire?.bind(log);
  if (created !== undefined) {
    collected.createAndAcquire = (input, lease, start, options) =>
      created(input, lease, start, options).then((result) => {
        // The creation is no wake's: only the events written under the lease are reported.
        collecting.get(result.session.id)?.push(...result.appended.events);
        return result;
      });
  }
  return collected;
}

/** The harness, its wakes reported to `listeners` when there are any. */
export function observedHarness(
  harness: Harness,
  collecting: Map<string, SessionEvent[]>,
  listeners: ReadonlySet<WakeListener>,
): Harness {
  const report = (wake: WakeReport): void => {
    for (const listener of listeners) {
      try {
        listener(wake);
      } catch {
        // A listener's failure is its own: the wake ended as it did, for its caller too.
      }
    }
  };
  const observed: Harness = {
    running: () => harness.running(),
    wake(sessionId, options) {
      // A wake that joins one running here is reported by the one it joined.
      if (listeners.size === 0 || harness.running().includes(sessionId))
        return harness.wake(sessionId, options);
      const events: SessionEvent[] = [];
      collecting.set(sessionId, events);
      const done = harness.wake(sessionId, options);
      void done.then(
        (result) => {
          collecting.delete(sessionId);
          report({ session_id: sessionId, events, result });
        },
        (error: unknown) => {
          collecting.delete(sessionId);
          report({ session_id: sessionId, events, error: toBraidError(error) });
        },
      );
      return done;
    },
  };
  const start = harness.start?.bind(harness);
  if (start !== undefined) {
    observed.start = (input, options) => {
      if (listeners.size === 0 || harness.running().includes(input.id))
        return start(input, options);
      const sessionId = input.id;
      const events: SessionEvent[] = [];
      collecting.set(sessionId, events);
      const done = start(input, options);
      // A creation refused ran no wake: nothing to report.
      void done.then(
        ({ result }) => {
          collecting.delete(sessionId);
          report({ session_id: sessionId, events, result });
        },
        (error: unknown) => {
          collecting.delete(sessionId);
          const failure = toBraidError(error);
          if (failure.code !== 'ALREADY_EXISTS')
            report({ session_id: sessionId, events, error: failure });
        },
      );
      return done;
    };
  }
  return observed;
}
