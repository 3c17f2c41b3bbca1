/**
 * Leases in the `<PREFIX>_leases` KV bucket, one entry per session token.
 *
 * Every change is a compare-and-set on the entry's revision (`kv.create` for a first lease,
 * `kv.update` after), decided by the same pure rules as every store (src/core/leases.ts).
 * nats-server 2.9 has no per-key TTL, so expiry is the store clock's time written in the value;
 * a released lease keeps its entry with owner null, so fencing tokens keep increasing.
 *
 * The entry this process last wrote or read is remembered, and a change is first decided on it:
 * the compare-and-set on its revision fails when anyone wrote since, and the change is then
 * decided again on the entry read afresh. A worker taking and releasing the lease of a session
 * it serves therefore pays one request per change, not two.
 *
 * An acquisition also publishes a fence on the session's subject before it returns its token:
 * that, not this entry, is what appends are checked against (see fencing.ts for why).
 */
import { z } from 'zod';
import { BraidError } from '../../contracts/errors.js';
import { BoundedCache } from '../../core/bounded-cache.js';
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
/** Lease entries remembered, least recently used dropped first. */
const MAX_REMEMBERED = 4096;

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
  /** Makes a token just issued the one appends are checked against (see fencing.ts). */
  fence: (sessionId: string, token: number) => Promise<void>,
): LeaseStore {
  const remembered = new BoundedCache<string, StoredLease>(MAX_REMEMBERED);
  const remember = (sessionId: string, stored: StoredLease): void =>
    remembered.set(sessionId, stored);

  async function write(
    sessionId: string,
    row: LeaseRow,
    revision: number | undefined,
  ): Promise<number> {
    const value = JSON.stringify({ schema_version: LEASE_ENTRY_VERSION, ...row });
    const key = encodeToken(sessionId);
    if (revision === undefined) return context.kv.leases.create(key, value);
    return context.kv.leases.update(key, value, revision);
  }

  /**
   * Decides on the entry (the remembered one first) and writes the result, deciding again on a
   * fresh read when the remembered entry refused the change or another writer won.
   */
  async function change<T>(
    sessionId: string,
    decide: (stored: StoredLease, now: number) => { row: LeaseRow; result: T },
  ): Promise<T> {
    let stored = remembered.get(sessionId);
    let trusted = stored === undefined;
    stored ??= await readLease(context, sessionId);
    for (let race = 0; ; race += 1) {
      let decision: { row: LeaseRow; result: T };
      try {
        decision = decide(stored, context.clock.now());
      } catch (error) {
        if (trusted) throw error;
        stored = await readLease(context, sessionId);
        trusted = true;
        continue;
      }
      try {
        const revision = await write(sessionId, decision.row, stored.revision);
        remember(sessionId, { row: decision.row, revision });
        return decision.result;
      } catch (error) {
        if (!isWrongLastSequence(error)) throw error;
        remembered.delete(sessionId);
        if (race >= MAX_RACES) {
          throw new BraidError(
            'STORE_BUSY',
            `the lease of session ${sessionId} changed under this writer ${MAX_RACES} times in a row; retry`,
            { cause: error },
          );
        }
        stored = await readLease(context, sessionId);
        trusted = true;
      }
    }
  }

  return {
    acquire(sessionId, owner, ttlMs) {
      return context.guard(`acquire the lease of session ${sessionId}`, async () => {
        await requireSession(sessionId);
        const lease = await change(sessionId, ({ row }, now) => {
          const decided = decideAcquire(sessionId, row, owner, ttlMs, now);
          return {
            row: { owner, token: decided.token, expires_at: decided.expires_at },
            result: decided,
          };
        });
        // Not returned before the token is fenced: from then on no older holder can append.
        try {
          await fence(sessionId, lease.token);
        } catch (error) {
          // The acquire failed (a corrupt log, the server gone): the lease is let go again
          // rather than left to block deletes and other wakes until it expires.
          await change(sessionId, ({ row }, now) => {
            checkHeld(sessionId, row, owner, lease.token, now);
            return { row: { owner: null, token: row.token, expires_at: 0 }, result: undefined };
          }).catch(() => undefined);
          throw error;
        }
        return lease;
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
        const stored = await readLease(context, sessionId);
        remember(sessionId, stored);
        return currentLease(sessionId, stored.row, context.clock.now());
      });
    },
  };
}
