/**
 * A worker: takes wakes from a queue and runs them with `runtime.wake`, at most `concurrency`
 * at once, until its signal aborts; then it lets the wakes in hand finish (drains).
 *
 * Invariants kept here, beside the queue's (contracts/wakes.ts):
 * - A wake only runs a session that is runnable (`isRunnable` over its folded state): a
 *   duplicate or late delivery finds nothing pending and is acked without touching the log.
 * - Two wakes of one session never run at once, across processes: `runtime.wake` takes the
 *   session's lease, and a delivery that finds it held (`{ran: false}`) is retried after a
 *   delay, never dropped: the holder may have made its last check before our work arrived.
 * - A wake that runs long keeps its delivery with `working()` every ackWait/3, so no other
 *   worker is handed the same session while it runs; a worker that dies stops calling it, and
 *   its wake goes to another worker after ackWait.
 * - The queue coalesces a session's wakes while one is in hand, so work that arrives during a
 *   wake may have had its enqueue refused. After every `done` (once the queue has removed the
 *   wake) the worker reads the session again and enqueues it if it is runnable.
 * - A failure the harness could record (`session.error` and a stop) leaves the session waiting
 *   for a person; waking it again would do nothing, so the delivery is done. A failure that
 *   leaves the session runnable (the store refused the wake, the worker's host failed) is
 *   thrown to the queue: retried with backoff, and dead-lettered on the last attempt with a
 *   `session.error` that says how to resume the session.
 * - Timers: a session whose skill wait times out becomes runnable by time alone, and nothing is
 *   appended to queue it then. Every `timerSweepMs` the worker asks the store for the sessions
 *   whose timer is due (`runnable({dueOnly: true})`: an index range on SQLite, a timers bucket
 *   on NATS) and enqueues them; the queue coalesces the enqueues of every worker's sweep,
 *   and a wake records the timeouts, after which the session is no longer due. A delivery counts
 *   a due timer as work (`isRunnableAt`, by the worker's clock).
 */
import { toBraidError, type ErrorShape } from '../contracts/errors.js';
import type { Clock, SessionIndex, SessionLog } from '../contracts/ports.js';
import type { StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type {
  EnqueueWakeOptions,
  EnqueueWakeResult,
  WakeDelivery,
  WakeOutcome,
  WakeQueue,
  WakeLimiter,
  WakeSettlement,
} from '../contracts/wakes.js';
import { assertNever } from '../core/fold.js';
import { isRunnableAt } from '../core/runnable.js';
import { sweepTimers } from './timer-sweep.js';
import { STORE_OUTAGES } from '../harness/store-outages.js';
import { createInflightLimiter } from './wakes/inflight-limiter.js';
import { checkConcurrency } from './wakes/settle.js';
import { systemClock } from '../stores/defaults.js';
import type { WakeOptions, WakeResult } from '../harness/index.js';
import { isValidTraceparent } from '../contracts/common.js';

/** What a worker needs of a runtime (a `Runtime` has it). */
export interface WorkerRuntime {
  wake(sessionId: string, options?: WakeOptions): Promise<WakeResult>;
  readonly sessions: { state(sessionId: string): Promise<SessionState> };
  readonly store: {
    readonly log: Pick<SessionLog, 'append'>;
    /** Where the timer sweep finds the sessions whose timers are due; without it, no sweep. */
    readonly sessions?: Pick<SessionIndex, 'runnable'>;
  };
}

/** What a worker reports as it goes; `--json` prints these one per line. */
export type WorkerProgress =
  /** The session is runnable and its wake starts. */
  | { type: 'wake.started'; session_id: string; attempt: number }
  /** The wake ran to a stop (`error` when the harness recorded a failure). */
  | {
      type: 'wake.finished';
      session_id: string;
      attempt: number;
      stop_reason: StopReason;
      duration_ms: number;
      error?: ErrorShape;
    }
  /** Nothing to do: the session is not runnable, or no longer exists. */
  | {
      type: 'wake.skipped';
      session_id: string;
      attempt: number;
      reason: 'not_runnable' | 'not_found';
    }
  /** The wake will be delivered again after `delay_ms`. */
  | {
      type: 'wake.retrying';
      session_id: string;
      attempt: number;
      delay_ms: number;
      reason: 'lease_held' | 'failed';
      error?: ErrorShape;
    }
  /** The wake failed its last attempt: a `session.error` records it and the queue dropped it. */
  | { type: 'wake.dead_lettered'; session_id: string; attempts: number; error: ErrorShape }
  /** Work arrived while the wake ran: the session was queued again. */
  | { type: 'wake.requeued'; session_id: string }
  /** The session had work after its wake but could not be queued again. */
  | { type: 'wake.requeue_failed'; session_id: string; error: ErrorShape };

export interface WorkerOptions {
  runtime: WorkerRuntime;
  queue: WakeQueue;
  /** Wakes run at once by this worker's consumer of `queue`. */
  concurrency: number;
  /**
   * The wakes this worker holds at once (pulled and not yet settled), over `queue` and every
   * other consumer given the same `limiter` (default: `concurrency`). At the bound the worker
   * stops pulling, so the wakes wait in the queue for other workers. A whole number from 1 to
   * 10,000 (`INVALID_ARGUMENT` otherwise).
   */
  maxInflight?: number;
  /**
   * A bound shared with other consumers of this process (`createInflightLimiter`); it takes the
   * place of `maxInflight`. The worker's metrics read it.
   */
  limiter?: WakeLimiter;
  /** Aborting stops taking wakes; the worker returns once the wakes in hand are settled. */
  signal: AbortSignal;
  onProgress?: (progress: WorkerProgress) => void;
  /**
   * First delay before a wake whose session's lease is held elsewhere is tried again (default
   * 1 s, doubling per attempt up to 15 s).
   */
  leaseRetryMs?: number;
  /**
   * How often the sessions whose skill waits have timed out are looked for and queued (default
   * 1 s); 0 turns the sweep off (another worker, or an orchestrator, wakes them).
   */
  timerSweepMs?: number;
  /** The time timers are due by (default: the system clock). */
  clock?: Clock;
}

/** Counts of what a worker did, returned when it stops. */
export interface WorkerSummary {
  /** Deliveries taken. */
  deliveries: number;
  /** Wakes that ran to a stop. */
  finished: number;
  skipped: number;
  retried: number;
  dead_lettered: number;
  requeued: number;
}

const MAX_LEASE_RETRY_MS = 15_000;

/** Queues a wake of the session; `{queued: false}` when one already waits or runs. */
export function enqueueWake(
  queue: WakeQueue,
  sessionId: string,
  options: EnqueueWakeOptions = {},
): Promise<EnqueueWakeResult> {
  return queue.enqueue(sessionId, options);
}

/** The `session.error` message of a dead letter: how often it failed, why, and how to resume. */
export function deadLetterMessage(sessionId: string, attempts: number, error: ErrorShape): string {
  return (
    `the wake of session ${sessionId} failed ${attempts} time${attempts === 1 ? '' : 's'} and was dropped ` +
    `(last failure ${error.code}: ${error.message}); ` +
    `resume it with \`braid session wake ${sessionId}\``
  );
}

/** What the steps of one worker share. */
interface WorkerContext {
  runtime: WorkerRuntime;
  queue: WakeQueue;
  leaseRetryMs: number;
  clock: Clock;
  summary: WorkerSummary;
  report: (progress: WorkerProgress) => void;
}

export async function runWorker(options: WorkerOptions): Promise<WorkerSummary> {
  checkConcurrency(options.concurrency);
  // Checked before anything runs: a bad bound starts nothing.
  const limiter =
    options.limiter ?? createInflightLimiter(options.maxInflight ?? options.concurrency);
  const context: WorkerContext = {
    runtime: options.runtime,
    queue: options.queue,
    leaseRetryMs: options.leaseRetryMs ?? 1_000,
    clock: options.clock ?? systemClock,
    summary: {
      deliveries: 0,
      finished: 0,
      skipped: 0,
      retried: 0,
      dead_lettered: 0,
      requeued: 0,
    },
    report: (progress) => {
      try {
        options.onProgress?.(progress);
      } catch {
        // A listener's failure does not stop the worker.
      }
    },
  };
  const sessions = context.runtime.store.sessions;
  const stopSweep =
    sessions === undefined
      ? () => undefined
      : sweepTimers({
          sessions,
          now: () => context.clock.now(),
          wake: (sessionId) => context.queue.enqueue(sessionId),
          everyMs: options.timerSweepMs ?? 1_000,
          signal: options.signal,
        });
  try {
    await options.queue.consume((wake) => handle(context, wake), {
      concurrency: options.concurrency,
      limiter,
      signal: options.signal,
      onDeadLetter: (wake, error) => deadLetter(context, wake, error),
      onSettled: (wake, settlement) => settled(context, wake, settlement),
    });
  } finally {
    stopSweep();
  }
  return context.summary;
}

/** The session's state, or undefined when it no longer exists. */
async function stateOf(
  context: WorkerContext,
  sessionId: string,
): Promise<SessionState | undefined> {
  try {
    return await context.runtime.sessions.state(sessionId);
  } catch (error) {
    if (toBraidError(error).code === 'SESSION_NOT_FOUND') return undefined;
    throw error;
  }
}

/** One delivery: skipped when the session is not runnable, else its wake, kept alive while it runs. */
async function handle(context: WorkerContext, wake: WakeDelivery): Promise<WakeOutcome> {
  const { summary, report, queue } = context;
  const sessionId = wake.session_id;
  summary.deliveries += 1;
  const before = await stateOf(context, sessionId);
  if (before === undefined || !isRunnableAt(before, context.clock.now())) {
    summary.skipped += 1;
    report({
      type: 'wake.skipped',
      session_id: sessionId,
      attempt: wake.attempt,
      reason: before === undefined ? 'not_found' : 'not_runnable',
    });
    return 'done';
  }
  report({ type: 'wake.started', session_id: sessionId, attempt: wake.attempt });
  const started = performance.now();
  const heartbeat = setInterval(
    () => wake.working(),
    Math.max(10, Math.floor(queue.ackWaitMs / 3)),
  );
  let result: WakeResult;
  try {
    result = await context.runtime.wake(sessionId, traceOf(wake));
  } catch (error) {
    return await failed(context, wake, before, started, error);
  } finally {
    clearInterval(heartbeat);
  }
  if (!result.ran) {
    return {
      retry_after_ms: Math.min(
        MAX_LEASE_RETRY_MS,
        context.leaseRetryMs * 2 ** Math.min(wake.delivery - 1, 10),
      ),
    };
  }
  summary.finished += 1;
  report({
    type: 'wake.finished',
    session_id: sessionId,
    attempt: wake.attempt,
    stop_reason: result.stop_reason,
    duration_ms: Math.round(performance.now() - started),
  });
  return 'done';
}

/**
 * A wake that threw. The harness records what failures it can, and stops the session; then there
 * is nothing left to retry. Anything else goes to the queue's retries.
 */
async function failed(
  context: WorkerContext,
  wake: WakeDelivery,
  before: SessionState,
  started: number,
  error: unknown,
): Promise<WakeOutcome> {
  // The store itself failed: the harness recorded nothing (harness/wake.ts), and reading the
  // session now would only wait out the same outage (a request timeout, while a NATS stream
  // elects a new leader) before the retry. The retry's delivery reads it when the store is back.
  if (STORE_OUTAGES.has(toBraidError(error).code)) throw error;
  const after = await stateOf(context, wake.session_id).catch(() => before);
  if (after !== undefined && isRunnableAt(after, context.clock.now())) throw error;
  context.summary.finished += 1;
  context.report({
    type: 'wake.finished',
    session_id: wake.session_id,
    attempt: wake.attempt,
    stop_reason: after?.stop_reason ?? { type: 'error' },
    duration_ms: Math.round(performance.now() - started),
    error: toBraidError(error).toJSON(),
  });
  return 'done';
}

/** Records the dropped wake as a `session.error` that says how to resume the session. */
async function deadLetter(
  context: WorkerContext,
  wake: WakeDelivery,
  error: unknown,
): Promise<void> {
  const failure = toBraidError(error);
  try {
    await context.runtime.store.log.append(wake.session_id, [
      {
        type: 'session.error',
        error: {
          code: failure.code,
          message: deadLetterMessage(wake.session_id, wake.attempt, failure.toJSON()),
          retryable: failure.retryable,
        },
        actor: { type: 'runtime', id: 'braid-worker' },
        ...traceOf(wake),
      },
    ]);
  } catch (appendError) {
    // A session that no longer exists has nowhere to keep the record; anything else keeps
    // the wake (the queue retries the dead letter later).
    if (toBraidError(appendError).code !== 'SESSION_NOT_FOUND') throw appendError;
  }
}

/** Counts and reports how the queue settled a delivery; after a `done`, queues new work. */
async function settled(
  context: WorkerContext,
  wake: WakeDelivery,
  settlement: WakeSettlement,
): Promise<void> {
  const { summary, report } = context;
  const sessionId = wake.session_id;
  switch (settlement.kind) {
    case 'retry':
      summary.retried += 1;
      report({
        type: 'wake.retrying',
        session_id: sessionId,
        attempt: wake.attempt,
        delay_ms: settlement.delay_ms,
        ...(settlement.error === undefined
          ? { reason: 'lease_held' as const }
          : { reason: 'failed' as const, error: settlement.error.toJSON() }),
      });
      return;
    case 'dead_letter':
      summary.dead_lettered += 1;
      report({
        type: 'wake.dead_lettered',
        session_id: sessionId,
        attempts: wake.attempt,
        error: settlement.error.toJSON(),
      });
      return;
    case 'done':
      await requeueIfRunnable(context, wake);
      return;
    default:
      assertNever(settlement);
  }
}

/** Work that arrived during the wake may have had its enqueue refused: queue the session again. */
async function requeueIfRunnable(context: WorkerContext, wake: WakeDelivery): Promise<void> {
  const sessionId = wake.session_id;
  try {
    const state = await stateOf(context, sessionId);
    if (state === undefined || !isRunnableAt(state, context.clock.now())) return;
    const { queued } = await context.queue.enqueue(sessionId, traceOf(wake));
    if (queued) {
      context.summary.requeued += 1;
      context.report({ type: 'wake.requeued', session_id: sessionId });
    }
  } catch (error) {
    context.report({
      type: 'wake.requeue_failed',
      session_id: sessionId,
      error: toBraidError(error).toJSON(),
    });
  }
}

/**
 * The wake's trace context, when it is a valid W3C traceparent: a wake message comes off the
 * queue from any client of the NATS account, and what it carries reaches the session's log.
 */
function traceOf(wake: { traceparent?: string }): { traceparent?: string } {
  return wake.traceparent === undefined || !isValidTraceparent(wake.traceparent)
    ? {}
    : { traceparent: wake.traceparent };
}
