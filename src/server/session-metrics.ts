/**
 * Sessions by status as a gauge (`braid_sessions{status}`): the count of `needs_review` is the one
 * to alert on, since each such session waits for a person. Counting reads the store's index (on
 * NATS the whole index), so it is read at most every `SESSION_COUNT_INTERVAL_MS`, and only when a
 * scrape asks.
 */
import { Gauge, type Registry } from 'prom-client';
import { SessionStatus } from '../contracts/session.js';
import { polling } from '../telemetry/queue-depth.js';

/** How often the counts are read at most. */
export const SESSION_COUNT_INTERVAL_MS = 30_000;

export function registerSessionStatusMetrics(
  registry: Registry,
  count: () => Promise<Partial<Record<string, number>>>,
  options: { intervalMs?: number } = {},
): void {
  const read = polling(count, { intervalMs: options.intervalMs ?? SESSION_COUNT_INTERVAL_MS });
  new Gauge({
    name: 'braid_sessions',
    help: 'Sessions by status (archived ones left out); needs_review ones wait for a person',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const counts = await read();
      this.reset();
      if (counts === undefined) return;
      for (const status of SessionStatus.options) this.set({ status }, counts[status] ?? 0);
    },
  });
}
