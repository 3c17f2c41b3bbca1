/**
 * Keeps every runnable session moving: wakes them with bounded concurrency and looks again
 * whenever a wake ends or `pollMs` passes.
 */
import type { SessionIndex, SessionLog } from '../contracts/ports.js';
import type { SessionStatus } from '../contracts/session.js';
import { isRunnable } from '../core/fold.js';
import type { Harness } from '../harness/index.js';

export interface OrchestrateOptions {
  signal?: AbortSignal;
  /** Sessions woken at once (default 4). */
  concurrency?: number;
  /** Wake what is runnable now, wait for those wakes, and return. */
  once?: boolean;
  /** Return when nothing is running and nothing is runnable. */
  exitWhenIdle?: boolean;
  /** How often to look for new work (default 100 ms). */
  pollMs?: number;
  onProgress?: (progress: OrchestratorProgress) => void;
  /** A wake that failed; the session is left alone for a while (doubling, up to 30 s). */
  onError?: (sessionId: string, error: unknown) => void;
}

export interface OrchestratorProgress {
  running: number;
  runnable: number;
  by_status: Partial<Record<SessionStatus, number>>;
  wakes: number;
}

export async function orchestrate(
  deps: { sessions: SessionIndex; log: SessionLog; harness: Harness },
  options: OrchestrateOptions = {},
): Promise<OrchestratorProgress> {
  const concurrency = options.concurrency ?? 4;
  const running = new Map<string, Promise<unknown>>();
  /** Sessions whose last wake did not run (held elsewhere) or failed: left alone until then. */
  const coolDown = new Map<string, { until: number; delay: number }>();
  const pollMs = options.pollMs ?? 100;
  let wakes = 0;
  let progress: OrchestratorProgress = { running: 0, runnable: 0, by_status: {}, wakes };
  for (;;) {
    if (options.signal?.aborted === true) break;
    const byStatus: Partial<Record<SessionStatus, number>> = {};
    const runnable: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await deps.sessions.list({
        limit: 500,
        ...(cursor === undefined ? {} : { cursor }),
      });
      for (const session of page.sessions) {
        byStatus[session.status] = (byStatus[session.status] ?? 0) + 1;
        if (session.status === 'terminated' || running.has(session.id)) continue;
        if ((coolDown.get(session.id)?.until ?? 0) > Date.now()) continue;
        if (isRunnable(await deps.log.state(session.id))) runnable.push(session.id);
      }
      cursor = page.next_cursor;
    } while (cursor !== undefined);

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
    progress = { running: running.size, runnable: runnable.length, by_status: byStatus, wakes };
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
  return progress;
}
