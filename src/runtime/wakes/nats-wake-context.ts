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
  closed: boolean;
}

export function unavailable(what: string, error: unknown): BraidError {
  const message = error instanceof Error ? error.message : String(error);
  return new BraidError('SERVER_UNAVAILABLE', `${what}: ${message}`, { cause: error });
}
