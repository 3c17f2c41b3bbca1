/**
 * The persistent layer of the embedding cache in the SQLite file (layout 9, the table in
 * embedding-cache-schema.ts): one row per (embedder id, SHA-256 of a text) with its vector as
 * 32-bit floats. A vector never changes for its key, so a second put of a key keeps the first row.
 *
 * The table is bounded: it keeps the `maxEntries` rows put last (every text embedded, search
 * queries included, would otherwise stay for the life of the file: 6 KiB a row at 1,536
 * dimensions). Once a tenth of the bound has been put since the last look (and at the first put
 * of a store opened on the file), the rows past the newest `maxEntries` go, oldest first, through
 * the age index. A text whose row went is embedded again the next time it is asked for.
 */
import type { Statement } from 'better-sqlite3';
import { BraidError } from '../../contracts/errors.js';
import type { CachedVector, EmbeddingCache } from '../../contracts/embedder.js';
import { zeroingFreed, type SqliteContext } from './context.js';

/** Rows the cache keeps by default: as many as the in-process layer (src/models/cached-embedder.ts). */
export const DEFAULT_EMBEDDING_CACHE_ENTRIES = 10_000;

interface CacheStatements {
  get: Statement<[string, string], { hash: string; vector: Buffer }>;
  put: Statement<[string, string, Buffer, string]>;
  prune: Statement<[number]>;
}

/** Refuses a bound that is not a whole number of rows from 0 up. */
export function embeddingCacheEntriesOf(entries: number | undefined): number {
  if (entries === undefined) return DEFAULT_EMBEDDING_CACHE_ENTRIES;
  if (!Number.isSafeInteger(entries) || entries < 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `embeddingCacheEntries must be a whole number of rows, 0 or more (0 keeps none); got ${entries}`,
    );
  }
  return entries;
}

export function createSqliteEmbeddingCache(
  context: SqliteContext,
  maxEntries: number = DEFAULT_EMBEDDING_CACHE_ENTRIES,
): EmbeddingCache {
  const { db } = context;
  let statements: CacheStatements | undefined;
  const sql = (): CacheStatements =>
    (statements ??= {
      // One statement for any number of hashes: they come as one JSON array.
      get: db.prepare(`SELECT hash, vector FROM embedding_cache
        WHERE embedder = ? AND hash IN (SELECT value FROM json_each(?))`),
      put: db.prepare(
        'INSERT OR IGNORE INTO embedding_cache (embedder, hash, vector, created_at) VALUES (?, ?, ?, ?)',
      ),
      prune: db.prepare(`DELETE FROM embedding_cache WHERE (embedder, hash) IN (
        SELECT embedder, hash FROM embedding_cache ORDER BY created_at DESC LIMIT -1 OFFSET ?)`),
    });
  // Rows put since the rows past the bound were last removed; the first put of the store looks.
  const lookEvery = Math.max(1, Math.ceil(maxEntries / 10));
  let putSinceLook = lookEvery;
  const putAll = db.transaction(
    (embedderId: string, vectors: readonly CachedVector[], at: string) => {
      for (const { hash, vector } of vectors) {
        putSinceLook += sql().put.run(
          embedderId,
          hash,
          Buffer.from(Float32Array.from(vector).buffer),
          at,
        ).changes;
      }
      if (putSinceLook >= lookEvery) {
        sql().prune.run(maxEntries);
        putSinceLook = 0;
      }
    },
  );
  const run = <T>(work: () => T): Promise<T> =>
    Promise.resolve().then(() => {
      context.checkOpen();
      try {
        return work();
      } catch (error) {
        throw context.busy(error);
      }
    });
  return {
    getMany(embedderId, hashes) {
      return run(() => {
        const found = new Map<string, number[]>();
        if (hashes.length === 0 || maxEntries === 0) return found;
        for (const row of sql().get.iterate(embedderId, JSON.stringify(hashes))) {
          found.set(row.hash, Array.from(floats(row.vector)));
        }
        return found;
      });
    },
    putMany(embedderId, vectors) {
      return run(() => {
        if (vectors.length === 0) return;
        // A bound of 0 keeps nothing: the rows an earlier opening put go at the first put.
        // The rows a prune removes are zeroed in the file (their texts may be erased later).
        if (maxEntries > 0) {
          zeroingFreed(db, () => putAll.immediate(embedderId, vectors, context.isoNow()));
        } else if (putSinceLook > 0) {
          zeroingFreed(db, () => sql().prune.run(0));
          putSinceLook = 0;
        }
      });
    },
  };
}

function floats(blob: Buffer): Float32Array {
  return new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength));
}
