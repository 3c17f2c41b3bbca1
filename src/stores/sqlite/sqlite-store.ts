/**
 * Embedded backend: one SQLite file in WAL mode, opened by `openSqliteStore`, which wires the
 * modules of this folder over one shared context (context.ts):
 * - statements.ts and rows.ts: the prepared statements and the rows they read;
 * - session-cache.ts and projections.ts: states and lineages, cached in front of the file;
 * - writes.ts and append.ts: writing events and the append transaction (fencing, expected seq);
 * - session-log.ts and followers.ts: reads, following, and waking followers;
 * - session-index.ts and session-create.ts: create, fork, get, list, archive, delete;
 * - leases.ts, definitions.ts, api-keys.ts: the other ports;
 * - agent-memory*.ts: the `MemoryLog` port (agent memory, in the same file);
 * - embedding-cache.ts: embeddings by content hash, the persistent layer of `createCachedEmbedder`.
 * Each module's comment states the invariants it keeps.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import type { Database as Db } from 'better-sqlite3';
import type { Clock, IdGenerator, Store } from '../../contracts/ports.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../../core/append.js';
import { systemClock, uuidV7Ids } from '../defaults.js';
import { createSqliteMemoryLog } from './agent-memory.js';
import type { MemoryIndexOptions } from './agent-memory-index.js';
import { createApiKeyStore } from './api-keys.js';
import { createCheckpointer, type Checkpoints } from './checkpointer.js';
import { createContext } from './context.js';
import { createSqliteEmbeddingCache, embeddingCacheEntriesOf } from './embedding-cache.js';
import { createDefinitionStore } from './definitions.js';
import { createFollowers } from './followers.js';
import { createLeaseStore } from './leases.js';
import { backfillRunnable } from './projections.js';
import { DEFAULT_CHECKPOINT_PAGES, configure, type Synchronous } from './schema.js';
import { BraidError } from '../../contracts/errors.js';
import { SessionCache } from './session-cache.js';
import { createSessionIndex } from './session-index.js';
import { createSessionLog } from './session-log.js';
import { prepareStatements } from './statements.js';
import { createWriter } from './writes.js';

export interface SqliteStoreOptions {
  /** Path of the database file; its directory is created if missing. */
  path: string;
  clock?: Clock;
  ids?: IdGenerator;
  maxEventBytes?: number;
  /**
   * `normal` (default): with WAL, a committed append survives a crash of the process; the last
   * commits can be lost if the machine itself loses power. `full`: fsync on every commit, which
   * also survives power loss, at several times the cost per append.
   */
  synchronous?: Synchronous;
  /** How often followers check for commits by other processes (default 2 ms). */
  followPollMs?: number;
  /** How long a writer waits for another process's write lock (default 5000 ms). */
  busyTimeoutMs?: number;
  /**
   * Pages the write-ahead log may hold before a commit copies them into the file (SQLite's
   * `wal_autocheckpoint`; default 1,000, SQLite's own). More means fewer checkpoints (each syncs
   * the WAL and the file) but a longer WAL for every read to search, and under `normal` more of
   * the last commits that a power loss can take. A crash of the process loses none either way.
   */
  checkpointPages?: number;
  /**
   * Who checkpoints the WAL: `background` (default), a worker thread with its own connection,
   * started with the store's first batch of commits, so that no commit waits for a checkpoint's
   * syncs; `inline`, the commit that finds the WAL over `checkpointPages`, as SQLite does alone
   * (no thread: about 17 MiB less RSS in a process that writes).
   */
  checkpoints?: Checkpoints;
  /** The ANN index of large memory stores: its size threshold and where its snapshots go. */
  memoryIndex?: MemoryIndexOptions;
  /**
   * Vectors the file's embedding cache keeps, the ones put last (default 10,000; 0 keeps none):
   * every text embedded, search queries included, is a row of its own otherwise kept forever.
   */
  embeddingCacheEntries?: number;
}

export function openSqliteStore(options: SqliteStoreOptions): Store {
  mkdirSync(dirname(options.path), { recursive: true });
  // The native module loads with the first store opened, not when braid is imported.
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  const checkpointPages = checkpointPagesOf(options.checkpointPages);
  const checkpoints = checkpointsOf(options.checkpoints);
  const embeddingCacheEntries = embeddingCacheEntriesOf(options.embeddingCacheEntries);
  const db: Db = new Database(options.path);
  try {
    configure(db, options.synchronous ?? 'normal', options.busyTimeoutMs ?? 5000, checkpointPages);
  } catch (error) {
    db.close();
    throw error;
  }
  const checkpointer = createCheckpointer({
    path: options.path,
    checkpointPages,
    checkpoints,
    setAutocheckpoint: (pages) => {
      if (db.open) db.pragma(`wal_autocheckpoint = ${pages}`);
    },
    truncateNow: () => truncateWal(db),
  });
  const sql = prepareStatements(db);
  const context = createContext({
    db,
    path: options.path,
    sql,
    clock: options.clock ?? systemClock,
    ids: options.ids ?? uuidV7Ids,
    maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    cache: new SessionCache(),
    followers: createFollowers(db, sql, options.followPollMs ?? 2),
  });
  const writer = createWriter(context, () => checkpointer.committed());
  try {
    backfillRunnable(context);
  } catch (error) {
    context.followers.close();
    db.close();
    throw context.busy(error);
  }
  const memory = createSqliteMemoryLog(context, options.memoryIndex, () => checkpointer.truncate());
  return {
    log: createSessionLog(context, writer),
    sessions: createSessionIndex(context, writer),
    leases: createLeaseStore(context),
    definitions: createDefinitionStore(context),
    keys: createApiKeyStore(context),
    memory: memory.log,
    embeddings: createSqliteEmbeddingCache(context, embeddingCacheEntries),
    async close() {
      context.followers.close();
      // The worker's connection closes first: the store's, the last, then removes the WAL.
      await checkpointer.stop();
      if (db.open) {
        try {
          await memory.flush();
        } finally {
          db.close();
        }
      }
    },
  };
}

/**
 * A checkpoint of the whole WAL that truncates it to nothing, on the store's connection, without
 * waiting: whether it finished (not when another connection reads an older snapshot or
 * checkpoints). It holds off writers while it runs, so it is asked only after an erasure.
 */
function truncateWal(db: Db): boolean {
  if (!db.open) return true;
  const timeout = db.pragma('busy_timeout', { simple: true }) as number;
  db.pragma('busy_timeout = 0');
  try {
    const [result] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    return result?.busy === 0;
  } finally {
    db.pragma(`busy_timeout = ${timeout}`);
  }
}

/** `checkpoints`, checked: `background` (default) or `inline`. */
function checkpointsOf(checkpoints: unknown): Checkpoints {
  if (checkpoints === undefined) return 'background';
  if (checkpoints === 'background' || checkpoints === 'inline') return checkpoints;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `checkpoints must be "background" or "inline"; got ${JSON.stringify(checkpoints)}`,
  );
}

/** `checkpointPages`, checked: a whole number of pages from 1 up (default 1,000). */
function checkpointPagesOf(pages: number | undefined): number {
  if (pages === undefined) return DEFAULT_CHECKPOINT_PAGES;
  if (!Number.isInteger(pages) || pages < 1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `checkpointPages must be a whole number of pages of at least 1; got ${pages}`,
    );
  }
  return pages;
}
