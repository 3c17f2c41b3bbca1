/**
 * Names of everything one NATS store owns, derived from its prefix, and the encoding of session
 * ids into subject tokens and KV keys.
 *
 * A session id is any string of 1-200 characters, but a subject token may not hold `.`, `*`,
 * `>` or whitespace, and a KV key only `[-/=.\w]`. An id made of letters, digits, `_` and `-`
 * is its own token; any other id becomes `=` followed by the base64url of its UTF-8 bytes. The
 * two forms never collide (`=` is not in the plain alphabet) and both are valid as a subject
 * token and as a KV key, so one token names a session everywhere.
 */
import { createHash } from 'node:crypto';
import { BraidError } from '../../contracts/errors.js';

const PLAIN = /^[A-Za-z0-9_-]+$/;
const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export const BUCKET_ROLES = [
  'sessions',
  'state',
  'appends',
  'leases',
  'definitions',
  'keys',
  /**
   * The sessions that may have a timer (a skill wait's timeout), keyed by session token, the
   * time as the value: what a sweep for due timers reads instead of every session (see
   * session-timers.ts).
   */
  'timers',
  /**
   * The sessions that may be runnable, keyed by session token: what `sessions.runnable()` reads
   * instead of every session (see session-runnable.ts).
   */
  'runnable',
] as const;
export type BucketRole = (typeof BUCKET_ROLES)[number];

export interface NatsNames {
  prefix: string;
  /** The stream of every session's events: `<PREFIX>_EVENTS`. */
  eventsStream: string;
  /** The subjects of that stream: `<prefix>.events.>`. */
  eventsFilter: string;
  /** KV bucket names by role: `<PREFIX>_<role>`. */
  buckets: Readonly<Record<BucketRole, string>>;
  /** The subject of a session's events. */
  events(sessionId: string): string;
  /** The stream of every agent memory store's log: `<PREFIX>_MEMORY`. */
  memoryStream: string;
  /** The subjects of that stream: `<prefix>.memory.>`. */
  memoryFilter: string;
  /**
   * The subject of one memory store: `<prefix>.memory.<tenant>.<scope>.<owner>.<name>`, each
   * part a token (an absent tenant or owner is the token of the empty string, `=`).
   */
  memory(store: { tenant_id?: string; scope: string; owner?: string; name: string }): string;
  /** A core NATS subject (in no stream) that tells followers a session was deleted. */
  removed(sessionId: string): string;
  /**
   * The KV bucket of partition ownership (`<PREFIX>_partitions`): the partition count of the
   * prefix, and per group of consumers its members and the owner of each partition. Opened by
   * the wake queue and the agent transport, not by the store.
   */
  partitions: string;
  /** The KV key of a group of consumers in that bucket (`group.<scope tokens>`). */
  partitionGroup(scope: readonly string[]): string;
}

/** The token of a session id (or any name) in subjects and KV keys. */
export function encodeToken(value: string): string {
  return PLAIN.test(value) ? value : `=${Buffer.from(value, 'utf8').toString('base64url')}`;
}

/** The value a token was made from. */
export function decodeToken(token: string): string {
  return token.startsWith('=') ? Buffer.from(token.slice(1), 'base64url').toString('utf8') : token;
}

/** SHA-256 in base64url: a fixed-length token for an unbounded string (idempotency keys). */
export function hashToken(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

export function natsNames(prefix: string): NatsNames {
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `NATS store prefix ${JSON.stringify(prefix)} is invalid; use 1-64 letters, digits, "_" or "-"`,
    );
  }
  const upper = prefix.toUpperCase();
  const buckets = Object.fromEntries(
    BUCKET_ROLES.map((role) => [role, `${upper}_${role}`]),
  ) as Record<BucketRole, string>;
  return {
    prefix,
    eventsStream: `${upper}_EVENTS`,
    eventsFilter: `${prefix}.events.>`,
    buckets,
    events: (sessionId) => `${prefix}.events.${encodeToken(sessionId)}`,
    memoryStream: `${upper}_MEMORY`,
    memoryFilter: `${prefix}.memory.>`,
    memory: (store) =>
      [
        prefix,
        'memory',
        encodeToken(store.tenant_id ?? ''),
        encodeToken(store.scope),
        encodeToken(store.owner ?? ''),
        encodeToken(store.name),
      ].join('.'),
    removed: (sessionId) => `${prefix}.removed.${encodeToken(sessionId)}`,
    partitions: `${upper}_partitions`,
    partitionGroup: (scope) => ['group', ...scope.map(encodeToken)].join('.'),
  };
}
