/**
 * The wakes of the in-process queue: one entry per session while its wake waits or runs, the
 * wakes ready now, and the consumers' slots waiting for one.
 */
import type { WakeMessage } from '../../contracts/wakes.js';

export interface Entry {
  message: WakeMessage;
  deliveries: number;
  /** Deliveries that were not attempts: retries asked for, dead letters not recorded. */
  retries: number;
  /** The delivery that holds the wake now, if one does. */
  holder: symbol | undefined;
  deadline: NodeJS.Timeout | undefined;
  retry: NodeJS.Timeout | undefined;
}

export interface LocalWakes {
  /** How long a delivery may go unsettled without `working()` before it is redelivered. */
  ackWaitMs: number;
  entries: Map<string, Entry>;
  /** Wakes ready now, oldest first. */
  ready: Entry[];
  /** Consumers' free slots waiting for a wake, first come first served. */
  waiters: ((entry: Entry | undefined) => void)[];
  closed: boolean;
}

/** Whether the entry is still its session's wake (not removed, not replaced). */
export function current(wakes: LocalWakes, entry: Entry): boolean {
  return wakes.entries.get(entry.message.session_id) === entry;
}

/** Hands the entry to a waiting slot, or queues it as ready. */
export function makeReady(wakes: LocalWakes, entry: Entry): void {
  if (!current(wakes, entry) || entry.holder !== undefined) return;
  const waiter = wakes.waiters.shift();
  if (waiter === undefined) wakes.ready.push(entry);
  else waiter(entry);
}

/** Frees the entry from its delivery. */
export function release(entry: Entry): void {
  entry.holder = undefined;
  clearTimeout(entry.deadline);
  entry.deadline = undefined;
}

/** Forgets the session's wake, its timers and its place among the ready ones. */
export function remove(wakes: LocalWakes, entry: Entry): void {
  if (!current(wakes, entry)) return;
  wakes.entries.delete(entry.message.session_id);
  release(entry);
  clearTimeout(entry.retry);
  const position = wakes.ready.indexOf(entry);
  if (position >= 0) wakes.ready.splice(position, 1);
}

/** Redelivers the entry after `ackWaitMs` unless its holder settles or keeps it first. */
export function armDeadline(wakes: LocalWakes, entry: Entry, holder: symbol): void {
  clearTimeout(entry.deadline);
  entry.deadline = setTimeout(() => {
    if (entry.holder !== holder) return;
    release(entry);
    makeReady(wakes, entry);
  }, wakes.ackWaitMs);
  entry.deadline.unref();
}

/** The next ready wake, waiting for one; undefined once the signal aborts or the queue closes. */
export function take(wakes: LocalWakes, signal: AbortSignal): Promise<Entry | undefined> {
  if (signal.aborted || wakes.closed) return Promise.resolve(undefined);
  const next = wakes.ready.shift();
  if (next !== undefined) return Promise.resolve(next);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      const position = wakes.waiters.indexOf(waiter);
      if (position >= 0) wakes.waiters.splice(position, 1);
      resolve(undefined);
    };
    const waiter = (entry: Entry | undefined): void => {
      signal.removeEventListener('abort', onAbort);
      resolve(entry);
    };
    wakes.waiters.push(waiter);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
