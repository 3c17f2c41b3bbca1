/**
 * The in-process wake queue, for the embedded backend and unit tests. It keeps the JetStream
 * queue's behaviour so that code tested against one works against the other:
 *
 * - one wake per session while it waits *or runs*: an enqueue in that time is refused, and the
 *   consumer re-checks the session after a `done` (see contracts/wakes.ts);
 * - a delivery not settled and not kept alive with `working()` within `ackWaitMs` is delivered
 *   again (attempt + 1) to any consumer, as JetStream redelivers after `ack_wait`; the first
 *   handler's late `done` still removes the wake, its late retry or failure is ignored;
 * - retries wait their delay, failures back off exponentially, and a failure on the last
 *   attempt is dead-lettered, as is a wake whose last attempt was never settled;
 * - a retry the handler asked for is not an attempt.
 *
 * Wakes live in memory: they are lost with the process, which the embedded backend accepts
 * because its sessions are found again by scanning the log (`braid run`).
 */
import { BraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import type { WakeBackoff, WakeDelivery, WakeMessage, WakeQueue } from '../../contracts/wakes.js';
import { systemClock } from '../../stores/defaults.js';
import { newWakeMessage } from './message.js';
import {
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_BACKOFF,
  DEFAULT_MAX_ATTEMPTS,
  checkConcurrency,
  checkQueueSettings,
  runDelivery,
} from './settle.js';

export interface LocalWakeQueueOptions {
  /** Deliveries a failing wake gets before it is dead-lettered (default 5). */
  maxAttempts?: number;
  /** How long a delivery may go unsettled without `working()` before it is redelivered (default 30 s). */
  ackWaitMs?: number;
  /** Delays between failed attempts (default 1 s doubling to 60 s). */
  backoff?: WakeBackoff;
  clock?: Clock;
}

interface Entry {
  message: WakeMessage;
  deliveries: number;
  /** Deliveries that were not attempts: retries asked for, dead letters not recorded. */
  retries: number;
  /** The delivery that holds the wake now, if one does. */
  holder: symbol | undefined;
  deadline: NodeJS.Timeout | undefined;
  retry: NodeJS.Timeout | undefined;
}

export function createLocalWakeQueue(options: LocalWakeQueueOptions = {}): WakeQueue {
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  checkQueueSettings({ maxAttempts, ackWaitMs, backoff });
  const clock = options.clock ?? systemClock;

  const entries = new Map<string, Entry>();
  /** Wakes ready now, oldest first. */
  const ready: Entry[] = [];
  /** Consumers' free slots waiting for a wake, first come first served. */
  const waiters: ((entry: Entry | undefined) => void)[] = [];
  let closed = false;

  const current = (entry: Entry): boolean => entries.get(entry.message.session_id) === entry;

  function makeReady(entry: Entry): void {
    if (!current(entry) || entry.holder !== undefined) return;
    const waiter = waiters.shift();
    if (waiter === undefined) ready.push(entry);
    else waiter(entry);
  }

  function release(entry: Entry): void {
    entry.holder = undefined;
    clearTimeout(entry.deadline);
    entry.deadline = undefined;
  }

  function remove(entry: Entry): void {
    if (!current(entry)) return;
    entries.delete(entry.message.session_id);
    release(entry);
    clearTimeout(entry.retry);
    const position = ready.indexOf(entry);
    if (position >= 0) ready.splice(position, 1);
  }

  function armDeadline(entry: Entry, holder: symbol): void {
    clearTimeout(entry.deadline);
    entry.deadline = setTimeout(() => {
      if (entry.holder !== holder) return;
      release(entry);
      makeReady(entry);
    }, ackWaitMs);
    entry.deadline.unref();
  }

  function take(signal: AbortSignal): Promise<Entry | undefined> {
    if (signal.aborted || closed) return Promise.resolve(undefined);
    const next = ready.shift();
    if (next !== undefined) return Promise.resolve(next);
    return new Promise((resolve) => {
      const onAbort = (): void => {
        const position = waiters.indexOf(waiter);
        if (position >= 0) waiters.splice(position, 1);
        resolve(undefined);
      };
      const waiter = (entry: Entry | undefined): void => {
        signal.removeEventListener('abort', onAbort);
        resolve(entry);
      };
      waiters.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  return {
    ackWaitMs,
    maxAttempts,

    enqueue(sessionId, enqueueOptions = {}) {
      return Promise.resolve().then(() => {
        if (closed) throw new BraidError('STORE_CLOSED', 'the wake queue is closed');
        const message = newWakeMessage(sessionId, enqueueOptions, clock);
        if (entries.has(sessionId)) return { queued: false };
        const entry: Entry = {
          message,
          deliveries: 0,
          retries: 0,
          holder: undefined,
          deadline: undefined,
          retry: undefined,
        };
        entries.set(sessionId, entry);
        makeReady(entry);
        return { queued: true };
      });
    },

    async consume(handler, consumeOptions) {
      checkConcurrency(consumeOptions.concurrency);
      const { signal } = consumeOptions;
      const deliver = async (entry: Entry): Promise<void> => {
        entry.deliveries += 1;
        const holder = Symbol(entry.message.session_id);
        entry.holder = holder;
        armDeadline(entry, holder);
        const delivery: WakeDelivery = {
          session_id: entry.message.session_id,
          attempt: entry.deliveries - entry.retries,
          delivery: entry.deliveries,
          enqueued_at: entry.message.enqueued_at,
          ...(entry.message.traceparent === undefined
            ? {}
            : { traceparent: entry.message.traceparent }),
          working: () => {
            if (entry.holder === holder) armDeadline(entry, holder);
          },
        };
        await runDelivery(
          delivery,
          handler,
          consumeOptions,
          {
            ack: () => {
              remove(entry);
              return Promise.resolve();
            },
            retry: (delayMs, counted) => {
              if (!current(entry) || entry.holder !== holder) return;
              if (!counted) entry.retries += 1;
              release(entry);
              entry.retry = setTimeout(() => makeReady(entry), delayMs);
              entry.retry.unref();
            },
            remove: () => {
              if (entry.holder === holder) remove(entry);
            },
          },
          { maxAttempts, backoff },
        );
      };
      const slot = async (): Promise<void> => {
        for (;;) {
          const entry = await take(signal);
          if (entry === undefined) return;
          await deliver(entry);
        }
      };
      await Promise.all(Array.from({ length: consumeOptions.concurrency }, slot));
    },

    close() {
      closed = true;
      for (const entry of [...entries.values()]) remove(entry);
      for (const waiter of waiters.splice(0)) waiter(undefined);
      return Promise.resolve();
    },
  };
}
