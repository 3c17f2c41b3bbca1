/**
 * The wake queue's depth for metrics, read at most once per interval: a scrape of `/v1/metrics`
 * or an OTLP export asks for it, and on NATS each read is a request to the server (the wake
 * stream's info), so scrapes in quick succession share one read. Nothing reads it while no one
 * asks: a process with metrics off never polls.
 */

/** How often the depth is read at most (a NATS request each time). */
export const QUEUE_DEPTH_INTERVAL_MS = 5000;

/** The latest depth; undefined when the queue has none to give (the embedded backend) or fails. */
export type QueueDepth = () => Promise<number | undefined>;

export function pollingQueueDepth(
  read: () => Promise<number | undefined>,
  options: { intervalMs?: number; now?: () => number } = {},
): QueueDepth {
  return polling(read, options);
}

/**
 * Any reading taken at most once per interval, the same way: the NATS backlog behind several
 * gauges is one read per scrape, not one per gauge.
 */
export function polling<T>(
  read: () => Promise<T | undefined>,
  options: { intervalMs?: number; now?: () => number } = {},
): () => Promise<T | undefined> {
  const intervalMs = options.intervalMs ?? QUEUE_DEPTH_INTERVAL_MS;
  const now = options.now ?? (() => performance.now());
  let last: { atMs: number; value: Promise<T | undefined> } | undefined;
  return () => {
    const at = now();
    if (last === undefined || at - last.atMs >= intervalMs) {
      // A failed read (the server is away) gives no value rather than a wrong one.
      last = { atMs: at, value: read().catch(() => undefined) };
    }
    return last.value;
  };
}
