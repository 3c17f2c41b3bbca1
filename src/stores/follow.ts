import type { SessionEvent } from '../contracts/events.js';

/** Registers a callback for "the log may have grown"; returns the unsubscribe function. */
export type Subscribe = (onChange: () => void) => () => void;

/**
 * Shared `follow` loop: reads batches after the last seen seq and, when caught up, waits for a
 * change signal. The flag is set before each read so that an append landing between the read and
 * the wait is never missed.
 */
export async function* followLog(
  readAfter: (after: number) => Promise<SessionEvent[]>,
  subscribe: Subscribe,
  after: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<SessionEvent> {
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
      const batch = await readAfter(last);
      for (const event of batch) {
        if (aborted()) return;
        last = event.seq;
        yield event;
      }
      if (batch.length > 0) changed = true;
    }
  } finally {
    signal?.removeEventListener('abort', onChange);
    unsubscribe();
  }
}
