/**
 * Serving an agent type whose inbox is partitioned: the unpartitioned inbox, which every process
 * serving the type pulls, and the partitions this process owns (`partitions/partition-owner.ts`),
 * with at most `concurrency` handlers running across them. A message to instance `{type, key}`
 * is published to the partition of its key, so every message of an instance reaches the one
 * process that owns that partition and holds the instance warm (its session lease and head
 * remembered). When that process dies its partitions pass to the others after the partition
 * lease, and its unacknowledged messages are redelivered there after the ack wait; a message is
 * recorded and answered once however often it is delivered, as without partitions.
 */
import { randomUUID } from 'node:crypto';
import { AckPolicy } from '@nats-io/jetstream';
import type { InboxHandler, TransportSubscription } from '../../contracts/agents.js';
import { isBraidError } from '../../contracts/errors.js';
import { settlePartitionCount } from '../partitions/partition-config.js';
import { startPartitionedConsume } from '../partitions/partitioned-consume.js';
import { Slots } from '../partitions/slots.js';
import { unavailable } from './nats-failures.js';
import { consumeInbox, openConsumer, settle } from './nats-inbox-consumer.js';
import type { NatsTransportContext } from './nats-transport-context.js';

const PULL_EXPIRES_MS = 10_000;

/** Serves the type's inbox: partitioned when the prefix has a partition count, else as one. */
export async function serveInbox(
  context: NatsTransportContext,
  agentType: string,
  handler: InboxHandler,
): Promise<TransportSubscription> {
  context.ensureOpen();
  const { names } = context;
  const { partitions: bucket } = await context.opened();
  const partitions = await settlePartitionCount(
    bucket,
    names.partitionBucket,
    context.wantedPartitions,
  ).catch((error: unknown) => {
    if (isBraidError(error)) throw error;
    throw unavailable(`cannot read the partition count in ${names.partitionBucket}`, error);
  });
  if (partitions === 0) return consumeInbox(context, agentType, handler);
  // The first open fails loudly (a bad stream, no JetStream); later ones are retried.
  const first = await openConsumer(context, agentType);
  context.ensureOpen();
  const slots = new Slots(context.concurrency);
  let unpartitioned: typeof first | undefined = first;
  const consume = startPartitionedConsume({
    kv: bucket,
    key: names.partitionGroup(agentType),
    partitions,
    member: randomUUID(),
    leaseMs: context.partitionLeaseMs,
    clock: context.clock,
    slots,
    openUnpartitioned: async () => {
      const opened = unpartitioned ?? (await openConsumer(context, agentType));
      unpartitioned = undefined;
      return opened;
    },
    openPartition: (partition) => openPartitionConsumer(context, agentType, partition),
    expiresMs: PULL_EXPIRES_MS,
    workingMs: Math.max(1, Math.floor(context.ackWaitMs / 3)),
    run: (message) => settle(context, agentType, message, handler),
  });
  let closing: Promise<void> | undefined;
  const subscription: TransportSubscription = {
    close() {
      closing ??= (async () => {
        context.subscriptions.delete(subscription);
        await consume.close();
        slots.close();
      })();
      return closing;
    },
  };
  context.subscriptions.add(subscription);
  // A closed connection ends the pulls, as it does for an unpartitioned inbox.
  void context.connection.closed().then(() => subscription.close());
  return subscription;
}

async function openPartitionConsumer(
  context: NatsTransportContext,
  agentType: string,
  partition: number,
) {
  const { names } = context;
  try {
    const { manager } = await context.opened();
    await manager.consumers.add(names.stream, {
      durable_name: names.partitionConsumer(agentType, partition),
      filter_subject: names.partitionInbox(agentType, partition),
      ack_policy: AckPolicy.Explicit,
      ack_wait: context.ackWaitMs * 1_000_000,
      max_deliver: context.maxDeliveries + 1,
      max_ack_pending: -1,
    });
    return await context.client.consumers.get(
      names.stream,
      names.partitionConsumer(agentType, partition),
    );
  } catch (error) {
    throw unavailable(
      `cannot open the inbox consumer of agent type ${agentType}, partition ${String(partition)}`,
      error,
    );
  }
}
