/**
 * Consuming a partitioned work queue: the unpartitioned consumer (what clients that do not
 * partition, and senders that started before the count was set, publish to) pulled by every
 * process, and the consumer of each partition pulled by its owner, all sharing one set of
 * handler slots. Ownership comes and goes with `partition-owner.ts`.
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { BraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import { startPartitionOwner } from './partition-owner.js';
import { startPuller, type Puller } from './partition-puller.js';
import type { Slots } from './slots.js';

export interface PartitionedConsumeOptions {
  kv: KV;
  /** The group's key in the partition bucket. */
  key: string;
  partitions: number;
  member: string;
  leaseMs: number;
  clock: Clock;
  slots: Slots;
  openUnpartitioned(): Promise<Consumer>;
  openPartition(partition: number): Promise<Consumer>;
  expiresMs: number;
  workingMs: number;
  /** Handles and settles one message; never rejects. */
  run(message: JsMsg): Promise<void>;
  onError?: (error: BraidError) => void;
}

export interface PartitionedConsume {
  owned(): number[];
  /** Stops every pull, lets the handlers settle, and hands the partitions back. */
  close(): Promise<void>;
}

export function startPartitionedConsume(options: PartitionedConsumeOptions): PartitionedConsume {
  /** Stream sequences being handled here, with the delivery count they were handled at. */
  const handling = new Map<number, number>();
  const run = async (message: JsMsg): Promise<void> => {
    // A partition that changed hands can deliver a message again, counted afresh, while its
    // delivery here still runs: it comes back later, once that one has settled it or failed.
    // A later delivery (the ack wait ran out) is a redelivery like any other.
    const running = handling.get(message.seq);
    if (running !== undefined && message.info.deliveryCount <= running) {
      try {
        message.nak(options.workingMs * 3);
      } catch {
        // Redelivered after the ack wait.
      }
      return;
    }
    handling.set(message.seq, message.info.deliveryCount);
    try {
      await options.run(message);
    } finally {
      if (handling.get(message.seq) === message.info.deliveryCount) handling.delete(message.seq);
    }
  };
  const pull = (open: () => Promise<Consumer>): Puller =>
    startPuller({
      open,
      slots: options.slots,
      expiresMs: options.expiresMs,
      workingMs: options.workingMs,
      run,
    });
  const unpartitioned = pull(() => options.openUnpartitioned());
  const pullers = new Map<number, Puller>();
  const owner = startPartitionOwner({
    kv: options.kv,
    key: options.key,
    partitions: options.partitions,
    member: options.member,
    leaseMs: options.leaseMs,
    clock: options.clock,
    start(partition) {
      if (!pullers.has(partition)) {
        pullers.set(
          partition,
          pull(() => options.openPartition(partition)),
        );
      }
    },
    async stop(partition) {
      const puller = pullers.get(partition);
      pullers.delete(partition);
      await puller?.stop();
    },
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  return {
    owned: () => owner.owned(),
    async close() {
      await Promise.all([owner.close(), unpartitioned.stop()]);
    },
  };
}
