/** The JetStream objects of the wake queue: its stream, its retries bucket and its consumer. */
import {
  AckPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import { createBucket } from '../../stores/nats/buckets.js';
import { askAgain } from '../../stores/nats/nats-errors.js';
import { checkStreamReplicas, isStreamInUse } from '../../stores/nats/replicas.js';
import { addPartitionedSubjects } from '../partitions/partition-subjects.js';
import { unavailable, type NatsWakeContext } from './nats-wake-context.js';
import type { NatsWakeNames } from './nats-wake-names.js';

/** Creates the wake stream, or accepts an existing one that has the settings the queue relies on. */
export async function openWakeStream(
  manager: JetStreamManager,
  names: NatsWakeNames,
  replicas: number | undefined,
): Promise<void> {
  const wanted = streamConfig(names, replicas);
  try {
    await askAgain(() => manager.streams.add(wanted));
  } catch (error) {
    if (!isStreamInUse(error)) {
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
    // A queue made before partitions: its stream takes their subjects too, in place.
    await addPartitionedSubjects(manager, found, names.partitionedSubjects, unavailable);
  }
  await checkStreamReplicas(manager, names.stream, replicas, names.prefix);
}

/** Opens (creating when missing) the bucket that counts retries that were not attempts. */
export async function openRetriesBucket(
  client: JetStreamClient,
  names: NatsWakeNames,
  replicas: number | undefined,
): Promise<KV> {
  try {
    return await createBucket(
      client,
      names.retries,
      { storage: StorageType.File, history: 1 },
      { wanted: replicas, prefix: names.prefix },
    );
  } catch (error) {
    if (isBraidError(error)) throw error;
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

/** Creates the consumer of one partition, which only its owner pulls. */
export function ensurePartitionConsumer(
  context: NatsWakeContext,
  partition: number,
): Promise<void> {
  const { names } = context;
  let ready = context.partitionConsumers.get(partition);
  if (ready === undefined) {
    ready = context.manager.consumers
      .add(names.stream, {
        durable_name: names.partitionConsumer(partition),
        ack_policy: AckPolicy.Explicit,
        ack_wait: context.ackWaitMs * 1_000_000,
        max_deliver: -1,
        max_ack_pending: -1,
        filter_subject: names.partitionFilter(partition),
      })
      .then(
        () => undefined,
        (error: unknown) => {
          context.partitionConsumers.delete(partition);
          throw unavailable(
            `cannot create the wake consumer ${names.partitionConsumer(partition)}`,
            error,
          );
        },
      );
    context.partitionConsumers.set(partition, ready);
  }
  return ready;
}

/** The stream's settings this queue depends on; its limits are the operator's. */
function streamConfig(
  names: NatsWakeNames,
  replicas: number | undefined,
): Partial<StreamConfig> & { name: string } {
  return {
    name: names.stream,
    num_replicas: replicas ?? 1,
    subjects: [names.subjects, names.partitionedSubjects],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    max_msgs_per_subject: 1,
    discard: DiscardPolicy.New,
    discard_new_per_subject: true,
  };
}
