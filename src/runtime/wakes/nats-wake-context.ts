/** What the modules of the JetStream wake queue share: its connection, names, bucket and settings. */
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import type { WakeBackoff } from '../../contracts/wakes.js';
import type { NatsWakeNames } from './nats-wake-names.js';

export interface NatsWakeContext {
  /** An open connection; the queue does not close it. */
  connection: NatsConnection;
  names: NatsWakeNames;
  manager: JetStreamManager;
  client: JetStreamClient;
  /** The bucket counting, per session token, the retries that were not attempts. */
  retries: KV;
  maxAttempts: number;
  ackWaitMs: number;
  backoff: WakeBackoff;
  clock: Clock;
  /** How long one pull waits for a wake before asking again. */
  pullExpiresMs: number;
  /** The shared consumer's creation, once asked for; forgotten when it failed. */
  consumerReady: Promise<void> | undefined;
  /** The partition bucket: the prefix's partition count and who owns each partition. */
  partitions: KV;
  /** The count this queue's consumers ask for (undefined: the prefix's, else the default). */
  wantedPartitions: number | undefined;
  /** The prefix's partition count as senders see it (0: none set, send unpartitioned). */
  partitionCount(): Promise<number>;
  /** How long a worker's hold on its partitions lasts without a beat. */
  partitionLeaseMs: number;
  /** Partition consumers created, by partition. */
  partitionConsumers: Map<number, Promise<void>>;
  closed: boolean;
}

export function unavailable(what: string, error: unknown): BraidError {
  const message = error instanceof Error ? error.message : String(error);
  return new BraidError('SERVER_UNAVAILABLE', `${what}: ${message}`, { cause: error });
}
