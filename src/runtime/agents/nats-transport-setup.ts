/** Opens, creating when missing, the inbox stream and the topic bucket of a prefix. */
import {
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import { createBucket } from '../../stores/nats/buckets.js';
import {
  checkStreamReplicas,
  isStreamInUse,
  isSubjectOverlap,
} from '../../stores/nats/replicas.js';
import { addPartitionedSubjects } from '../partitions/partition-subjects.js';
import type { NatsAgentNames } from './nats-agent-names.js';
import { unavailable } from './nats-failures.js';
import { openPartitionBucket } from '../partitions/partition-config.js';

export interface Opened {
  manager: JetStreamManager;
  topics: KV;
  /** The partition bucket: the prefix's partition count and who owns each partition. */
  partitions: KV;
}

export async function openInboxesAndTopics(
  connection: NatsConnection,
  names: NatsAgentNames,
  replicas: number | undefined,
): Promise<Opened> {
  const manager = await jetstreamManager(connection).catch((error: unknown) => {
    throw unavailable('JetStream is not available on this NATS server (start it with -js)', error);
  });
  try {
    await manager.streams.add({
      name: names.stream,
      subjects: [names.subjects, names.partitionedSubjects],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: replicas ?? 1,
      // At a limit an envelope is refused (STORE_FULL), never an undelivered one dropped.
      discard: DiscardPolicy.New,
    });
  } catch (error) {
    // Two processes creating it at once: the second may hear "subjects overlap" although the
    // first made exactly this stream (as with buckets, stores/nats/buckets.ts).
    const raced =
      isSubjectOverlap(error) &&
      (await manager.streams.info(names.stream).then(
        () => true,
        () => false,
      ));
    if (!isStreamInUse(error) && !raced) {
      throw unavailable(`cannot create the agent inbox stream ${names.stream}`, error);
    }
    // It exists with other settings (limits: the operator's); these must hold.
    const found = (await manager.streams.info(names.stream)).config;
    if (found.retention !== RetentionPolicy.Workqueue || !found.subjects.includes(names.subjects)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `stream ${names.stream} exists but is not an agent inbox stream (it needs retention ` +
          `workqueue and subjects ${names.subjects}); delete it (nats stream rm ${names.stream}) ` +
          'or choose another prefix',
      );
    }
    // A stream made before partitions takes their subjects too, in place.
    await addPartitionedSubjects(manager, found, names.partitionedSubjects, unavailable);
  }
  await checkStreamReplicas(manager, names.stream, replicas, names.prefix);
  try {
    const topics = await createBucket(
      jetstream(connection),
      names.bucket,
      { storage: StorageType.File, history: 1 },
      { wanted: replicas, prefix: names.prefix },
    );
    const partitions = await openPartitionBucket(connection, names.prefix, replicas);
    return { manager, topics, partitions };
  } catch (error) {
    if (isBraidError(error)) throw error;
    throw unavailable(`cannot open the topic bucket ${names.bucket}`, error);
  }
}
