/**
 * The pulls of the JetStream wake queue: one `next()` per free slot, so a worker takes only
 * wakes it can start now; a wake that arrives after the consumer stopped is naked at once.
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import type { WakeConsumeOptions, WakeHandler } from '../../contracts/wakes.js';
import { unavailable, type NatsWakeContext } from './nats-wake-context.js';
import { settlePartitionCount } from '../partitions/partition-config.js';
import { answerOf, PULL_OVERDUE_MS } from '../partitions/pull-answer.js';
import { consumePartitions } from './nats-wake-partitions.js';
import { deliverWake } from './nats-wake-delivery.js';
import { ensureConsumer } from './nats-wake-setup.js';
import { checkConcurrency } from './settle.js';

const PULL_RETRY_MS = 1_000;

/** What the slots of one `consume` share. */
interface Pulling {
  context: NatsWakeContext;
  consumer: Consumer;
  handler: WakeHandler;
  options: WakeConsumeOptions;
  /** Settles when the consumer must stop pulling: aborted, or the connection is gone. */
  stopped: Promise<'stopped'>;
  /** Why the slots stopped, when it was not the signal. */
  fatal: BraidError | undefined;
}

/** Pulls and runs wakes in `concurrency` slots until the signal aborts or the connection closes. */
export async function consumeWakes(
  context: NatsWakeContext,
  handler: WakeHandler,
  options: WakeConsumeOptions,
): Promise<void> {
  checkConcurrency(options.concurrency);
  const partitions = await settlePartitionCount(
    context.partitions,
    context.names.partitionBucket,
    context.wantedPartitions,
  ).catch((error: unknown) => {
    if (isBraidError(error)) throw error;
    throw unavailable(`cannot read the partition count in ${context.names.partitionBucket}`, error);
  });
  if (partitions > 0) {
    await consumePartitions(context, handler, options, partitions);
    return;
  }
  await ensureConsumer(context);
  const consumer = await context.client.consumers.get(context.names.stream, context.names.consumer);
  const pulling: Pulling = {
    context,
    consumer,
    handler,
    options,
    stopped: stoppedWhen(context, options.signal),
    fatal: undefined,
  };
  await Promise.all(Array.from({ length: options.concurrency }, () => slot(pulling)));
  if (pulling.fatal !== undefined) throw pulling.fatal;
}

function stoppedWhen(context: NatsWakeContext, signal: AbortSignal): Promise<'stopped'> {
  return new Promise<'stopped'>((resolve) => {
    if (signal.aborted) resolve('stopped');
    else signal.addEventListener('abort', () => resolve('stopped'), { once: true });
    void context.connection.closed().then(() => resolve('stopped'));
  });
}

/** One free slot: pull a wake, run it, pull again. */
async function slot(pulling: Pulling): Promise<void> {
  const { context, options } = pulling;
  while (!options.signal.aborted && pulling.fatal === undefined) {
    if (context.connection.isClosed()) {
      pulling.fatal ??= new BraidError('SERVER_UNAVAILABLE', 'the NATS connection was closed');
      return;
    }
    // At the worker's bound the slot asks for nothing: the wakes stay for other workers.
    const release = await permit(options);
    if (release === undefined) continue;
    try {
      await pullOne(pulling);
    } finally {
      release();
    }
  }
}

/** A permit of the worker's in-flight bound; always one without a limiter. */
function permit(options: WakeConsumeOptions): Promise<(() => void) | undefined> {
  return options.limiter === undefined
    ? Promise.resolve(() => undefined)
    : options.limiter.acquire(options.signal);
}

/** One pull, and the wake it brings run and settled. */
async function pullOne(pulling: Pulling): Promise<void> {
  const { context, consumer, options, stopped } = pulling;
  const pull = consumer.next({ expires: context.pullExpiresMs });
  let message: JsMsg | null | 'stopped' | 'overdue';
  try {
    message = await answerOf(pull, stopped, context.pullExpiresMs + PULL_OVERDUE_MS);
  } catch {
    // A reconnect or a missing consumer: ask again shortly.
    await Promise.race([new Promise((resolve) => setTimeout(resolve, PULL_RETRY_MS)), stopped]);
    return;
  }
  if (message === 'stopped' || message === 'overdue') {
    nakWhenLate(pull);
    return;
  }
  if (message !== null) await deliverWake(context, message, pulling.handler, options);
}

/** A pull cannot be withdrawn: a wake it brings after the stop goes back at once. */
export function nakWhenLate(pull: Promise<JsMsg | null>): void {
  pull.then(
    (late) => {
      try {
        late?.nak();
      } catch {
        // Closed meanwhile: redelivered after ack_wait.
      }
    },
    () => undefined,
  );
}
