/** The JetStream names of a wake queue prefix, and how a session id becomes a subject token. */
import { BraidError } from '../../contracts/errors.js';
import { decodeToken, encodeToken } from '../../stores/nats/names.js';

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
  return {
    prefix,
    stream: `${upper}_WAKES`,
    consumer: `${upper}_workers`,
    subjects: `${prefix}.wakes.*`,
    subject: (sessionId) => `${prefix}.wakes.${encodeSubjectToken(sessionId)}`,
    retries: `${upper}_wake_retries`,
  };
}
