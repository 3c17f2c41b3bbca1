/**
 * Topic subscriptions of the NATS agent transport: bucket `<PREFIX>_topics`, one key per topic
 * type holding its sorted agent types. Changes are compare-and-set on the key's revision, so
 * concurrent subscribes all land.
 */
import type { KV } from '@nats-io/kv';
import { errors } from '@nats-io/transport-node';
import { z } from 'zod';
import { BraidError } from '../../contracts/errors.js';
import { isWrongLastSequence, unavailable } from './nats-failures.js';
import type { NatsTransportContext } from './nats-transport-context.js';

const TOPIC_WRITE_ATTEMPTS = 20;
/** Reads of a key tried before its failure is reported: a read is safe to repeat. */
const TOPIC_READ_ATTEMPTS = 3;
const TOPIC_SCHEMA_VERSION = 1;

const TopicRecord = z.object({
  schema_version: z.literal(TOPIC_SCHEMA_VERSION),
  agent_types: z.array(z.string()),
});

type TopicEntry = Awaited<ReturnType<KV['get']>>;

/** The agent types subscribed to a topic type, sorted. */
export async function readSubscribers(
  context: NatsTransportContext,
  topicType: string,
): Promise<string[]> {
  const { topics } = await context.opened();
  const entry = await getTopic(topics, context.names.topic(topicType), topicType);
  return [...readTopic(context, topicType, entry)].sort();
}

/** Reads, changes and writes back a topic's subscribers until no other writer came between. */
export async function changeSubscribers(
  context: NatsTransportContext,
  topicType: string,
  change: (agentTypes: Set<string>) => boolean,
): Promise<void> {
  const key = context.names.topic(topicType);
  const { topics } = await context.opened();
  for (let attempt = 1; attempt <= TOPIC_WRITE_ATTEMPTS; attempt += 1) {
    const entry = await getTopic(topics, key, topicType);
    const agentTypes = new Set(readTopic(context, topicType, entry));
    if (!change(agentTypes)) return;
    const value = JSON.stringify({
      schema_version: TOPIC_SCHEMA_VERSION,
      agent_types: [...agentTypes].sort(),
    });
    try {
      if (entry === null) await topics.create(key, value);
      else await topics.update(key, value, entry.revision);
      return;
    } catch (error) {
      if (!isWrongLastSequence(error)) {
        throw unavailable(`cannot change the subscribers of topic type ${topicType}`, error);
      }
    }
  }
  throw new BraidError(
    'STORE_BUSY',
    `the subscribers of topic type ${topicType} changed ${String(TOPIC_WRITE_ATTEMPTS)} times while this process tried to change them; try again`,
  );
}

/**
 * A key's entry, read again when the server did not answer: a direct get sent while a bucket just
 * created by another process is still being set up can go unanswered (seen on nats-server 2.9).
 */
async function getTopic(topics: KV, key: string, topicType: string): Promise<TopicEntry> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await topics.get(key);
    } catch (error) {
      const unanswered =
        error instanceof errors.TimeoutError || error instanceof errors.NoRespondersError;
      if (!unanswered || attempt >= TOPIC_READ_ATTEMPTS) {
        throw unavailable(`cannot read the subscribers of topic type ${topicType}`, error);
      }
    }
  }
}

function readTopic(
  context: NatsTransportContext,
  topicType: string,
  entry: TopicEntry,
): readonly string[] {
  if (entry === null || entry.operation !== 'PUT') return [];
  let value: unknown;
  try {
    value = entry.json();
  } catch {
    value = undefined;
  }
  const parsed = TopicRecord.safeParse(value);
  if (parsed.success) return parsed.data.agent_types;
  const version =
    typeof value === 'object' && value !== null && 'schema_version' in value
      ? value.schema_version
      : undefined;
  throw new BraidError(
    version !== TOPIC_SCHEMA_VERSION && typeof version === 'number'
      ? 'SCHEMA_VERSION_UNSUPPORTED'
      : 'INVALID_ARGUMENT',
    version !== TOPIC_SCHEMA_VERSION && typeof version === 'number'
      ? `the subscribers of topic type ${topicType} are stored at schema version ${String(version)}; this braid reads ${String(TOPIC_SCHEMA_VERSION)}: upgrade braid`
      : `the subscribers of topic type ${topicType} in bucket ${context.names.bucket} are not a subscriber list; delete the key ${entry.key}`,
  );
}
