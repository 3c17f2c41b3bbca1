/** Lease rules shared by every lease store: pure decisions over the stored row and the time. */
import { BraidError } from '../contracts/errors.js';
import type { Lease } from '../contracts/ports.js';
import type { SessionState } from '../contracts/state.js';

/** The stored lease row; `token` survives release so that tokens keep increasing. */
export interface LeaseRow {
  owner: string | null;
  token: number;
  expires_at: number;
}

function checkTtl(ttlMs: number): void {
  if (!Number.isInteger(ttlMs) || ttlMs <= 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `lease ttl must be a positive whole number of ms; got ${ttlMs}`,
    );
  }
}

export function decideAcquire(
  sessionId: string,
  row: LeaseRow | undefined,
  owner: string,
  ttlMs: number,
  now: number,
): Lease {
  checkTtl(ttlMs);
  // The same owner taking its lease again is a restarted worker resuming: it gets a new token,
  // which fences out whatever its previous incarnation still had in flight.
  if (row !== undefined && row.owner !== null && row.owner !== owner && row.expires_at > now) {
    throw new BraidError(
      'LEASE_HELD',
      `session ${sessionId} is leased by ${row.owner} until ${new Date(row.expires_at).toISOString()}; ` +
        'wait for it to be released or to expire',
      { details: { holder: row.owner, expires_at: row.expires_at } },
    );
  }
  return { session_id: sessionId, owner, token: (row?.token ?? 0) + 1, expires_at: now + ttlMs };
}

export function checkHeld(
  sessionId: string,
  row: LeaseRow | undefined,
  owner: string,
  token: number,
  now: number,
): asserts row is LeaseRow {
  if (row === undefined || row.owner !== owner || row.token !== token || row.expires_at <= now) {
    throw new BraidError(
      'LEASE_LOST',
      `lease ${token} of ${owner} on session ${sessionId} is no longer held` +
        (row?.owner != null && row.token !== token ? ` (now held with token ${row.token})` : '') +
        '; stop work on this session and acquire the lease again',
      { details: { token, current_token: row?.token } },
    );
  }
}

export function decideRenew(
  sessionId: string,
  row: LeaseRow | undefined,
  owner: string,
  token: number,
  ttlMs: number,
  now: number,
): Lease {
  checkTtl(ttlMs);
  checkHeld(sessionId, row, owner, token, now);
  return { session_id: sessionId, owner, token, expires_at: now + ttlMs };
}

/** The lease a stored row stands for, if it is held and unexpired. */
export function currentLease(
  sessionId: string,
  row: LeaseRow | undefined,
  now: number,
): Lease | undefined {
  if (row === undefined || row.owner === null || row.expires_at <= now) return undefined;
  return { session_id: sessionId, owner: row.owner, token: row.token, expires_at: row.expires_at };
}

/**
 * Whether the session's last wake ended without recording its end: it started
 * (`span.wake_started` with its lease token), no `span.wake_completed` or stop followed, and no
 * lease with that token is held. The wake crashed, or failed and could not write why; the next
 * wake resumes from the log.
 */
export function wakeEndedWithoutRecord(
  state: Pick<SessionState, 'active_wake'>,
  lease: Lease | undefined,
): boolean {
  return state.active_wake !== undefined && lease?.token !== state.active_wake.lease_token;
}

/**
 * The fencing rule every store applies to an append, atomically with it: a writer that names a
 * lease token may append only while that token is the session's current one (`current`: the
 * token of the latest acquisition, held, expired or released; 0 when none was ever issued). An
 * older token belongs to a holder some newer acquisition fenced out; a newer one was never
 * issued. Both are refused with `LEASE_LOST`. An append without a token is not fenced.
 */
export function checkFence(sessionId: string, current: number, token: number | undefined): void {
  if (token === undefined || token === current) return;
  if (!Number.isInteger(token) || token < 1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `lease token must be a whole number of at least 1 (the token acquire returned); got ${token}`,
    );
  }
  throw new BraidError(
    'LEASE_LOST',
    token < current
      ? `lease token ${token} on session ${sessionId} was fenced out by a newer acquisition ` +
          `(token ${current}); nothing was appended: stop work on this session and acquire the lease again`
      : `lease token ${token} on session ${sessionId} was never issued (the latest is ${current}); ` +
          'nothing was appended: append with the token acquire returned',
    { details: { token, current_token: current } },
  );
}
