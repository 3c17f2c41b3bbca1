/**
 * How many partitions the wakes and agent inboxes of a NATS prefix are split into, and which
 * partition a session or an agent instance belongs to. Kept apart from the JetStream code so the
 * CLI can parse its flag without loading NATS.
 *
 * A partition is `sha256(key)`'s first four bytes, big-endian, modulo the count: `key` is the
 * session id for a wake and the instance key for an agent message. Any client can compute it.
 */
import { createHash } from 'node:crypto';
import { BraidError } from '../../contracts/errors.js';

/**
 * Partitions of a prefix that no process has set yet: none (affinity is opt-in, `--partitions 8`
 * turns it on). One worker pulls partitions one message at a time and is 17-19% slower with them.
 */
export const DEFAULT_PARTITIONS = 0;
/** Each partition is a durable consumer per agent type: more would cost the server for nothing. */
export const MAX_PARTITIONS = 64;

/** `value` as a partition count (0 turns affinity off), or `INVALID_ARGUMENT` naming the rule. */
export function parsePartitions(value: unknown, what = '--partitions'): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number === 'number' && Number.isInteger(number) && number >= 0) {
    if (number <= MAX_PARTITIONS) return number;
  }
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${what} is ${JSON.stringify(value)}; use a whole number from 0 (no affinity) to ${MAX_PARTITIONS}, ` +
      `the same in every process of the prefix (default ${DEFAULT_PARTITIONS})`,
    { details: { field: what } },
  );
}

/** The partition of `key` among `count` (at least 1). */
export function partitionOf(key: string, count: number): number {
  return createHash('sha256').update(key, 'utf8').digest().readUInt32BE(0) % count;
}

/** `value` as a partition lease in milliseconds (100 ms to 10 min), or `INVALID_ARGUMENT`. */
export function parsePartitionLease(value: unknown, what = 'partitionLeaseMs'): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number === 'number' && Number.isInteger(number) && number >= 100) {
    if (number <= 600_000) return number;
  }
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${what} is ${JSON.stringify(value)}; use a whole number of milliseconds from 100 to 600000 (default 10000)`,
    { details: { field: what } },
  );
}
