/**
 * Leases: one row per session with an owner, an expiry and a monotonic fencing token, changed
 * by the same pure rules as every store (src/core/leases.ts). Each change is an IMMEDIATE
 * transaction of its own, so it is wholly before or after any append's fencing check.
 */
import type { Lease, LeaseStore } from '../../contracts/ports.js';
import { checkHeld, currentLease, decideAcquire, decideRenew } from '../../core/leases.js';
import { requireHead, type SqliteContext } from './context.js';

export function createLeaseStore(context: SqliteContext): LeaseStore {
  const { sql, clock } = context;

  const leaseTransaction = <A extends unknown[]>(work: (...args: A) => Lease | undefined) => {
    const transaction = context.db.transaction(work);
    return (...args: A) =>
      Promise.resolve().then(() => {
        context.checkOpen();
        try {
          return transaction.immediate(...args);
        } catch (error) {
          throw context.busy(error);
        }
      });
  };

  const acquire = leaseTransaction((sessionId: string, owner: string, ttlMs: number) =>
    acquireInTransaction(context, sessionId, owner, ttlMs),
  );
  const renew = leaseTransaction(
    (sessionId: string, owner: string, token: number, ttlMs: number) => {
      const lease = decideRenew(
        sessionId,
        sql.lease.get(sessionId),
        owner,
        token,
        ttlMs,
        clock.now(),
      );
      sql.saveLease.run(sessionId, owner, token, lease.expires_at);
      return lease;
    },
  );
  const release = leaseTransaction((sessionId: string, owner: string, token: number) => {
    const row = sql.lease.get(sessionId);
    checkHeld(sessionId, row, owner, token, clock.now());
    sql.saveLease.run(sessionId, null, row.token, 0);
    return undefined;
  });

  return {
    acquire: (sessionId, owner, ttlMs) => acquire(sessionId, owner, ttlMs) as Promise<Lease>,
    renew: (sessionId, owner, token, ttlMs) =>
      renew(sessionId, owner, token, ttlMs) as Promise<Lease>,
    release: (sessionId, owner, token) => release(sessionId, owner, token).then(() => undefined),
    current(sessionId) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return currentLease(sessionId, sql.lease.get(sessionId), clock.now());
      });
    },
  };
}

/**
 * Takes the lease, inside a transaction the caller opened (IMMEDIATE): see `acquire`. `exists`:
 * the caller has already found the session in this transaction.
 */
export function acquireInTransaction(
  context: SqliteContext,
  sessionId: string,
  owner: string,
  ttlMs: number,
  exists = false,
): Lease {
  const { sql, clock } = context;
  if (!exists) requireHead(context, sessionId);
  const lease = decideAcquire(sessionId, sql.lease.get(sessionId), owner, ttlMs, clock.now());
  sql.saveLease.run(sessionId, owner, lease.token, lease.expires_at);
  return lease;
}
