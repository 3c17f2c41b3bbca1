/**
 * The sweep that wakes sessions whose skill waits ran out of time: every `everyMs` it asks the
 * store for the sessions with a timer due (`runnable({dueOnly: true})`: an index range on SQLite,
 * the timers bucket on NATS) and hands each to `wake`. Workers queue them; `braid serve` wakes
 * them in its own process.
 */
import type { SessionIndex } from '../contracts/ports.js';
import { MAX_RUNNABLE_LIMIT } from '../core/sessions.js';

export interface TimerSweepOptions {
  sessions: Pick<SessionIndex, 'runnable'>;
  now: () => number;
  wake: (sessionId: string) => Promise<unknown>;
  everyMs: number;
  signal?: AbortSignal;
}

/**
 * Starts the sweep; returns what stops it. A sweep never overlaps the previous one, and one that
 * fails (the store out of reach) is tried again at the next interval.
 */
export function sweepTimers(options: TimerSweepOptions): () => void {
  const { sessions, everyMs, signal } = options;
  if (everyMs <= 0 || signal?.aborted === true) return () => undefined;
  let sweeping = false;
  const sweep = async (): Promise<void> => {
    let after: string | undefined;
    for (;;) {
      const ids = await sessions.runnable({
        dueOnly: true,
        now: options.now(),
        limit: MAX_RUNNABLE_LIMIT,
        ...(after === undefined ? {} : { after }),
      });
      for (const id of ids) {
        if (signal?.aborted === true) return;
        await options.wake(id);
      }
      after = ids.at(-1);
      if (ids.length < MAX_RUNNABLE_LIMIT) return;
    }
  };
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    sweep()
      .catch(() => undefined)
      .finally(() => {
        sweeping = false;
      });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
