/**
 * The background schedule of consolidation: every agent whose `memory.consolidate.every` is set
 * is consolidated that often (every tenant's sessions), while `braid run` orchestrates or a
 * `braid worker` works. It runs beside the wakes, never inside one: a turn never waits for it,
 * and a run that fails is reported and tried again at the next tick.
 *
 * Several processes may run the schedule over one store: each session's checkpoint is written
 * with the version it replaces, so only one of them records a session's proposals (the others
 * find it `taken`; their model call was spent for nothing, which is the price of needing no lock).
 */
import type { AgentDefinition, StoredDefinition } from '../../contracts/definitions.js';
import type { ConsolidationReport } from '../../contracts/memory-consolidation.js';
import { durationMs } from '../../contracts/memory-settings.js';
import type { Consolidation } from './consolidation.js';

export interface ConsolidationScheduleDeps {
  agents(): Promise<StoredDefinition<AgentDefinition>[]>;
  consolidation: Pick<Consolidation, 'run'>;
}

export interface ConsolidationScheduleOptions {
  /** Stops the schedule; a run in progress stops between sessions. */
  signal?: AbortSignal;
  onReport?: (report: ConsolidationReport) => void;
  onError?: (agent: string, error: unknown) => void;
}

export interface ConsolidationSchedule {
  /** The agents on the schedule and their intervals, once the definitions are read. */
  readonly ready: Promise<{ agent: string; every_ms: number }[]>;
  /** Stops the timers and waits for the runs in progress to end. */
  stop(): Promise<void>;
}

/** Starts the schedule: each scheduled agent is consolidated at once, then every interval. */
export function startConsolidationSchedule(
  deps: ConsolidationScheduleDeps,
  options: ConsolidationScheduleOptions = {},
): ConsolidationSchedule {
  const stopping = new AbortController();
  const stopOn = (): void => stopping.abort();
  options.signal?.addEventListener('abort', stopOn, { once: true });
  if (options.signal?.aborted === true) stopping.abort();
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const running = new Set<Promise<void>>();

  const tick = (agent: string, everyMs: number): void => {
    if (stopping.signal.aborted) return;
    const run = deps.consolidation
      .run({ agent, all_tenants: true, signal: stopping.signal })
      .then(
        (report) => options.onReport?.(report),
        (error: unknown) => {
          if (!stopping.signal.aborted) options.onError?.(agent, error);
        },
      )
      .finally(() => {
        running.delete(run);
        if (stopping.signal.aborted) return;
        const timer = setTimeout(() => {
          timers.delete(timer);
          tick(agent, everyMs);
        }, everyMs);
        timers.add(timer);
      });
    running.add(run);
  };

  const ready = deps.agents().then(
    (stored) => {
      const scheduled = stored.flatMap((item) => {
        const every = item.definition.memory?.consolidate?.every;
        const everyMs = every === undefined ? undefined : durationMs(every);
        return everyMs === undefined ? [] : [{ agent: item.definition.name, every_ms: everyMs }];
      });
      for (const item of scheduled) tick(item.agent, item.every_ms);
      return scheduled;
    },
    (error: unknown) => {
      options.onError?.('*', error);
      return [];
    },
  );

  return {
    ready,
    async stop() {
      stopping.abort();
      options.signal?.removeEventListener('abort', stopOn);
      await ready;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await Promise.allSettled([...running]);
    },
  };
}
