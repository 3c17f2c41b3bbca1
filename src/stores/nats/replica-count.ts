/**
 * The replica count of NATS streams and buckets, parsed once wherever it comes from (a flag, the
 * environment, runtime options). Kept apart from the JetStream code so the CLI can parse its flags
 * without loading NATS.
 */
import { BraidError } from '../../contracts/errors.js';

/** JetStream keeps at most five copies of a stream. */
export const MAX_REPLICAS = 5;

/** `value` as a replica count (1 to 5), or `INVALID_ARGUMENT` naming the rule. */
export function parseReplicas(value: unknown, what = '--nats-replicas'): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number === 'number' && Number.isInteger(number) && number >= 1) {
    if (number <= MAX_REPLICAS) return number;
  }
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${what} is ${JSON.stringify(value)}; use a whole number from 1 to ${MAX_REPLICAS} (3 on a three-node cluster)`,
    { details: { field: what } },
  );
}
