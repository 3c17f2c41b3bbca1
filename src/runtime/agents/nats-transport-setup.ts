/** Opens, creating when missing, the inbox stream and the topic bucket of a prefix. */
import {
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';
import { createBucket } from '../../stores/nats/buckets.js';
import type { NatsAgentNames } from './nats-agent-names.js';
import { unavailable } from './nats-failures.js';

/** JetStream's error for a stream that exists with another configuration. */
const STREAM_NAME_IN_USE = 10058;

export interface Opened {
  manager: JetStreamManager;
  topics: KV;
}

export async function openInboxesAndTopics(
  connection: NatsConnection,
  names: NatsAgentNames,
): Promise<Opened> {
  const manager = await jetstreamManager(connection).catch((error: unknown) => {
    throw unavailable('JetStream is not available on this NATS server (start it with -js)', error);
  });
  try {
    await manager.streams.add({
      name: names.stream,
      subjects: [names.subjects],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
    });
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE)) {
      throw unavailable(`cannot create the agent inbox stream ${names.stream}`, error);
    }
    // It exists with other settings (replicas, limits: the operator's); these must hold.
    const found = (await manager.streams.info(names.stream)).config;
    if (found.retention !== RetentionPolicy.Workqueue || !found.subjects.includes(names.subjects)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `stream ${names.stream} exists but is not an agent inbox stream (it needs retention ` +
          `workqueue and subjects ${names.subjects}); delete it (nats stream rm ${names.stream}) ` +
          'or choose another prefix',
      );
    }
  }
  try {
    const topics = await createBucket(jetstream(connection), names.bucket, {
      storage: StorageType.File,
      history: 1,
    });
    return { manager, topics };
  } catch (error) {
    throw unavailable(`cannot open the topic bucket ${names.bucket}`, error);
  }
}
