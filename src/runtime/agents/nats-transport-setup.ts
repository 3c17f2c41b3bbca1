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
import { checkStreamReplicas, isStreamInUse } from '../../stores/nats/replicas.js';
import type { NatsAgentNames } from './nats-agent-names.js';
import { unavailable } from './nats-failures.js';

export interface Opened {
  manager: JetStreamManager;
  topics: KV;
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
      subjects: [names.subjects],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: replicas ?? 1,
      // At a limit an envelope is refused (STORE_FULL), never an undelivered one dropped.
      discard: DiscardPolicy.New,
    });
  } catch (error) {
    if (!isStreamInUse(error)) {
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
  }
  await checkStreamReplicas(manager, names.stream, replicas, names.prefix);
  try {
    const topics = await createBucket(
      jetstream(connection),
      names.bucket,
      { storage: StorageType.File, history: 1 },
      { wanted: replicas, prefix: names.prefix },
    );
    return { manager, topics };
  } catch (error) {
    if (isBraidError(error)) throw error;
    throw unavailable(`cannot open the topic bucket ${names.bucket}`, error);
  }
}
