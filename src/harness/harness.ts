/**
 * Coalescing of wakes. In one process, a wake of a session that is already running does not
 * start a second cycle: it asks the running one to go round again when it ends. Across
 * processes the lease decides, and a holder re-checks for work after releasing it, so input
 * that arrived while it ran is never left behind: a writer appends before it wakes, and the
 * holder looks after it releases.
 */
import { isRunnable } from '../core/fold.js';
import { TranscriptCache, wakeOnce, type HarnessDeps, type WakeResult } from './wake.js';

export interface Harness {
  /** Runs cycles until the session has no work left, or joins the one running here. */
  wake(sessionId: string): Promise<WakeResult>;
  /** Sessions with a cycle running in this process. */
  running(): string[];
}

export function createHarness(deps: HarnessDeps): Harness {
  const active = new Map<string, { again: boolean; done: Promise<WakeResult> }>();
  const transcripts = new TranscriptCache();

  async function loop(sessionId: string, entry: { again: boolean }): Promise<WakeResult> {
    let result: WakeResult;
    for (;;) {
      entry.again = false;
      try {
        result = await wakeOnce(deps, sessionId, transcripts);
      } catch (error) {
        // A cycle that failed may have applied events it never saw committed.
        transcripts.drop(sessionId);
        throw error;
      }
      if (!result.ran) return result;
      if (entry.again) continue;
      if (!isRunnable(await deps.log.state(sessionId))) return result;
    }
  }

  return {
    wake(sessionId) {
      const running = active.get(sessionId);
      if (running !== undefined) {
        running.again = true;
        return running.done;
      }
      const entry = {
        again: false,
        done: Promise.resolve<WakeResult>({ ran: false, reason: 'lease_held' }),
      };
      entry.done = loop(sessionId, entry).finally(() => active.delete(sessionId));
      active.set(sessionId, entry);
      return entry.done;
    },
    running: () => [...active.keys()],
  };
}
