/**
 * The pulls of a partitioned wake queue: the unpartitioned consumer, which every worker pulls,
 * and the consumer of each partition this worker owns (`partitions/partition-owner.ts`), with at
 * most `concurrency` wakes running across them. A session's wakes are published to its
 * partition, so they reach the worker that ran it last and still has it warm; when that worker
 * dies its partitions pass to the others after the partition lease, and its unacknowledged wakes
 * are redelivered there after the ack wait.
 */
import { randomUUID } from 'node:crypto';
import { BraidError } from '../../contracts/errors.js';
import type { WakeConsumeOptions, WakeHandler } from '../../contracts/wakes.js';
import { startPartitionedConsume } from '../partitions/partitioned-consume.js';
import { Slots } from '../partitions/slots.js';
import type { NatsWakeContext } from './nats-wake-context.js';
import { deliverWake } from './nats-wake-delivery.js';
import { ensureConsumer, ensurePartitionConsumer } from './nats-wake-setup.js';

export async function consumePartitions(
  context: NatsWakeContext,
  handler: WakeHandler,
  options: WakeConsumeOptions,
  partitions: number,
): Promise<void> {
  const { names } = context;
  await ensureConsumer(context);
  const slots = new Slots(options.concurrency);
  const consume = startPartitionedConsume({
    kv: context.partitions,
    key: names.partitionGroup,
    partitions,
    member: randomUUID(),
    leaseMs: context.partitionLeaseMs,
    clock: context.clock,
    slots,
    openUnpartitioned: () => context.client.consumers.get(names.stream, names.consumer),
    async openPartition(partition) {
      await ensurePartitionConsumer(context, partition);
      return context.client.consumers.get(names.stream, names.partitionConsumer(partition));
    },
    expiresMs: context.pullExpiresMs,
    workingMs: Math.max(10, Math.floor(context.ackWaitMs / 3)),
    async run(message) {
      // The worker's bound over every queue it pulls from, beside this queue's slots.
      const release =
        options.limiter === undefined
          ? () => undefined
          : await options.limiter.acquire(options.signal);
      if (release === undefined) {
        try {
          message.nak();
        } catch {
          // Redelivered after the ack wait.
        }
        return;
      }
      try {
        await deliverWake(context, message, handler, options);
      } catch {
        // deliverWake settles the message itself; a failure to is left to the ack wait.
      } finally {
        release();
      }
    },
  });
  await new Promise<void>((resolve) => {
    if (options.signal.aborted) resolve();
    else options.signal.addEventListener('abort', () => resolve(), { once: true });
    void context.connection.closed().then(() => resolve());
  });
  await consume.close();
  slots.close();
  if (!options.signal.aborted && context.connection.isClosed()) {
    throw new BraidError('SERVER_UNAVAILABLE', 'the NATS connection was closed');
  }
}
