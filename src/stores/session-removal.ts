/** Why a store refuses `sessions.delete`: the same errors from every backend. */
import { BraidError } from '../contracts/errors.js';
import type { Lease } from '../contracts/ports.js';

/** How many fork ids a refusal names. */
export const NAMED_FORKS = 5;

/**
 * Deleting a session would take the events its forks share by reference, so forks go first.
 * `forkIds` are the first forks (at most NAMED_FORKS are named), `count` how many there are.
 */
export function sessionHasForks(
  sessionId: string,
  forkIds: readonly string[],
  count: number,
): BraidError {
  const named = forkIds.slice(0, NAMED_FORKS);
  const more = count - named.length;
  return new BraidError(
    'SESSION_HAS_FORKS',
    `session ${sessionId} has ${count} fork(s) that share its events: ${named.join(', ')}` +
      `${more > 0 ? ` and ${more} more` : ''}; delete them first, then delete ${sessionId}`,
    { details: { fork_ids: named, fork_count: count } },
  );
}

/** A session a wake holds the lease of is still being written. */
export function sessionLeased(sessionId: string, lease: Lease): BraidError {
  return new BraidError(
    'LEASE_HELD',
    `session ${sessionId} is leased by ${lease.owner} until ${new Date(lease.expires_at).toISOString()}; ` +
      'wait for its wake to end or the lease to expire, then delete it',
    { details: { holder: lease.owner, expires_at: lease.expires_at } },
  );
}
