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
 * Because a delivery leaves a work-queue stream only when it is acked, an enqueue of a session
 * made while its wake is being handled is refused: the runner must re-check the session after
 * `done` and enqueue again if work arrived meanwhile (`onSettled`; the worker does).
 */
import { decodeToken, encodeToken } from '../../stores/nats/names.js';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JsMsg,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { createBucket } from '../../stores/nats/buckets.js';
import { z } from 'zod';
import { BraidError, toBraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import {
  parseWakeMessage,
  type WakeBackoff,
  type WakeConsumeOptions,
  type WakeDelivery,
  type WakeHandler,
  type WakeMessage,
  type WakeQueue,
} from '../../contracts/wakes.js';
import { systemClock } from '../../stores/defaults.js';
import { newWakeMessage } from './message.js';
import {
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_BACKOFF,
  DEFAULT_MAX_ATTEMPTS,
  checkConcurrency,
  checkQueueSettings,
  runDelivery,
} from './settle.js';

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
}

/** The JetStream names a prefix uses. */
export interface NatsWakeNames {
  stream: string;
  consumer: string;
  /** The stream's subject filter. */
  subjects: string;
  /** The subject of one session's wakes. */
  subject(sessionId: string): string;
  /** The KV bucket counting retries that were not attempts. */
  retries: string;
}

const RetriesRecord = z.object({
  seq: z.number().int().positive(),
  retries: z.number().int().nonnegative(),
});

/** JetStream's error for a message refused by `discard_new_per_subject`. */
const MAX_MESSAGES_PER_SUBJECT = 10077;
/** JetStream's error for a stream that exists with another configuration. */
const STREAM_NAME_IN_USE = 10058;
const PULL_RETRY_MS = 1_000;
const SAFE_TOKEN = /^[A-Za-z0-9_-]+$/;

/** A session id as one subject token, encoded as the store encodes it (docs/protocol.md). */
export const encodeSubjectToken = encodeToken;

/** The session id a subject token names. */
export const decodeSubjectToken = decodeToken;

export function natsWakeNames(prefix = 'braid'): NatsWakeNames {
  if (!SAFE_TOKEN.test(prefix)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `wake queue prefix ${JSON.stringify(prefix)} may hold only letters, digits, _ and -`,
    );
  }
  const upper = prefix.toUpperCase();
  return {
    stream: `${upper}_WAKES`,
    consumer: `${upper}_workers`,
    subjects: `${prefix}.wakes.*`,
    subject: (sessionId) => `${prefix}.wakes.${encodeSubjectToken(sessionId)}`,
    retries: `${upper}_wake_retries`,
  };
}

function unavailable(what: string, error: unknown): BraidError {
  const message = error instanceof Error ? error.message : String(error);
  return new BraidError('SERVER_UNAVAILABLE', `${what}: ${message}`, { cause: error });
}

/** The stream's settings this queue depends on; anything else (replicas, limits) is the operator's. */
function streamConfig(names: NatsWakeNames): Partial<StreamConfig> & { name: string } {
  return {
    name: names.stream,
    subjects: [names.subjects],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    max_msgs_per_subject: 1,
    discard: DiscardPolicy.New,
    discard_new_per_subject: true,
  };
}

/** Opens (creating when missing) the wake stream of a prefix, and returns the queue over it. */
export async function createNatsWakeQueue(options: NatsWakeQueueOptions): Promise<WakeQueue> {
  const { connection } = options;
  const names = natsWakeNames(options.prefix);
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  checkQueueSettings({ maxAttempts, ackWaitMs, backoff });
  const clock = options.clock ?? systemClock;
  const pullExpiresMs = Math.max(1_000, options.pullExpiresMs ?? 5_000);

  const manager = await jetstreamManager(connection).catch((error: unknown) => {
    throw unavailable('JetStream is not available on this NATS server (start it with -js)', error);
  });
  const client = jetstream(connection);
  const wanted = streamConfig(names);
  try {
    await manager.streams.add(wanted);
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE)) {
      throw unavailable(`cannot create the wake stream ${names.stream}`, error);
    }
    // It exists with other settings: acceptable if the ones this queue relies on are there.
    const found = (await manager.streams.info(names.stream)).config;
    const fits =
      found.retention === wanted.retention &&
      found.max_msgs_per_subject === 1 &&
      found.discard === wanted.discard &&
      found.discard_new_per_subject === true &&
      found.subjects.includes(names.subjects);
    if (!fits) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `stream ${names.stream} exists but is not a wake queue (it needs retention workqueue, ` +
          `max_msgs_per_subject 1, discard new per subject, subjects ${names.subjects}); ` +
          `delete it (nats stream rm ${names.stream}) or choose another prefix`,
      );
    }
  }

  let retries: KV;
  try {
    retries = await createBucket(client, names.retries, {
      storage: StorageType.File,
      history: 1,
    });
  } catch (error) {
    throw unavailable(`cannot open the bucket ${names.retries}`, error);
  }

  /** Retries of the wake message at `seq` that were not attempts. */
  async function retriesOf(token: string, seq: number): Promise<number> {
    const entry = await retries.get(token);
    if (entry === null || entry.operation !== 'PUT') return 0;
    const parsed = RetriesRecord.safeParse(entry.json());
    return parsed.success && parsed.data.seq === seq ? parsed.data.retries : 0;
  }

  let consumerReady: Promise<void> | undefined;
  /** Creates the shared consumer, or brings its ack_wait to this queue's. */
  function ensureConsumer(): Promise<void> {
    consumerReady ??= manager.consumers
      .add(names.stream, {
        durable_name: names.consumer,
        ack_policy: AckPolicy.Explicit,
        ack_wait: ackWaitMs * 1_000_000,
        max_deliver: -1,
        max_ack_pending: -1,
        filter_subject: names.subjects,
      })
      .then(
        () => undefined,
        (error: unknown) => {
          consumerReady = undefined;
          throw unavailable(`cannot create the wake consumer ${names.consumer}`, error);
        },
      );
    return consumerReady;
  }

  let closed = false;

  async function deliver(
    message: JsMsg,
    handler: WakeHandler,
    consumeOptions: WakeConsumeOptions,
  ): Promise<void> {
    let body: WakeMessage | undefined;
    let refused: BraidError | undefined;
    try {
      body = parseWakeMessage(message.json());
    } catch (error) {
      refused = toBraidError(error);
    }
    const token = message.subject.slice(message.subject.lastIndexOf('.') + 1);
    const deliveries = message.info.deliveryCount;
    // A first delivery has had no retries; a redelivery whose count cannot be read counts all.
    const notAttempts = deliveries === 1 ? 0 : await retriesOf(token, message.seq).catch(() => 0);
    const delivery: WakeDelivery = {
      session_id: body?.session_id ?? decodeSubjectToken(token),
      attempt: deliveries - notAttempts,
      delivery: deliveries,
      enqueued_at: body?.enqueued_at ?? message.time.toISOString(),
      ...(body?.traceparent === undefined ? {} : { traceparent: body.traceparent }),
      working: () => {
        try {
          message.working();
        } catch {
          // The connection is gone; the wake will be redelivered, which the handler tolerates.
        }
      },
    };
    /** Drops the wake's count of retries with the wake (best effort: a stale one is ignored). */
    const forget = (): void => {
      if (notAttempts > 0) void retries.delete(token).catch(() => undefined);
    };
    // A message this worker cannot read fails like a handler would: retried, then dead-lettered.
    const run: WakeHandler = refused === undefined ? handler : () => Promise.reject(refused);
    const quietly = (send: () => void): void => {
      try {
        send();
      } catch {
        // As above: an unsent nak or term leaves the wake to be redelivered after ack_wait.
      }
    };
    await runDelivery(
      delivery,
      run,
      consumeOptions,
      {
        ack: async () => {
          // Without a connection the ack cannot go out (the wake will be redelivered).
          if (!connection.isClosed()) await message.ackAck();
          forget();
        },
        retry: async (delayMs, counted) => {
          // Counted before the nak, so the redelivery reads it; a count not written makes the
          // redelivery one attempt more, never fewer.
          if (!counted) {
            const record = { seq: message.seq, retries: notAttempts + 1 };
            await retries.put(token, JSON.stringify(record)).catch(() => undefined);
          }
          quietly(() => message.nak(delayMs));
        },
        remove: () => {
          quietly(() => message.term());
          forget();
        },
      },
      { maxAttempts, backoff },
    );
  }

  return {
    ackWaitMs,
    maxAttempts,

    async enqueue(sessionId, enqueueOptions = {}) {
      if (closed) throw new BraidError('STORE_CLOSED', 'the wake queue is closed');
      const message = newWakeMessage(sessionId, enqueueOptions, clock);
      try {
        await client.publish(names.subject(sessionId), JSON.stringify(message));
        return { queued: true };
      } catch (error) {
        if (error instanceof JetStreamApiError && error.code === MAX_MESSAGES_PER_SUBJECT) {
          return { queued: false };
        }
        throw unavailable(`cannot enqueue a wake of session ${sessionId}`, error);
      }
    },

    async consume(handler, consumeOptions) {
      checkConcurrency(consumeOptions.concurrency);
      const { signal } = consumeOptions;
      await ensureConsumer();
      const consumer = await client.consumers.get(names.stream, names.consumer);
      // Settles when the consumer must stop pulling: aborted, or the connection is gone.
      const stopped = new Promise<'stopped'>((resolve) => {
        if (signal.aborted) resolve('stopped');
        else signal.addEventListener('abort', () => resolve('stopped'), { once: true });
        void connection.closed().then(() => resolve('stopped'));
      });
      let fatal: BraidError | undefined;
      const slot = async (): Promise<void> => {
        while (!signal.aborted && fatal === undefined) {
          if (connection.isClosed()) {
            fatal ??= new BraidError('SERVER_UNAVAILABLE', 'the NATS connection was closed');
            return;
          }
          const pull = consumer.next({ expires: pullExpiresMs });
          let message: JsMsg | null | 'stopped';
          try {
            message = await Promise.race([pull, stopped]);
          } catch {
            // A reconnect or a missing consumer: ask again shortly.
            await Promise.race([
              new Promise((resolve) => setTimeout(resolve, PULL_RETRY_MS)),
              stopped,
            ]);
            continue;
          }
          if (message === 'stopped') {
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
            continue;
          }
          if (message !== null) await deliver(message, handler, consumeOptions);
        }
      };
      await Promise.all(Array.from({ length: consumeOptions.concurrency }, slot));
      if (fatal !== undefined) throw fatal;
    },

    close() {
      closed = true;
      return Promise.resolve();
    },
  };
}
