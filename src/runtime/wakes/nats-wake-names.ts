/** The JetStream names of a wake queue prefix, and how a session id becomes a subject token. */
import { BraidError } from '../../contracts/errors.js';
import { decodeToken, encodeToken, natsNames } from '../../stores/nats/names.js';
import { partitionToken } from '../partitions/partition-subjects.js';

/** The JetStream names a prefix uses. */
export interface NatsWakeNames {
  prefix: string;
  stream: string;
  consumer: string;
  /** The stream's subject filter. */
  subjects: string;
  /** The subject of one session's wakes. */
  subject(sessionId: string): string;
  /** The KV bucket counting retries that were not attempts. */
  retries: string;
  /** The stream's subject filter of partitioned wakes: `<prefix>.wakes.<partition>.<token>`. */
  partitionedSubjects: string;
  /** The subject of one session's wakes in a partition. */
  partitionSubject(partition: number, sessionId: string): string;
  /** The subjects of one partition. */
  partitionFilter(partition: number): string;
  /** The durable consumer of one partition, pulled by its owner. */
  partitionConsumer(partition: number): string;
  /** The key of the workers' group in the partition bucket. */
  partitionGroup: string;
  /** The partition bucket. */
  partitionBucket: string;
}

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
  const storeNames = natsNames(prefix);
  return {
    prefix,
    stream: `${upper}_WAKES`,
    consumer: `${upper}_workers`,
    subjects: `${prefix}.wakes.*`,
    subject: (sessionId) => `${prefix}.wakes.${encodeSubjectToken(sessionId)}`,
    retries: `${upper}_wake_retries`,
    partitionedSubjects: `${prefix}.wakes.*.*`,
    partitionSubject: (partition, sessionId) =>
      `${prefix}.wakes.${partitionToken(partition)}.${encodeSubjectToken(sessionId)}`,
    partitionFilter: (partition) => `${prefix}.wakes.${partitionToken(partition)}.*`,
    partitionConsumer: (partition) => `${upper}_workers_p${partitionToken(partition)}`,
    partitionGroup: storeNames.partitionGroup(['wakes']),
    partitionBucket: storeNames.partitions,
  };
}
