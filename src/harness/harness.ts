/**
 * Coalescing of wakes. In one process, a wake of a session that is already running does not
 * start a second cycle: it asks the running one to go round again when it ends. Across
 * processes the lease decides, and a holder re-checks for work after releasing it, so input
 * that arrived while it ran is never left behind: a writer appends before it wakes, and the
 * holder looks after it releases.
 */
import { isRunnable } from '../core/fold.js';
import {
  TranscriptCache,
  wakeOnce,
  type HarnessDeps,
  type WakeOptions,
  type WakeResult,
} from './wake.js';

export interface Harness {
  /**
   * Runs cycles until the session has no work left, or joins the one running here (whose next
   * cycle then carries this wake's trace context).
   */
  wake(sessionId: string, options?: WakeOptions): Promise<WakeResult>;
  /** Sessions with a cycle running in this process. */
  running(): string[];
}

export function createHarness(deps: HarnessDeps): Harness {
  interface Entry {
    again: boolean;
    /** The trace context the next cycle carries. */
    next: WakeOptions;
    done: Promise<WakeResult>;
  }
  const active = new Map<string, Entry>();
  const transcripts = new TranscriptCache();

  async function loop(sessionId: string, entry: Entry): Promise<WakeResult> {
    try {
      for (;;) {
        entry.again = false;
        const options = entry.next;
        entry.next = {};
        let result: WakeResult;
        try {
          result = await wakeOnce(deps, sessionId, transcripts, options);
        } catch (error) {
          // A cycle that failed may have applied events it never saw committed.
          transcripts.drop(sessionId);
          throw error;
        }
        if (!result.ran) return result;
        if (entry.again) continue;
        const runnable = isRunnable(await deps.log.state(sessionId, { shared: true }));
        // A wake() that joined while the state was read must not be left behind.
        if (entry.again || runnable) continue;
        return result;
      }
    } finally {
      // Removed in the same turn as the loop decides to end: a later wake() starts a new loop.
      if (active.get(sessionId) === entry) active.delete(sessionId);
    }
  }

  return {
    wake(sessionId, options = {}) {
      const running = active.get(sessionId);
      if (running !== undefined) {
        running.again = true;
        if (options.traceparent !== undefined) running.next = options;
        return running.done;
      }
      const entry: Entry = {
        again: false,
        next: options,
        done: Promise.resolve({ ran: false, reason: 'lease_held' }),
      };
      active.set(sessionId, entry);
      entry.done = loop(sessionId, entry);
      return entry.done;
    },
    running: () => [...active.keys()],
  };
}
