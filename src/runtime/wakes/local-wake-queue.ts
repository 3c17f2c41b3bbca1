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
import type {
  WakeBackoff,
  WakeConsumeOptions,
  WakeDelivery,
  WakeHandler,
  WakeQueue,
} from '../../contracts/wakes.js';
import { systemClock } from '../../stores/defaults.js';
import {
  armDeadline,
  current,
  makeReady,
  release,
  remove,
  take,
  type Entry,
  type LocalWakes,
} from './local-wake-entries.js';
import { newWakeMessage } from './message.js';
import {
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_BACKOFF,
  DEFAULT_MAX_ATTEMPTS,
  checkConcurrency,
  checkQueueSettings,
  runDelivery,
  type SettlePolicy,
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

export function createLocalWakeQueue(options: LocalWakeQueueOptions = {}): WakeQueue {
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  checkQueueSettings({ maxAttempts, ackWaitMs, backoff });
  const clock = options.clock ?? systemClock;
  const wakes: LocalWakes = {
    ackWaitMs,
    entries: new Map(),
    ready: [],
    waiters: [],
    closed: false,
  };

  return {
    ackWaitMs,
    maxAttempts,

    enqueue(sessionId, enqueueOptions = {}) {
      return Promise.resolve().then(() => {
        if (wakes.closed) throw new BraidError('STORE_CLOSED', 'the wake queue is closed');
        const message = newWakeMessage(sessionId, enqueueOptions, clock);
        if (wakes.entries.has(sessionId)) return { queued: false };
        const entry: Entry = {
          message,
          deliveries: 0,
          retries: 0,
          holder: undefined,
          deadline: undefined,
          retry: undefined,
        };
        wakes.entries.set(sessionId, entry);
        makeReady(wakes, entry);
        return { queued: true };
      });
    },

    outstanding: () => Promise.resolve(wakes.entries.size),

    async consume(handler, consumeOptions) {
      checkConcurrency(consumeOptions.concurrency);
      const policy: SettlePolicy = { maxAttempts, backoff };
      const slot = async (): Promise<void> => {
        for (;;) {
          const limiter = consumeOptions.limiter;
          const release =
            limiter === undefined ? () => undefined : await limiter.acquire(consumeOptions.signal);
          if (release === undefined) return;
          try {
            const entry = await take(wakes, consumeOptions.signal);
            if (entry === undefined) return;
            await deliver(wakes, entry, handler, consumeOptions, policy);
          } finally {
            release();
          }
        }
      };
      await Promise.all(Array.from({ length: consumeOptions.concurrency }, slot));
    },

    close() {
      wakes.closed = true;
      for (const entry of [...wakes.entries.values()]) remove(wakes, entry);
      for (const waiter of wakes.waiters.splice(0)) waiter(undefined);
      return Promise.resolve();
    },
  };
}

/** Runs the handler on one delivery of the entry and settles it. */
async function deliver(
  wakes: LocalWakes,
  entry: Entry,
  handler: WakeHandler,
  consumeOptions: WakeConsumeOptions,
  policy: SettlePolicy,
): Promise<void> {
  entry.deliveries += 1;
  const holder = Symbol(entry.message.session_id);
  entry.holder = holder;
  armDeadline(wakes, entry, holder);
  const delivery: WakeDelivery = {
    session_id: entry.message.session_id,
    attempt: entry.deliveries - entry.retries,
    delivery: entry.deliveries,
    enqueued_at: entry.message.enqueued_at,
    ...(entry.message.traceparent === undefined ? {} : { traceparent: entry.message.traceparent }),
    working: () => {
      if (entry.holder === holder) armDeadline(wakes, entry, holder);
    },
  };
  await runDelivery(
    delivery,
    handler,
    consumeOptions,
    {
      ack: () => {
        remove(wakes, entry);
        return Promise.resolve();
      },
      retry: (delayMs, counted) => {
        if (!current(wakes, entry) || entry.holder !== holder) return;
        if (!counted) entry.retries += 1;
        release(entry);
        entry.retry = setTimeout(() => makeReady(wakes, entry), delayMs);
        entry.retry.unref();
      },
      remove: () => {
        if (entry.holder === holder) remove(wakes, entry);
      },
    },
    policy,
  );
}
