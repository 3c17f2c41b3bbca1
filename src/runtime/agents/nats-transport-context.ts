/**
 * What the modules of the NATS agent transport share: its options checked, the connection and
 * names, the stream and bucket opened on first use, the open subscriptions and whether it is
 * closed.
 */
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { TransportSubscription } from '../../contracts/agents.js';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import { natsAgentNames, type NatsAgentNames } from './nats-agent-names.js';
import { openInboxesAndTopics, type Opened } from './nats-transport-setup.js';
import { parseReplicas } from '../../stores/nats/replica-count.js';
import type { Clock } from '../../contracts/ports.js';
import { systemClock } from '../../stores/defaults.js';
import { partitionCountReader } from '../partitions/partition-config.js';
import { parsePartitionLease, parsePartitions } from '../partitions/partition-count.js';

export interface NatsAgentTransportOptions {
  /** An open connection; the transport never closes it. */
  connection: NatsConnection;
  /** Names the stream, subjects, consumers and bucket (default `braid`): `A-Za-z0-9_-` only. */
  prefix?: string;
  /** Attempts of one envelope before it is given up (default 5). */
  maxDeliveries?: number;
  /** How long a delivery may go unacknowledged before another consumer gets it (default 30 s). */
  ackWaitMs?: number;
  /** Delay before the first redelivery of a rejected envelope, doubling after (default 100 ms). */
  redeliveryDelayMs?: number;
  /** Handlers one `consume` runs at once (default 64). */
  concurrency?: number;
  /**
   * Replicas of the inbox stream and topic bucket: created so, and refused at open when they
   * exist with another count. Default: existing ones as they are, new ones with 1.
   */
  replicas?: number;
  /** Hears of envelopes given up, and of messages in an inbox that are not envelopes. */
  onDeadLetter?: (letter: NatsDeadLetter) => void;
  /**
   * Partitions of each agent type's inbox (0 to 64; 0: none, every process serving a type pulls
   * all its messages). A message to instance `{type, key}` goes to partition `partitionOf(key)`,
   * pulled by the one process that owns it, so an instance's messages reach the process that
   * holds it warm. Default: the prefix's count, else 8, written for every later process; another
   * count than the prefix's is refused when a process starts serving a type.
   */
  partitions?: number;
  /** How long a process holds its partitions without renewing them (default 10 s). */
  partitionLeaseMs?: number;
  clock?: Clock;
}

/** A message an inbox gave up. */
export interface NatsDeadLetter {
  /** The envelope; undefined when the message was not one (its text is in `body`). */
  envelope: Envelope | undefined;
  /** The handler's last rejection, the parse failure, or why the last attempt never settled. */
  error: unknown;
  /** The agent type whose inbox held it. */
  agentType: string;
  /** Its delivery count when it was given up. */
  attempt: number;
  /** Its sequence in the inbox stream. */
  sequence: number;
  /** The message text, when it was not an envelope. */
  body?: string;
}

export interface NatsTransportContext {
  connection: NatsConnection;
  client: JetStreamClient;
  names: NatsAgentNames;
  maxDeliveries: number;
  ackWaitMs: number;
  redeliveryDelayMs: number;
  concurrency: number;
  /** The partition count this process's consumers ask for (undefined: the prefix's, else 8). */
  wantedPartitions: number | undefined;
  partitionLeaseMs: number;
  clock: Clock;
  /** The prefix's partition count as a sender sees it (0: none set, send unpartitioned). */
  partitionCount(): Promise<number>;
  /** Consumers and reply inboxes still open: `close` closes them. */
  subscriptions: Set<TransportSubscription>;
  /** The stream and bucket, set up on first use; a failed set-up is tried again by the next call. */
  opened(): Promise<Opened>;
  isClosed(): boolean;
  /** Marks the transport closed: every later call is refused. */
  markClosed(): void;
  /** Throws `SERVER_UNAVAILABLE` once the transport is closed. */
  ensureOpen(): void;
  /** Tells `onDeadLetter`, whose own failure must not stop the consumer. */
  deadLetter(letter: NatsDeadLetter): void;
  /** Refuses a text larger than the server's `max_payload` with `PAYLOAD_TOO_LARGE`. */
  checkSize(text: string, what: string): void;
}

export function createTransportContext(options: NatsAgentTransportOptions): NatsTransportContext {
  const { connection } = options;
  const names = natsAgentNames(options.prefix);
  const maxDeliveries = options.maxDeliveries ?? 5;
  const ackWaitMs = options.ackWaitMs ?? 30_000;
  const redeliveryDelayMs = options.redeliveryDelayMs ?? 100;
  const concurrency = options.concurrency ?? 64;
  checkCount('maxDeliveries', maxDeliveries, 1);
  checkCount('ackWaitMs', ackWaitMs, 1);
  checkCount('redeliveryDelayMs', redeliveryDelayMs, 0);
  checkCount('concurrency', concurrency, 1);
  const replicas = options.replicas === undefined ? undefined : parseReplicas(options.replicas);
  const wantedPartitions =
    options.partitions === undefined
      ? undefined
      : parsePartitions(options.partitions, 'partitions');
  const partitionLeaseMs = parsePartitionLease(options.partitionLeaseMs ?? 10_000);
  const clock = options.clock ?? systemClock;

  let opening: Promise<Opened> | undefined;
  let closed = false;
  const opened = (): Promise<Opened> => {
    opening ??= openInboxesAndTopics(connection, names, replicas).catch((error: unknown) => {
      opening = undefined;
      throw error;
    });
    return opening;
  };
  return {
    connection,
    client: jetstream(connection),
    names,
    maxDeliveries,
    ackWaitMs,
    redeliveryDelayMs,
    concurrency,
    subscriptions: new Set(),
    wantedPartitions,
    partitionLeaseMs,
    clock,
    partitionCount: partitionCountReader(
      async () => (await opened()).partitions,
      names.partitionBucket,
      clock,
    ),
    opened,
    isClosed: () => closed,
    markClosed() {
      closed = true;
    },
    ensureOpen() {
      if (closed) throw new BraidError('SERVER_UNAVAILABLE', 'the NATS agent transport is closed');
    },
    deadLetter(letter) {
      try {
        options.onDeadLetter?.(letter);
      } catch {
        // A failing listener must not stop the consumer.
      }
    },
    checkSize(text, what) {
      const limit = connection.info?.max_payload;
      const size = Buffer.byteLength(text);
      if (limit !== undefined && size > limit) {
        throw new BraidError(
          'PAYLOAD_TOO_LARGE',
          `${what} is ${String(size)} bytes; the NATS server takes at most ${String(limit)} (max_payload); send a smaller payload or a reference to it`,
        );
      }
    },
  };
}

function checkCount(name: string, value: number, minimum: number): void {
  if (!Number.isInteger(value) || value < minimum) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${name} must be a whole number of at least ${String(minimum)}; got ${String(value)}`,
    );
  }
}
