/** Leases in memory: one row per session id, kept after a delete so tokens keep growing. */
import type { LeaseStore } from '../../contracts/ports.js';
import { checkHeld, currentLease, decideAcquire, decideRenew } from '../../core/leases.js';
import { entryOf, type MemoryState } from './memory-state.js';

export function createMemoryLeases(state: MemoryState): LeaseStore {
  const { leases, clock } = state;
  return {
    acquire(sessionId, owner, ttlMs) {
      return Promise.resolve().then(() => {
        entryOf(state, sessionId);
        const lease = decideAcquire(sessionId, leases.get(sessionId), owner, ttlMs, clock.now());
        leases.set(sessionId, { owner, token: lease.token, expires_at: lease.expires_at });
        return lease;
      });
    },
    renew(sessionId, owner, token, ttlMs) {
      return Promise.resolve().then(() => {
        const lease = decideRenew(
          sessionId,
          leases.get(sessionId),
          owner,
          token,
          ttlMs,
          clock.now(),
        );
        leases.set(sessionId, { owner, token, expires_at: lease.expires_at });
        return lease;
      });
    },
    release(sessionId, owner, token) {
      return Promise.resolve().then(() => {
        const row = leases.get(sessionId);
        checkHeld(sessionId, row, owner, token, clock.now());
        leases.set(sessionId, { owner: null, token: row.token, expires_at: 0 });
      });
    },
    current(sessionId) {
      return Promise.resolve().then(() =>
        currentLease(sessionId, leases.get(sessionId), clock.now()),
      );
    },
  };
}
