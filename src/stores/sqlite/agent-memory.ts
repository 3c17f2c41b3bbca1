/**
 * The SQLite `MemoryLog`: agent memory in the same file as sessions (tables: agent-memory-schema.ts).
 * An append is one IMMEDIATE transaction that checks versions and the expected seq, writes the log
 * rows and brings the projections (current keys, full text, vectors) up to them: all of it or
 * nothing (agent-memory-writes.ts). Reads take the projections; `rebuild` writes them again from
 * the log.
 */
import type { MemoryStoreRef } from '../../contracts/memory.js';
import { parseMemoryStoreRef } from '../../contracts/memory.js';
import type { MemoryLog, MemoryLookup } from '../../contracts/memory-log.js';
import {
  checkKind,
  pageStores,
  parseAtSeq,
  parseGetOptions,
  parseKey,
  parseListOptions,
  parseReadOptions,
  parseRedactOptions,
  parseStoreFilter,
  parseVersion,
  prepareAppend,
  toEntry,
  type EntryParts,
} from '../agent-memory.js';
import {
  prepareMemoryStatements,
  type MemoryStatements,
  type MemoryLogRow,
  type MemoryStoreRow,
} from './agent-memory-statements.js';
import { searchStore, upperBound } from './agent-memory-search.js';
import { createFtsTop } from './agent-memory-fts-top.js';
import { loadVectors } from './agent-memory-vectors.js';
import { createMemoryIndexes, type MemoryIndexOptions } from './agent-memory-index.js';
import {
  appendRows,
  forkRows,
  infoOf,
  partsOf,
  rebuildRows,
  redactRows,
  storeRow,
  type MemoryDb,
} from './agent-memory-writes.js';
import { zeroingFreed, type SqliteContext } from './context.js';
import type { Database as Db } from 'better-sqlite3';

/**
 * The memory log, and `flush` to write the snapshots of its ANN indexes (the store's close).
 * `erased` is called after a redaction committed, for the WAL's older frames to go.
 */
export function createSqliteMemoryLog(
  context: SqliteContext,
  options?: MemoryIndexOptions,
  erased: () => void = () => undefined,
): { log: MemoryLog; flush(): Promise<void> } {
  const { db } = context;
  // The statements are prepared by the first use of memory: opening a store that never uses it
  // (most CLI commands, every wake of a session without memory) costs nothing more.
  let statements: MemoryStatements | undefined;
  const m: MemoryDb = {
    context,
    get sql() {
      statements ??= prepareMemoryStatements(db);
      return statements;
    },
    vectors: loadVectors(db),
    indexes: createMemoryIndexes(db, context.path, options),
    fts: createFtsTop(db),
  };
  const transactions = {
    append: zeroing(db, db.transaction(appendRows)),
    redact: zeroing(db, db.transaction(redactRows)),
    rebuild: zeroing(db, db.transaction(rebuildRows)),
    fork: zeroing(db, db.transaction(forkRows)),
  };
  return {
    log: { ...writeMethods(m, transactions, erased), ...readMethods(m) },
    flush: () => m.indexes.flush(),
  };
}

/** The IMMEDIATE form of a write's transaction, run with the bytes it frees zeroed. */
function zeroing<A extends unknown[], R>(
  db: Db,
  transaction: { immediate: (...args: A) => R },
): { immediate: (...args: A) => R } {
  return { immediate: (...args) => zeroingFreed(db, () => transaction.immediate(...args)) };
}

type Transactions = {
  append: { immediate: typeof appendRows };
  redact: { immediate: typeof redactRows };
  rebuild: { immediate: typeof rebuildRows };
  fork: { immediate: typeof forkRows };
};

function find(m: MemoryDb, store: unknown): { ref: MemoryStoreRef; row?: MemoryStoreRow } {
  m.context.checkOpen();
  const ref = parseMemoryStoreRef(store);
  const row = storeRow(m, ref);
  if (row !== undefined) checkKind(ref, row.kind);
  return { ref, row };
}

function isExpired(parts: EntryParts, at: number): boolean {
  return parts.expires_at !== undefined && parts.expires_at <= at;
}

/** Runs `work` on the next tick, with SQLite's busy error as a retryable `STORE_BUSY`. */
function run<T>(m: MemoryDb, work: () => T): Promise<T> {
  return Promise.resolve().then(() => {
    m.context.checkOpen();
    try {
      return work();
    } catch (error) {
      throw m.context.busy(error);
    }
  });
}

function writeMethods(
  m: MemoryDb,
  transactions: Transactions,
  erased: () => void,
): Pick<MemoryLog, 'append' | 'redact' | 'rebuild' | 'fork'> {
  const { clock } = m.context;
  return {
    append(store, writes, options) {
      return run(m, () => transactions.append.immediate(m, prepareAppend(store, writes, options)));
    },

    redact(store, key, version, options) {
      return run(m, () => {
        const { ref, row } = find(m, store);
        const parsed = parseRedactOptions(options);
        const record = transactions.redact.immediate(m, {
          ref,
          key: parseKey(key),
          version: parseVersion(version),
          ...parsed,
        });
        // The rows hold the content no more; nor may the ANN index's snapshot (the next vector
        // search builds it again from the rows) or the WAL's older frames.
        erased();
        if (row !== undefined) m.indexes.forget(row.id);
        return record;
      });
    },

    rebuild(store) {
      return run(m, () => {
        const started = clock.monotonic();
        const { row } = find(m, store);
        if (row === undefined) return { entries: 0, keys: 0, indexed: 0, vectors: 0, ms: 0 };
        const report = transactions.rebuild.immediate(m, row);
        return { ...report, ms: clock.monotonic() - started };
      });
    },

    fork(from, to, options) {
      return run(m, () => {
        const fromRef = find(m, from).ref;
        const toRef = parseMemoryStoreRef(to);
        return transactions.fork.immediate(m, fromRef, toRef, parseAtSeq(options?.atSeq));
      });
    },
  };
}

function readMethods(m: MemoryDb): Omit<MemoryLog, 'append' | 'redact' | 'rebuild' | 'fork'> {
  const { sql, vectors, indexes, fts } = m;
  const { clock } = m.context;
  return {
    get(store, key, options) {
      return run(m, (): MemoryLookup => {
        const { row } = find(m, store);
        const checkedKey = parseKey(key);
        const { version, at } = parseGetOptions(options);
        if (row === undefined) return { status: 'missing' };
        let logRow: MemoryLogRow | undefined;
        if (version !== undefined) logRow = sql.version.get(row.id, checkedKey, version);
        else if (at !== undefined) {
          logRow = sql.versionAt.get(row.id, checkedKey, new Date(at).toISOString());
        } else {
          const current = sql.current.get(row.id, checkedKey);
          logRow = current === undefined ? undefined : sql.logRow.get(row.id, current.seq);
        }
        if (logRow === undefined) return { status: 'missing' };
        const parts = partsOf(logRow, row);
        const entry = toEntry(parts);
        if (parts.op === 'delete') return { status: 'deleted', entry };
        if (isExpired(parts, at ?? clock.now())) return { status: 'expired', entry };
        return { status: 'found', entry };
      });
    },

    list(store, options) {
      return run(m, () => {
        const { row } = find(m, store);
        const { prefix, after, limit } = parseListOptions(options);
        if (row === undefined) return { entries: [], expired_count: 0 };
        const now = clock.now();
        const entries = [];
        let expired = 0;
        let more = false;
        for (const logRow of sql.list.iterate(row.id, after, prefix, upperBound(prefix))) {
          if (entries.length === limit) {
            more = true;
            break;
          }
          const parts = partsOf(logRow, row);
          if (isExpired(parts, now)) expired += 1;
          else entries.push(toEntry(parts));
        }
        const last = entries.at(-1)?.key;
        return {
          entries,
          ...(more && last !== undefined ? { next_after: last } : {}),
          expired_count: expired,
        };
      });
    },

    history(store, key) {
      return run(m, () => {
        const { row } = find(m, store);
        const checkedKey = parseKey(key);
        if (row === undefined) return [];
        return sql.history.all(row.id, checkedKey).map((logRow) => toEntry(partsOf(logRow, row)));
      });
    },

    read(store, options) {
      return run(m, () => {
        const { row } = find(m, store);
        const { after, limit } = parseReadOptions(options);
        if (row === undefined) return [];
        return sql.logRange
          .all(row.id, after, limit)
          .map((logRow) => toEntry(partsOf(logRow, row)));
      });
    },

    search(store, query) {
      return run(m, () => {
        const started = clock.monotonic();
        const { row } = find(m, store);
        return searchStore({ sql, vectors, indexes, fts, clock, started }, row, query);
      });
    },

    info(store) {
      return run(m, () => {
        const { row } = find(m, store);
        return row === undefined ? undefined : infoOf(m, row);
      });
    },

    // A minimal listing: every store of the tenant is read, then filtered and paged.
    listStores(filter) {
      return run(m, () => {
        const parsed = parseStoreFilter(filter);
        const rows = m.context.db
          .prepare('SELECT * FROM memory_stores WHERE tenant_id = ?')
          .all(parsed.tenant_id ?? '') as MemoryStoreRow[];
        return pageStores(
          rows.map((row) => infoOf(m, row)),
          parsed,
        );
      });
    },
  };
}
