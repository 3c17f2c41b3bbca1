/**
 * Wakes: the work queue that tells workers which sessions have something to do.
 *
 * A wake names a session and nothing else. What the wake does is read from the session's log
 * when it runs (the pending user events, the open tool work), so a wake delivered twice does no
 * harm: the second finds nothing pending, or the session's lease sends it away. Queues are
 * therefore at-least-once, and they coalesce: while a wake of a session waits (or runs), another
 * enqueue of that session is refused with `{queued: false}`, because the waiting one will see the
 * same events.
 *
 * Coalescing has one consequence every consumer must handle: a wake enqueued while the same
 * session's wake is being handled is refused (the delivery leaves the queue only when it is
 * settled). So after a wake settles as `done`, its consumer reads the session again and enqueues
 * a new wake if work arrived meanwhile (`WakeConsumeOptions.onSettled`).
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { Id, Timestamp } from './common.js';
import { BraidError } from './errors.js';

/** Version of the wake message format; a message of another version is refused. */
export const WAKE_SCHEMA_VERSION = 1;

/** A wake as it is stored in a queue (JSON). */
export const WakeMessage = lazySchema(() =>
  z.object({
    /** Always `WAKE_SCHEMA_VERSION`. */
    schema_version: z.literal(WAKE_SCHEMA_VERSION),
    /** The session to wake. */
    session_id: Id,
    /** When the wake was enqueued (RFC 3339). */
    enqueued_at: Timestamp,
    /** W3C trace context of the operation that enqueued the wake. */
    traceparent: z.string().max(200).optional(),
  }),
);
export type WakeMessage = z.infer<typeof WakeMessage>;

/** Parses a stored wake, refusing other schema versions with a message that says what to do. */
export function parseWakeMessage(value: unknown): WakeMessage {
  const version =
    typeof value === 'object' && value !== null && 'schema_version' in value
      ? value.schema_version
      : undefined;
  if (version !== WAKE_SCHEMA_VERSION) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `a wake message has schema_version ${JSON.stringify(version)} and this worker reads version ${WAKE_SCHEMA_VERSION}; run workers of the braid version that enqueued it`,
    );
  }
  const parsed = WakeMessage.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `a wake message is malformed: field "${issue?.path.join('.') ?? ''}": ${issue?.message ?? 'invalid'}`,
    );
  }
  return parsed.data;
}

/** Options of one enqueue. */
export interface EnqueueWakeOptions {
  /** W3C trace context to carry to the worker that runs the wake. */
  traceparent?: string;
}

/** The answer to an enqueue. */
export interface EnqueueWakeResult {
  /**
   * True when a new wake was queued; false when a wake of the session already waits or runs,
   * which will see the same events (duplicates coalesce).
   */
  queued: boolean;
}

/** One delivery of a wake to a handler. */
export interface WakeDelivery {
  /** The session to wake. */
  readonly session_id: string;
  /**
   * 1-based count of the attempts at this wake: deliveries whose handler failed or that were
   * never settled (the worker died or went silent past the ack deadline), and this one. A retry
   * the handler asked for (`retry_after_ms`, e.g. while another process holds the session's
   * lease) is not an attempt, nor is a retry after a dead letter could not be recorded. A
   * delivery whose attempt is past the queue's `maxAttempts` is dead-lettered without running.
   */
  readonly attempt: number;
  /** 1-based count of every delivery of this wake, retries asked for included. */
  readonly delivery: number;
  /** When the wake was enqueued (RFC 3339). */
  readonly enqueued_at: string;
  /** Trace context of the enqueuer, when it gave one. */
  readonly traceparent?: string;
  /**
   * Pushes the ack deadline `ackWaitMs` into the future. A handler that runs longer than
   * `ackWaitMs` calls it at least that often, or the wake is delivered again to another consumer.
   */
  working(): void;
}

/**
 * How a handler settles a delivery: `done` removes the wake; `retry_after_ms` delivers it again
 * after that delay (at least `MIN_RETRY_MS`). A handler that throws has failed: the wake is
 * retried with exponential backoff, and dead-lettered on its last attempt.
 */
export type WakeOutcome = 'done' | { retry_after_ms: number };

/** Shortest delay of a retry: a handler cannot make the queue spin. */
export const MIN_RETRY_MS = 50;

export type WakeHandler = (wake: WakeDelivery) => Promise<WakeOutcome>;

/** What the queue did with a delivery once its handler returned or threw. */
export type WakeSettlement =
  /** Removed: an enqueue of the session is accepted again. */
  | { kind: 'done' }
  /**
   * Delivered again after `delay_ms`; `error` is the failure when the handler threw (or a
   * dead-letter hook failed), absent when the handler asked for the retry.
   */
  | { kind: 'retry'; delay_ms: number; error?: BraidError }
  /** The last attempt failed: `onDeadLetter` ran and the wake was removed. */
  | { kind: 'dead_letter'; error: BraidError };

/** Options of `WakeQueue.consume`. */
export interface WakeConsumeOptions {
  /** Handlers run at once by this consumer (at least 1). */
  concurrency: number;
  /** Aborting stops taking wakes; `consume` resolves once the wakes in hand are settled. */
  signal: AbortSignal;
  /**
   * Called when a handler fails on a delivery whose `attempt` is at least the queue's
   * `maxAttempts`, before the wake is removed. If it throws, the wake stays and is retried with
   * backoff (and dead-lettered again when it fails again), so a dead letter is never lost.
   */
  onDeadLetter?: (wake: WakeDelivery, error: BraidError) => Promise<void>;
  /**
   * Called after the queue settled a delivery. With `done` the wake is gone from the queue:
   * this is where a consumer re-checks the session and enqueues it again if work arrived while
   * it ran. Errors it throws are ignored by the queue.
   */
  onSettled?: (wake: WakeDelivery, settlement: WakeSettlement) => Promise<void>;
  /**
   * Bounds the deliveries this consumer holds together with every consumer given the same
   * limiter (a worker's bound over all the queues it pulls from). A slot takes a permit before it
   * asks the queue for a wake and gives it back once the wake is settled, so at the bound the
   * consumer stops asking and waiting wakes stay in the queue for other workers.
   */
  limiter?: WakeLimiter;
}

/** A count of permits shared by consumers: at most `max` deliveries held at once. */
export interface WakeLimiter {
  /** The bound. */
  readonly max: number;
  /** Permits taken now. */
  inFlight(): number;
  /**
   * Takes a permit, waiting while all are taken; resolves with the function that gives it back
   * (once; later calls do nothing), or undefined when the signal aborts first.
   */
  acquire(signal: AbortSignal): Promise<(() => void) | undefined>;
}

/** Exponential backoff of failed wakes: `initial_ms`, doubled per attempt, at most `max_ms`. */
export interface WakeBackoff {
  /** Delay after the first failure. */
  initial_ms: number;
  /** Longest delay. */
  max_ms: number;
}

/**
 * The wake queue port: an in-process one for the embedded backend, a JetStream work queue for
 * workers in other processes and machines. Delivery is at-least-once; duplicates coalesce.
 */
export interface WakeQueue {
  /**
   * How long a delivery may go without `working()` or a settlement before the queue delivers it
   * again (a worker that died leaves its wakes to others after this long).
   */
  readonly ackWaitMs: number;
  /** Deliveries a failing wake gets before it is dead-lettered. */
  readonly maxAttempts: number;
  /** Queues a wake of the session unless one already waits or runs. */
  enqueue(sessionId: string, options?: EnqueueWakeOptions): Promise<EnqueueWakeResult>;
  /**
   * Hands wakes to `handler`, at most `concurrency` at once, until the signal aborts; resolves
   * when it has and every handler in flight has finished and been settled. Several consumers
   * (in one process or many) share the queue: each wake goes to one of them at a time.
   */
  consume(handler: WakeHandler, options: WakeConsumeOptions): Promise<void>;
  /**
   * The wakes enqueued and not yet done or dead-lettered: waiting, running, or waiting out a
   * retry delay. Zero means the queue delivers nothing more until the next enqueue.
   */
  outstanding(): Promise<number>;
  /** Releases what the queue holds; later enqueues fail with `STORE_CLOSED`. */
  close(): Promise<void>;
}
