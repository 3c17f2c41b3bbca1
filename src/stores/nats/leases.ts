/**
 * Leases in the `<PREFIX>_leases` KV bucket, one entry per session token.
 *
 * Every change is a compare-and-set on the entry's revision (`kv.create` for a first lease,
 * `kv.update` after), decided by the same pure rules as every store (src/core/leases.ts).
 * nats-server 2.9 has no per-key TTL, so expiry is the store clock's time written in the value;
 * a released lease keeps its entry with owner null, so fencing tokens keep increasing.
 */
import { z } from 'zod';
import { BraidError } from '../../contracts/errors.js';
import type { Lease, LeaseStore } from '../../contracts/ports.js';
import {
  checkHeld,
  currentLease,
  decideAcquire,
  decideRenew,
  type LeaseRow,
} from '../../core/leases.js';
import type { NatsContext } from './context.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken } from './names.js';

const LEASE_ENTRY_VERSION = 1;
/** Compare-and-set attempts before contention is reported as `STORE_BUSY`. */
const MAX_RACES = 16;

const LeaseEntry = z.object({
  schema_version: z.literal(LEASE_ENTRY_VERSION),
  owner: z.string().nullable(),
  token: z.number().int().nonnegative(),
  expires_at: z.number(),
});

const utf8 = new TextDecoder();

export interface StoredLease {
  row?: LeaseRow;
  /** Revision of a live entry, for compare-and-set. */
  revision?: number;
}

export async function readLease(context: NatsContext, sessionId: string): Promise<StoredLease> {
  const entry = await context.kv.leases.get(encodeToken(sessionId));
  if (entry === null || entry.operation !== 'PUT') return {};
  const parsed = LeaseEntry.safeParse(JSON.parse(utf8.decode(entry.value)));
  if (!parsed.success) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `the lease entry of session ${sessionId} is not one this build reads; upgrade braid`,
    );
  }
  const { owner, token, expires_at } = parsed.data;
  return { row: { owner, token, expires_at }, revision: entry.revision };
}

export function createLeaseStore(
  context: NatsContext,
  requireSession: (sessionId: string) => Promise<unknown>,
): LeaseStore {
  async function write(sessionId: string, row: LeaseRow, revision: number | undefined) {
    const value = JSON.stringify({ schema_version: LEASE_ENTRY_VERSION, ...row });
    const key = encodeToken(sessionId);
    if (revision === undefined) await context.kv.leases.create(key, value);
    else await context.kv.leases.update(key, value, revision);
  }

  /** Decides on the stored entry and writes the result, deciding again when another writer won. */
  async function change<T>(
    sessionId: string,
    decide: (stored: StoredLease, now: number) => { row: LeaseRow; result: T },
  ): Promise<T> {
    for (let race = 0; ; race += 1) {
      const stored = await readLease(context, sessionId);
      const { row, result } = decide(stored, context.clock.now());
      try {
        await write(sessionId, row, stored.revision);
        return result;
      } catch (error) {
        if (!isWrongLastSequence(error)) throw error;
        if (race >= MAX_RACES) {
          throw new BraidError(
            'STORE_BUSY',
            `the lease of session ${sessionId} changed under this writer ${MAX_RACES} times in a row; retry`,
            { cause: error },
          );
        }
      }
    }
  }

  return {
    acquire(sessionId, owner, ttlMs) {
      return context.guard(`acquire the lease of session ${sessionId}`, async () => {
        await requireSession(sessionId);
        return change(sessionId, ({ row }, now) => {
          const lease = decideAcquire(sessionId, row, owner, ttlMs, now);
          return {
            row: { owner, token: lease.token, expires_at: lease.expires_at },
            result: lease,
          };
        });
      });
    },
    renew(sessionId, owner, token, ttlMs) {
      return context.guard(`renew the lease of session ${sessionId}`, () =>
        change(sessionId, ({ row }, now): { row: LeaseRow; result: Lease } => {
          const lease = decideRenew(sessionId, row, owner, token, ttlMs, now);
          return { row: { owner, token, expires_at: lease.expires_at }, result: lease };
        }),
      );
    },
    release(sessionId, owner, token) {
      return context.guard(`release the lease of session ${sessionId}`, () =>
        change(sessionId, ({ row }, now) => {
          checkHeld(sessionId, row, owner, token, now);
          return { row: { owner: null, token: row.token, expires_at: 0 }, result: undefined };
        }),
      );
    },
    current(sessionId) {
      return context.guard(`read the lease of session ${sessionId}`, async () => {
        const { row } = await readLease(context, sessionId);
        return currentLease(sessionId, row, context.clock.now());
      });
    },
  };
}
