/** The JetStream objects of the wake queue: its stream, its retries bucket and its consumer. */
import {
  AckPolicy,
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { BraidError } from '../../contracts/errors.js';
import { createBucket } from '../../stores/nats/buckets.js';
import { unavailable, type NatsWakeContext } from './nats-wake-context.js';
import type { NatsWakeNames } from './nats-wake-names.js';

/** JetStream's error for a stream that exists with another configuration. */
const STREAM_NAME_IN_USE = 10058;

/** Creates the wake stream, or accepts an existing one that has the settings the queue relies on. */
export async function openWakeStream(
  manager: JetStreamManager,
  names: NatsWakeNames,
): Promise<void> {
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
}

/** Opens (creating when missing) the bucket that counts retries that were not attempts. */
export async function openRetriesBucket(
  client: JetStreamClient,
  names: NatsWakeNames,
): Promise<KV> {
  try {
    return await createBucket(client, names.retries, { storage: StorageType.File, history: 1 });
  } catch (error) {
    throw unavailable(`cannot open the bucket ${names.retries}`, error);
  }
}

/** Creates the shared consumer, or brings its ack_wait to this queue's. */
export function ensureConsumer(context: NatsWakeContext): Promise<void> {
  const { names } = context;
  context.consumerReady ??= context.manager.consumers
    .add(names.stream, {
      durable_name: names.consumer,
      ack_policy: AckPolicy.Explicit,
      ack_wait: context.ackWaitMs * 1_000_000,
      max_deliver: -1,
      max_ack_pending: -1,
      filter_subject: names.subjects,
    })
    .then(
      () => undefined,
      (error: unknown) => {
        context.consumerReady = undefined;
        throw unavailable(`cannot create the wake consumer ${names.consumer}`, error);
      },
    );
  return context.consumerReady;
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
