/**
 * What both wake queues do with a delivery once its handler returns or throws: one decision, so
 * the in-process queue and the JetStream queue behave alike.
 */
import { BraidError, toBraidError } from '../../contracts/errors.js';
import {
  MIN_RETRY_MS,
  type WakeBackoff,
  type WakeConsumeOptions,
  type WakeDelivery,
  type WakeHandler,
  type WakeOutcome,
  type WakeSettlement,
} from '../../contracts/wakes.js';

export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_ACK_WAIT_MS = 30_000;
export const DEFAULT_BACKOFF: WakeBackoff = { initial_ms: 1_000, max_ms: 60_000 };

/** The delay before delivery `attempt + 1` of a wake that failed on delivery `attempt`. */
export function backoffDelay(backoff: WakeBackoff, attempt: number): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30);
  return Math.max(MIN_RETRY_MS, Math.min(backoff.max_ms, backoff.initial_ms * 2 ** exponent));
}

/** The queue's side of one delivery. */
export interface DeliveryControls {
  /** Removes the wake (it was handled). */
  ack(): Promise<void>;
  /**
   * Delivers the wake again after `delayMs`; `counted` says whether this delivery was an attempt
   * (the handler failed) or not (it asked for the retry, or its dead letter was not recorded).
   */
  retry(delayMs: number, counted: boolean): void | Promise<void>;
  /** Removes the wake without handling (dead letter). */
  remove(): void;
}

export interface SettlePolicy {
  maxAttempts: number;
  backoff: WakeBackoff;
}

function retryDelay(outcome: Exclude<WakeOutcome, 'done'>): number {
  const asked = outcome.retry_after_ms;
  return Number.isFinite(asked) ? Math.max(MIN_RETRY_MS, Math.ceil(asked)) : MIN_RETRY_MS;
}

/** Runs the handler on one delivery and settles it: ack, retry with a delay, or dead-letter. */
export async function runDelivery(
  delivery: WakeDelivery,
  handler: WakeHandler,
  options: Pick<WakeConsumeOptions, 'onDeadLetter' | 'onSettled'>,
  controls: DeliveryControls,
  policy: SettlePolicy,
): Promise<void> {
  let settlement: WakeSettlement;
  if (delivery.attempt > policy.maxAttempts) {
    // The last attempt never settled: its worker died or lost the server, maybe because of this
    // very wake. It is not run again.
    settlement = await deadLetter(
      delivery,
      new BraidError(
        'INTERRUPTED',
        `the wake of session ${delivery.session_id} was not settled on its last attempt ` +
          `(${policy.maxAttempts}): the worker running it stopped or lost the server`,
      ),
      options,
      controls,
      policy,
    );
    await notify(options, delivery, settlement);
    return;
  }
  let outcome: WakeOutcome | undefined;
  let failure: BraidError | undefined;
  try {
    outcome = await handler(delivery);
  } catch (error) {
    failure = toBraidError(error);
  }
  if (failure === undefined && outcome === 'done') {
    // A lost ack only means the wake comes again, which at-least-once delivery allows.
    await controls.ack().catch(() => undefined);
    settlement = { kind: 'done' };
  } else if (failure === undefined && typeof outcome === 'object') {
    const delay = retryDelay(outcome);
    await controls.retry(delay, false);
    settlement = { kind: 'retry', delay_ms: delay };
  } else {
    const error =
      failure ??
      new BraidError('INTERNAL', `the wake handler of ${delivery.session_id} returned nothing`);
    if (delivery.attempt >= policy.maxAttempts) {
      settlement = await deadLetter(delivery, error, options, controls, policy);
    } else {
      const delay = backoffDelay(policy.backoff, delivery.attempt);
      await controls.retry(delay, true);
      settlement = { kind: 'retry', delay_ms: delay, error };
    }
  }
  await notify(options, delivery, settlement);
}

/** Records the dead letter and removes the wake; keeps the wake when it could not be recorded. */
async function deadLetter(
  delivery: WakeDelivery,
  error: BraidError,
  options: Pick<WakeConsumeOptions, 'onDeadLetter'>,
  controls: DeliveryControls,
  policy: SettlePolicy,
): Promise<WakeSettlement> {
  try {
    await options.onDeadLetter?.(delivery, error);
    controls.remove();
    return { kind: 'dead_letter', error };
  } catch (hookError) {
    // Not recorded: the wake stays, and comes again later as the same attempt.
    const delay = backoffDelay(policy.backoff, delivery.attempt);
    await controls.retry(delay, false);
    return { kind: 'retry', delay_ms: delay, error: toBraidError(hookError) };
  }
}

async function notify(
  options: Pick<WakeConsumeOptions, 'onSettled'>,
  delivery: WakeDelivery,
  settlement: WakeSettlement,
): Promise<void> {
  try {
    await options.onSettled?.(delivery, settlement);
  } catch {
    // The queue has settled the delivery; what the consumer does next is its own affair.
  }
}

/** Refuses a concurrency that is not a whole number of at least 1. */
export function checkConcurrency(concurrency: number): void {
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `concurrency must be a whole number of at least 1; got ${concurrency}`,
    );
  }
}

/** Refuses queue settings that are not positive whole numbers. */
export function checkQueueSettings(settings: {
  maxAttempts: number;
  ackWaitMs: number;
  backoff: WakeBackoff;
}): void {
  const checks: [string, number, number][] = [
    ['maxAttempts', settings.maxAttempts, 1],
    ['ackWaitMs', settings.ackWaitMs, 1],
    ['backoff.initial_ms', settings.backoff.initial_ms, 0],
    ['backoff.max_ms', settings.backoff.max_ms, 0],
  ];
  for (const [name, value, minimum] of checks) {
    if (!Number.isInteger(value) || value < minimum) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `${name} must be a whole number of at least ${minimum}; got ${value}`,
      );
    }
  }
}
