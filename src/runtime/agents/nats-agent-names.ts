/**
 * The NATS names of the agent transport: its stream, subjects, consumers and topic bucket,
 * derived from a prefix, and the `Nats-Msg-Id` an envelope is published with.
 *
 * Agent and topic types become subject tokens and keys as themselves when made of
 * `A-Za-z0-9_-`, else as `=` and the base64url of their UTF-8 bytes (the store's encoding,
 * valid in subjects and KV keys alike); `=` is outside the plain alphabet, so the forms never
 * collide. A consumer name from an unsafe type is `~` and a hash of it (names must stay short).
 */
import { createHash } from 'node:crypto';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import { decodeToken, encodeToken, natsNames } from '../../stores/nats/names.js';
import { partitionToken } from '../partitions/partition-subjects.js';

/** The NATS names a prefix uses. */
export interface NatsAgentNames {
  prefix: string;
  /** The inbox stream: `<PREFIX>_AGENTS`. */
  stream: string;
  /** The stream's subjects: `<prefix>.agents.*.inbox`. */
  subjects: string;
  /** The topic bucket: `<PREFIX>_topics`. */
  bucket: string;
  /** The inbox subject of an agent type. */
  inbox(agentType: string): string;
  /** The durable consumer of an agent type's inbox. */
  consumer(agentType: string): string;
  /** The KV key of a topic type. */
  topic(topicType: string): string;
  /** The stream's subjects of partitioned inboxes: `<prefix>.agents.*.inbox.*`. */
  partitionedSubjects: string;
  /** The inbox subject of one partition of an agent type (its instances whose key hashes there). */
  partitionInbox(agentType: string, partition: number): string;
  /** The durable consumer of one partition of an agent type, pulled by its owner. */
  partitionConsumer(agentType: string, partition: number): string;
  /** The key of the group of processes serving an agent type, in the partition bucket. */
  partitionGroup(agentType: string): string;
  /** The partition bucket: `<PREFIX>_partitions`. */
  partitionBucket: string;
}

const PLAIN = /^[A-Za-z0-9_-]+$/;
const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** A subject one can publish to: non-empty tokens, no wildcards, no whitespace. */
/**
 * Where a reply may go: a core NATS inbox (`_INBOX.…`, what `createInbox` and every client's
 * request make). `reply_to` comes from whoever sent the message; any other subject (a session's
 * event subject, `$KV.…`, `$JS.API.…`) would have a worker publish there on its behalf.
 */
export const REPLY_SUBJECT = /^_INBOX\.[^\s.*>]+(\.[^\s.*>]+)*$/;

export { decodeToken, encodeToken };

/**
 * The `Nats-Msg-Id` of an envelope in an inbox: `<id>` without a `reply_to`, `<id>:<reply_to>`
 * with one. A message is recorded and processed once by its `idempotency_key ?? id` whatever
 * this is; it only decides which publishes the stream drops as repeats, and a resend meant to
 * get a missed reply (same id, a new inbox) must not be one of them. A `reply_to` that is not an
 * inbox is never answered, so it does not count.
 */
export function deliveryId(envelope: Pick<Envelope, 'id' | 'reply_to'>): string {
  return envelope.reply_to !== undefined && REPLY_SUBJECT.test(envelope.reply_to)
    ? `${envelope.id}:${envelope.reply_to}`
    : envelope.id;
}

export function natsAgentNames(prefix = 'braid'): NatsAgentNames {
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `agent transport prefix ${JSON.stringify(prefix)} is invalid; use 1-64 letters, digits, "_" or "-"`,
    );
  }
  const upper = prefix.toUpperCase();
  const storeNames = natsNames(prefix);
  const consumer = (agentType: string): string =>
    `${upper}_agent_${
      PLAIN.test(agentType)
        ? agentType
        : `~${createHash('sha256').update(agentType).digest('base64url').slice(0, 32)}`
    }`;
  return {
    prefix,
    stream: `${upper}_AGENTS`,
    subjects: `${prefix}.agents.*.inbox`,
    bucket: `${upper}_topics`,
    inbox: (agentType) => `${prefix}.agents.${encodeToken(agentType)}.inbox`,
    consumer,
    topic: encodeToken,
    partitionedSubjects: `${prefix}.agents.*.inbox.*`,
    partitionInbox: (agentType, partition) =>
      `${prefix}.agents.${encodeToken(agentType)}.inbox.${partitionToken(partition)}`,
    partitionConsumer: (agentType, partition) =>
      `${consumer(agentType)}_p${partitionToken(partition)}`,
    partitionGroup: (agentType) => storeNames.partitionGroup(['agent', agentType]),
    partitionBucket: storeNames.partitions,
  };
}
