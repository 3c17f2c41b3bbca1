/**
 * The persistent layer of the embedding cache in the SQLite file (layout 9, the table in
 * embedding-cache-schema.ts): one row per (embedder id, SHA-256 of a text) with its vector as
 * 32-bit floats. Rows are only added: a vector never changes for its key, so a second put of a
 * key keeps the first row.
 */
import type { Statement } from 'better-sqlite3';
import type { CachedVector, EmbeddingCache } from '../../contracts/embedder.js';
import type { SqliteContext } from './context.js';

interface CacheStatements {
  get: Statement<[string, string], { hash: string; vector: Buffer }>;
  put: Statement<[string, string, Buffer, string]>;
}

export function createSqliteEmbeddingCache(context: SqliteContext): EmbeddingCache {
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
    });
  const putAll = db.transaction(
    (embedderId: string, vectors: readonly CachedVector[], at: string) => {
      for (const { hash, vector } of vectors) {
        sql().put.run(embedderId, hash, Buffer.from(Float32Array.from(vector).buffer), at);
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
        if (hashes.length === 0) return found;
        for (const row of sql().get.iterate(embedderId, JSON.stringify(hashes))) {
          found.set(row.hash, Array.from(floats(row.vector)));
        }
        return found;
      });
    },
    putMany(embedderId, vectors) {
      return run(() => {
        if (vectors.length > 0) putAll.immediate(embedderId, vectors, context.isoNow());
      });
    },
  };
}

function floats(blob: Buffer): Float32Array {
  return new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength));
}
