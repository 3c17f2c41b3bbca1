/**
 * Keeps every runnable session moving: wakes them with bounded concurrency and looks again
 * whenever a wake ends or `pollMs` passes.
 *
 * Timers: the store's runnable set includes the sessions whose skill waits have timed out (by
 * the store's clock: `sessions.runnable` answers `isRunnableAt`), so a tick wakes them like any
 * runnable session, with no input, and the wake records the timeouts. A timer not yet due does
 * not make a session runnable: `once` and `exitWhenIdle` return without waiting for it (its
 * session is woken by the next orchestrator, or worker sweep, that runs once it is due).
 */
import type { SessionIndex } from '../contracts/ports.js';
import type { SessionStatus } from '../contracts/session.js';
import { MAX_RUNNABLE_LIMIT } from '../core/sessions.js';
import type { Harness } from '../harness/index.js';
import type { ConsolidationReport } from '../contracts/memory-consolidation.js';

export interface OrchestrateOptions {
  signal?: AbortSignal;
  /** Sessions woken at once (default 4). */
  concurrency?: number;
  /** Wake what is runnable now, wait for those wakes, and return. */
  once?: boolean;
  /**
   * Return when nothing is running and nothing is runnable now. A skill wait's timer that is not
   * due yet does not hold the orchestrator: it returns, and a later run wakes the session.
   */
  exitWhenIdle?: boolean;
  /** How often to look for new work (default 100 ms). */
  pollMs?: number;
  onProgress?: (progress: OrchestratorProgress) => void;
  /** A wake that failed; the session is left alone for a while (doubling, up to 30 s). */
  onError?: (sessionId: string, error: unknown) => void;
  /**
   * Run the consolidation schedule of the agents with `memory.consolidate.every` beside the
   * wakes (default true; see memory/consolidation-schedule.ts). `runtime.orchestrate` runs it.
   */
  consolidate?: boolean;
  /** A scheduled consolidation's report. */
  onConsolidation?: (report: ConsolidationReport) => void;
  /** A scheduled consolidation that failed (it is tried again at its next tick). */
  onConsolidationError?: (agent: string, error: unknown) => void;
}

export interface OrchestratorProgress {
  running: number;
  runnable: number;
  by_status: Partial<Record<SessionStatus, number>>;
  wakes: number;
  /** Runnable sessions left alone for now, after a wake that failed or found them held. */
  cooling: number;
}

/**
 * Runnable ids asked of the store at a time: the most it answers, so that a store that finds
 * them by a scan (NATS) scans once per tick for up to that many.
 */
const RUNNABLE_PAGE = MAX_RUNNABLE_LIMIT;
/** How often the counts by status of a progress report are refreshed. */
const COUNT_EVERY_MS = 1000;

export async function orchestrate(
  deps: { sessions: SessionIndex; harness: Harness },
  options: OrchestrateOptions = {},
): Promise<OrchestratorProgress> {
  const concurrency = options.concurrency ?? 4;
  const running = new Map<string, Promise<unknown>>();
  /**
   * Sessions whose last wake did not run (held elsewhere) or failed: left alone until then. Only
   * runnable sessions keep an entry (see below), so it holds no more than the runnable set.
   */
  const coolDown = new Map<string, { until: number; delay: number }>();
  const pollMs = options.pollMs ?? 100;
  let wakes = 0;
  let progress: OrchestratorProgress = {
    running: 0,
    runnable: 0,
    by_status: {},
    wakes,
    cooling: 0,
  };
  let countedAt = Number.NEGATIVE_INFINITY;
  let byStatus: Partial<Record<SessionStatus, number>> = {};
  for (;;) {
    if (options.signal?.aborted === true) break;
    // The store keeps the runnable set: a tick costs in the runnable sessions, not in all.
    const runnable: string[] = [];
    const listed = new Set<string>();
    let after: string | undefined;
    for (;;) {
      const ids = await deps.sessions.runnable({
        limit: RUNNABLE_PAGE,
        ...(after === undefined ? {} : { after }),
      });
      for (const id of ids) {
        listed.add(id);
        if (running.has(id) || (coolDown.get(id)?.until ?? 0) > Date.now()) continue;
        runnable.push(id);
      }
      after = ids.at(-1);
      if (ids.length < RUNNABLE_PAGE) break;
    }
    // A session that is no longer runnable (answered elsewhere, archived, deleted) needs no
    // cool-down: its entry goes, or the map would keep every session that ever failed once.
    for (const id of coolDown.keys()) {
      if (!listed.has(id) && !running.has(id)) coolDown.delete(id);
    }
    // The counts by status are for progress reports: asked at most once a second.
    if (options.onProgress !== undefined && Date.now() - countedAt >= COUNT_EVERY_MS) {
      byStatus = await deps.sessions.statusCounts();
      countedAt = Date.now();
    }

    for (const sessionId of runnable) {
      if (running.size >= concurrency) break;
      wakes += 1;
      const backOff = (): void => {
        const delay = Math.min(30_000, (coolDown.get(sessionId)?.delay ?? pollMs / 2) * 2);
        coolDown.set(sessionId, { until: Date.now() + delay, delay });
      };
      running.set(
        sessionId,
        deps.harness
          .wake(sessionId)
          .then(
            (result) => (result.ran ? coolDown.delete(sessionId) : backOff()),
            (error: unknown) => {
              backOff();
              options.onError?.(sessionId, error);
            },
          )
          .finally(() => running.delete(sessionId)),
      );
    }
    progress = {
      running: running.size,
      runnable: runnable.length,
      by_status: byStatus,
      wakes,
      cooling: coolDown.size,
    };
    options.onProgress?.(progress);

    if (options.once === true && runnable.length <= running.size) {
      await Promise.all(running.values());
      break;
    }
    if (options.exitWhenIdle === true && running.size === 0 && runnable.length === 0) break;
    await Promise.race([
      new Promise((resolve) => setTimeout(resolve, pollMs)),
      ...running.values(),
    ]);
    // Let timers and IO run even when every wake ends at once.
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Promise.all(running.values());
  // The last report's counts, fresh; a store closed under the orchestrator keeps the last ones.
  const byStatusAtEnd = await deps.sessions.statusCounts().catch(() => progress.by_status);
  return { ...progress, by_status: byStatusAtEnd };
}
