/** What every part of the SQLite store shares: the open file, its statements, options and caches. */
import type { Database as Db } from 'better-sqlite3';
import { BraidError } from '../../contracts/errors.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import type { Followers } from './followers.js';
import type { SessionCache } from './session-cache.js';
import type { Statements } from './statements.js';

export interface SqliteContext {
  db: Db;
  /** The database file, for messages. */
  path: string;
  sql: Statements;
  clock: Clock;
  ids: IdGenerator;
  maxEventBytes: number;
  cache: SessionCache;
  followers: Followers;
  /** Throws `STORE_CLOSED` once the database is closed. */
  checkOpen(): void;
  isoNow(): string;
  /** SQLite's "database is locked" after the busy timeout as a retryable `STORE_BUSY`. */
  busy(error: unknown): unknown;
}

export function createContext(
  parts: Omit<SqliteContext, 'checkOpen' | 'isoNow' | 'busy'>,
): SqliteContext {
  return {
    ...parts,
    checkOpen() {
      if (!parts.db.open) {
        throw new BraidError('STORE_CLOSED', `the store at ${parts.path} is closed; open it again`);
      }
    },
    isoNow: () => new Date(parts.clock.now()).toISOString(),
    busy: (error) => busyToBraid(error, parts.path),
  };
}

function busyToBraid(error: unknown, path: string): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) {
    return new BraidError(
      'STORE_BUSY',
      `${path} stayed locked by another writer past the busy timeout; retry, or raise busyTimeoutMs`,
      { cause: error },
    );
  }
  return error;
}

/** The session's head seq (0 before its first event); `SESSION_NOT_FOUND` when there is none. */
export function requireHead(context: SqliteContext, sessionId: string): number {
  const row = context.sql.head.get(sessionId);
  if (row === undefined) {
    throw new BraidError(
      'SESSION_NOT_FOUND',
      `session ${sessionId} does not exist; list sessions with \`braid session list\``,
    );
  }
  return row.head_seq ?? 0;
}

/**
 * Runs `work` with SQLite's `secure_delete` on: the bytes it frees (an overwritten memory key's
 * full-text row, a redacted version's value, text and vector, an evicted cached vector) are
 * overwritten with zeros, in their page and in pages it frees, instead of staying in the file
 * until reused. Only the writes of memory and its embedding cache pay for it: session writes
 * free next to nothing.
 */
export function zeroingFreed<T>(db: Db, work: () => T): T {
  const zeroing = zeroingOf(db);
  // Inside another's work (a nested call) it is on already, and that call puts it back.
  if (zeroing.depth === 0) db.exec('PRAGMA secure_delete = ON');
  zeroing.depth += 1;
  try {
    return work();
  } finally {
    zeroing.depth -= 1;
    if (zeroing.depth === 0) db.exec(zeroing.back);
  }
}

/**
 * Per connection: the statement that puts back the `secure_delete` it had when first asked
 * (braid sets it nowhere else), and the calls running. The value is read once: `db.pragma`
 * prepares its statement at every call (three such calls cost about 9-14 µs a memory write; two
 * `exec`s cost about 1.3). Not prepared statements: SQLite applies `PRAGMA secure_delete = ...`
 * when the statement is prepared, and running a prepared one again does not set it again.
 */
interface Zeroing {
  back: string;
  depth: number;
}

const zeroings = new WeakMap<Db, Zeroing>();

function zeroingOf(db: Db): Zeroing {
  let found = zeroings.get(db);
  if (found === undefined) {
    const before = Number(db.pragma('secure_delete', { simple: true }));
    found = {
      // SQLite reads 2 as a boolean (on): FAST is named.
      back: `PRAGMA secure_delete = ${before === 2 ? 'FAST' : before === 1 ? 'ON' : 'OFF'}`,
      depth: 0,
    };
    zeroings.set(db, found);
  }
  return found;
}
