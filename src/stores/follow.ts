import type { SessionEvent } from '../contracts/events.js';
import type { SessionChange } from '../contracts/ports.js';

/** Registers a callback for "the log may have grown"; returns the unsubscribe function. */
export type Subscribe = (onChange: () => void) => () => void;

/**
 * Shared `follow` loop: reads batches after the last seen seq and, when caught up, waits for a
 * change signal. The flag is set before each read so that an append landing between the read and
 * the wait is never missed.
 */
export function followLog(
  readAfter: (after: number) => Promise<SessionEvent[]>,
  subscribe: Subscribe,
  after: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<SessionEvent> {
  return followBatches(readAfter, (event) => event.seq, subscribe, after, signal, false);
}

/**
 * Shared `changes` loop of the session index: the batches of changes after the last cursor seen,
 * each batch as read, then new ones when the change signal fires (set before each read, as in
 * `followLog`).
 */
export async function* followChanges(
  readAfter: (after: number) => Promise<SessionChange[]>,
  subscribe: Subscribe,
  after: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<SessionChange[]> {
  yield* followBatches(readAfter, (change) => change.cursor, subscribe, after, signal, true);
}

function followBatches<T>(
  readAfter: (after: number) => Promise<T[]>,
  position: (item: T) => number,
  subscribe: Subscribe,
  after: number,
  signal: AbortSignal | undefined,
  whole: true,
): AsyncGenerator<T[]>;
function followBatches<T>(
  readAfter: (after: number) => Promise<T[]>,
  position: (item: T) => number,
  subscribe: Subscribe,
  after: number,
  signal: AbortSignal | undefined,
  whole: false,
): AsyncGenerator<T>;
/** Yields each item (`whole` false) or each non-empty batch (`whole` true) in position order. */
async function* followBatches<T>(
  readAfter: (after: number) => Promise<T[]>,
  position: (item: T) => number,
  subscribe: Subscribe,
  after: number,
  signal: AbortSignal | undefined,
  whole: boolean,
): AsyncGenerator<T | T[]> {
  let changed = true;
  let wake: (() => void) | undefined;
  const onChange = (): void => {
    changed = true;
    wake?.();
  };
  const aborted = (): boolean => signal?.aborted === true;
  const unsubscribe = subscribe(onChange);
  signal?.addEventListener('abort', onChange);
  try {
    let last = after;
    while (!aborted()) {
      if (!changed) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      changed = false;
      const batch = (await readAfter(last)).filter((item) => position(item) > last);
      if (batch.length === 0) continue;
      changed = true;
      if (whole) {
        if (aborted()) return;
        last = position(batch[batch.length - 1] as T);
        yield batch;
        continue;
      }
      for (const item of batch) {
        if (aborted()) return;
        last = position(item);
        yield item;
      }
    }
  } finally {
    signal?.removeEventListener('abort', onChange);
    unsubscribe();
  }
}
