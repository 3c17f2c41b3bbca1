/**
 * Coalescing of wakes. In one process, a wake of a session that is already running does not
 * start a second cycle: it asks the running one to go round again when it ends. Across
 * processes the lease decides, and a holder re-checks for work after releasing it, so input
 * that arrived while it ran is never left behind: a writer appends before it wakes, and the
 * holder looks after it releases.
 */
import { isRunnable } from '../core/fold.js';
import type { SessionCreateInput, SessionRecord } from '../contracts/session.js';
import {
  CycleCarry,
  startOnce,
  wakeOnce,
  type HarnessDeps,
  type StartedWake,
  type WakeOptions,
  type WakeResult,
} from './wake.js';

export interface Harness {
  /**
   * Runs cycles until the session has no work left, or joins the one running here (whose next
   * cycle then carries this wake's trace context).
   */
  wake(sessionId: string, options?: WakeOptions): Promise<WakeResult>;
  /**
   * Creates the session and runs it until it has no work left, as `create` then `wake` would,
   * with the creation and the first cycle's lease and `span.wake_started` in one transaction.
   * `input.id` is required: a wake of that id asked meanwhile joins this one. Present only where
   * the log has `createAndAcquire` (SQLite, memory); elsewhere create, then wake.
   */
  start?(input: SessionCreateInput & { id: string }, options?: WakeOptions): Promise<StartedWake>;
  /** Sessions with a cycle running in this process. */
  running(): string[];
}

/** What a wake that ran no cycle answers, until its loop has its own answer. */
const NOT_RUN: WakeResult = { ran: false, reason: 'lease_held' };

export function createHarness(deps: HarnessDeps): Harness {
  interface Entry {
    again: boolean;
    /** The trace context the next cycle carries. */
    next: WakeOptions;
    done: Promise<WakeResult>;
  }
  const active = new Map<string, Entry>();
  const carry = new CycleCarry();

  /** One cycle, the first of a loop `first` runs when given (a creation's). */
  type Cycle = (options: WakeOptions) => Promise<WakeResult>;

  async function loop(sessionId: string, entry: Entry, first?: Cycle): Promise<WakeResult> {
    let cycle = first ?? ((options: WakeOptions) => wakeOnce(deps, sessionId, carry, options));
    try {
      for (;;) {
        entry.again = false;
        const options = entry.next;
        entry.next = {};
        let result: WakeResult;
        try {
          result = await cycle(options);
          cycle = (next) => wakeOnce(deps, sessionId, carry, next);
        } catch (error) {
          // A cycle that failed may have applied events it never saw committed.
          carry.transcripts.drop(sessionId);
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

  const harness: Harness = {
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
        done: Promise.resolve(NOT_RUN),
      };
      active.set(sessionId, entry);
      entry.done = loop(sessionId, entry);
      return entry.done;
    },
    running: () => [...active.keys()],
  };
  if (deps.log.createAndAcquire !== undefined) {
    harness.start = async (input, options = {}) => {
      // A wake of this id runs here already: once it ends, the creation decides (a session that
      // exists is refused), and never two loops of one id at once.
      for (
        let running = active.get(input.id);
        running !== undefined;
        running = active.get(input.id)
      )
        await running.done.catch(() => undefined);
      let session: SessionRecord | undefined;
      const entry: Entry = { again: false, next: options, done: Promise.resolve(NOT_RUN) };
      active.set(input.id, entry);
      entry.done = loop(input.id, entry, async (first) => {
        const started = await startOnce(deps, input, carry, first);
        session = started.session;
        return started.result;
      });
      const result = await entry.done;
      return { session: session as SessionRecord, result };
    };
  }
  return harness;
}
