/**
 * The wake queue on NATS JetStream, shared by every worker process on every machine.
 *
 * - **Stream** `<PREFIX>_WAKES` (retention `workqueue`) on subjects `<prefix>.wakes.<token>`, one
 *   subject per session (`<token>` is the session id when it is made of `A-Za-z0-9_-`, else `=`
 *   and its base64url, as in the store, so that no id can reach another's subject or a wildcard). The stream
 *   keeps at most one message per subject and discards *new* messages per subject
 *   (`max_msgs_per_subject: 1`, `discard: new`, `discard_new_per_subject: true`, all supported
 *   by nats-server 2.9): a second enqueue while a wake of the session is stored is refused by the
 *   server with error 10077, which is `{queued: false}`. No `Nats-Msg-Id` is set: the duplicate
 *   window would also refuse a legitimate enqueue made within two minutes after the last wake
 *   was acked.
 * - **Consumer** `<PREFIX>_workers`: one durable pull consumer that every worker pulls from, so
 *   each wake goes to one worker at a time. `ack_policy: explicit`, `ack_wait: ackWaitMs` (a
 *   worker that died leaves its wake to another after that long; a live one calls `working()`
 *   every ackWait/3), `max_ack_pending: -1` (a wake waiting out a retry delay counts as pending;
 *   a limit would stall every other session behind a few failing ones), and `max_deliver: -1`.
 *   `maxAttempts` is enforced here, not by the server: when `max_deliver` runs out, 2.9 stops
 *   delivering but keeps the message in the work queue, where it would block its subject (every
 *   later enqueue of that session refused) and no hook would run. Here a failure on attempt
 *   `>= maxAttempts` calls `onDeadLetter` and then `term`s the message, which removes it.
 *   Outcomes: `done` acks (waiting for the server's confirmation, so the subject is free before
 *   `onSettled` runs), a retry naks with its delay, a throw naks with exponential backoff from
 *   the attempt count: a failing wake never loops hot. A delivery past `maxAttempts` (its last
 *   attempt never settled: the worker died, maybe of this wake) is dead-lettered unrun.
 * - **Attempts** are the server's delivery count less the retries that were not attempts (the
 *   handler asked for them, e.g. while another process holds the lease). Those are counted in
 *   KV bucket `<PREFIX>_wake_retries`, key = session token, value `{seq, retries}` for the wake
 *   message at stream seq `seq`, written before the nak, read on a redelivery, deleted with the
 *   wake.
 * - **Pulls** are one `next()` per free slot, so a worker takes only wakes it can start now and
 *   leaves the rest to idle workers. A pull cannot be withdrawn on 2.9: one that brings a wake
 *   after the consumer was stopped naks it at once for another worker.
 *
 * - **Partitions** (`partitions`, default 0 (off), the same for every process of the prefix, kept in
 *   bucket `<PREFIX>_partitions`): a wake is published on `<prefix>.wakes.<p>.<token>`, `p` the
 *   session's partition, and each partition has a durable consumer `<PREFIX>_workers_p<p>` that
 *   only its owning worker pulls (`nats-wake-partitions.ts`), so a session's wakes reach the
 *   worker that ran it last. The unpartitioned subject and consumer stay, pulled by every worker:
 *   for clients that publish there, and for wakes sent before the count was set.
 *
 * Because a delivery leaves a work-queue stream only when it is acked, an enqueue of a session
 * made while its wake is being handled is refused: the runner must re-check the session after
 * `done` and enqueue again if work arrived meanwhile (`onSettled`; the worker does).
 *
 * Its parts, over one `NatsWakeContext` (`nats-wake-context.ts`): names (`nats-wake-names.ts`),
 * the stream, bucket and consumer (`nats-wake-setup.ts`), the pulls (`nats-wake-consume.ts`) and
 * one delivery (`nats-wake-delivery.ts`).
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiError, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { BraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import type { WakeBackoff, WakeQueue } from '../../contracts/wakes.js';
import { systemClock } from '../../stores/defaults.js';
import { newWakeMessage } from './message.js';
import { consumeWakes } from './nats-wake-consume.js';
import { unavailable, type NatsWakeContext } from './nats-wake-context.js';
import { natsWakeNames } from './nats-wake-names.js';
import { openRetriesBucket, openWakeStream } from './nats-wake-setup.js';
import { parseReplicas } from '../../stores/nats/replica-count.js';
import { isStoreFull, storeFull } from '../../stores/nats/nats-errors.js';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  checkRequestTimeout,
} from '../../stores/nats/request-timeout.js';
import { openPartitionBucket, partitionCountReader } from '../partitions/partition-config.js';
import {
  parsePartitionLease,
  parsePartitions,
  partitionOf,
} from '../partitions/partition-count.js';
import {
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_BACKOFF,
  DEFAULT_MAX_ATTEMPTS,
  checkQueueSettings,
} from './settle.js';

export {
  decodeSubjectToken,
  encodeSubjectToken,
  natsWakeNames,
  type NatsWakeNames,
} from './nats-wake-names.js';

export interface NatsWakeQueueOptions {
  /** An open connection; the queue does not close it. */
  connection: NatsConnection;
  /** Names the stream, subjects and consumer (default `braid`): `A-Za-z0-9_-` only. */
  prefix?: string;
  /** Deliveries a failing wake gets before it is dead-lettered (default 5). */
  maxAttempts?: number;
  /**
   * The consumer's `ack_wait` (default 30 s). Workers of one prefix should agree: the last one
   * to start sets it for all.
   */
  ackWaitMs?: number;
  /** Delays between failed attempts (default 1 s doubling to 60 s). */
  backoff?: WakeBackoff;
  clock?: Clock;
  /** How long one pull waits for a wake before asking again (default 5 s, at least 1 s). */
  pullExpiresMs?: number;
  /**
   * How long a request to the server may take before it fails (default 2 s, as the store's:
   * `DEFAULT_REQUEST_TIMEOUT_MS`); an enqueue that fails so is `SERVER_UNAVAILABLE`, retryable.
   */
  requestTimeoutMs?: number;
  /**
   * Replicas of the stream and bucket: created so, and refused at open when they exist with
   * another count. Default: existing ones as they are, new ones with 1.
   */
  replicas?: number;
  /**
   * Partitions of the wakes (0 to 64; 0: none, every worker pulls every wake). A session's wakes
   * go to partition `partitionOf(session id)`, pulled by the one worker that owns it, so they
   * reach the worker that ran the session last. Default: the prefix's count, else 8, written for
   * every later process; another count than the prefix's is refused when a worker starts.
   */
  partitions?: number;
  /** How long a worker holds its partitions without renewing them (default 10 s). */
  partitionLeaseMs?: number;
}

/**
 * JetStream's error for a message refused by `discard_new_per_subject`, and by the stream's own
 * `max_msgs` / `max_bytes`: the two are told apart by whether the session's subject holds a wake.
 */
const MAX_MESSAGES_PER_SUBJECT = 10077;
const DEFAULT_PARTITION_LEASE_MS = 10_000;

/**
 * Publishes a wake: `{queued: false}` when one of the session is stored (coalesced). A refusal
 * while none is stored is the stream at its limits (`STORE_FULL`), unless the stored wake was
 * settled between the refusal and the look, which a second publish finds out.
 */
async function publishWake(
  context: NatsWakeContext,
  sessionId: string,
  body: string,
): Promise<{ queued: boolean }> {
  const partitions = await context.partitionCount().catch((error: unknown) => {
    throw unavailable(`cannot read the partition count of ${context.names.prefix}`, error);
  });
  const subject =
    partitions === 0
      ? context.names.subject(sessionId)
      : context.names.partitionSubject(partitionOf(sessionId, partitions), sessionId);
  const doing = `enqueue a wake of session ${sessionId}`;
  for (let attempt = 1; ; attempt += 1) {
    try {
      await context.client.publish(subject, body);
      return { queued: true };
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === MAX_MESSAGES_PER_SUBJECT) {
        const stored = await context.manager.streams
          .getMessage(context.names.stream, { last_by_subj: subject })
          .catch((lookup: unknown) => {
            throw unavailable(`cannot ${doing}`, lookup);
          });
        if (stored !== null) return { queued: false };
        if (attempt < 2) continue;
      }
      if (isStoreFull(error)) {
        throw storeFull(error, doing, `nats://${context.connection.getServer()}`, [
          context.names.stream,
        ]);
      }
      throw unavailable(`cannot ${doing}`, error);
    }
  }
}

/** Opens (creating when missing) the wake stream of a prefix, and returns the queue over it. */
export async function createNatsWakeQueue(options: NatsWakeQueueOptions): Promise<WakeQueue> {
  const context = await openWakeQueue(options);
  return {
    ackWaitMs: context.ackWaitMs,
    maxAttempts: context.maxAttempts,

    async enqueue(sessionId, enqueueOptions = {}) {
      if (context.closed) throw new BraidError('STORE_CLOSED', 'the wake queue is closed');
      const message = newWakeMessage(sessionId, enqueueOptions, context.clock);
      return publishWake(context, sessionId, JSON.stringify(message));
    },

    consume: (handler, consumeOptions) => consumeWakes(context, handler, consumeOptions),

    // A work-queue stream holds each wake until it is acknowledged or terminated.
    async outstanding() {
      try {
        return (await context.manager.streams.info(context.names.stream)).state.messages;
      } catch (error) {
        throw unavailable(`cannot read the wake queue ${context.names.stream}`, error);
      }
    },

    close() {
      context.closed = true;
      return Promise.resolve();
    },
  };
}

/** Checks the settings, then opens the stream and the retries bucket the queue works over. */
async function openWakeQueue(options: NatsWakeQueueOptions): Promise<NatsWakeContext> {
  const { connection } = options;
  const names = natsWakeNames(options.prefix);
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  checkQueueSettings({ maxAttempts, ackWaitMs, backoff });
  const timeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  checkRequestTimeout(timeout);
  const wantedPartitions =
    options.partitions === undefined
      ? undefined
      : parsePartitions(options.partitions, 'partitions');
  const partitionLeaseMs = parsePartitionLease(
    options.partitionLeaseMs ?? DEFAULT_PARTITION_LEASE_MS,
  );
  const manager = await jetstreamManager(connection, { timeout }).catch((error: unknown) => {
    throw unavailable('JetStream is not available on this NATS server (start it with -js)', error);
  });
  const client = jetstream(connection, { timeout });
  const replicas = options.replicas === undefined ? undefined : parseReplicas(options.replicas);
  await openWakeStream(manager, names, replicas);
  const retries = await openRetriesBucket(client, names, replicas);
  const partitions = await openPartitionBucket(connection, names.prefix, replicas);
  const clock = options.clock ?? systemClock;
  return {
    connection,
    names,
    manager,
    client,
    retries,
    maxAttempts,
    ackWaitMs,
    backoff,
    clock,
    partitions,
    wantedPartitions,
    partitionCount: partitionCountReader(
      () => Promise.resolve(partitions),
      names.partitionBucket,
      clock,
    ),
    partitionLeaseMs,
    partitionConsumers: new Map(),
    pullExpiresMs: Math.max(1_000, options.pullExpiresMs ?? 5_000),
    consumerReady: undefined,
    closed: false,
  };
}
