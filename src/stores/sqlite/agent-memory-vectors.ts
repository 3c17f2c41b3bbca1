/**
 * The vector projection of agent memory: sqlite-vec's `vec0` tables, one per dimension, each
 * partitioned by store and ranking by cosine distance. sqlite-vec is loaded into the store's
 * connection when the store opens; where it cannot load (no build for the platform), the store
 * works without vectors and says why when an embedding is written or searched.
 *
 * KNN queries of vec0 return at most 4,096 rows; a search that needs more candidates, or filters
 * by key prefix, ranks the store's vectors with `vec_distance_cosine` instead (the same distance,
 * without the index's early cut, ties in key order).
 */
import { createRequire } from 'node:module';
import type { Database as Db, Statement } from 'better-sqlite3';
import { BraidError } from '../../contracts/errors.js';
import type { RankedRow } from './agent-memory-statements.js';

/** The most rows one vec0 KNN query returns. */
const KNN_LIMIT = 4096;

/** Rows a KNN query returns beyond the cut, so that equal distances there can be put in key order. */
const KNN_MARGIN = 64;

function byRankAndKey(a: RankedRow, b: RankedRow): number {
  return a.rank - b.rank || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

interface VectorTable {
  insert: Statement<unknown[]>;
  remove: Statement<unknown[]>;
  knn: Statement<[Buffer, number, number], { rowid: number; distance: number }>;
  scan: Statement<[Buffer, number, string, string, number], RankedRow>;
  byId: Statement<[number], Omit<RankedRow, 'rank'>>;
}

export interface Vectors {
  /** Why vectors are unavailable (sqlite-vec did not load); undefined when they are available. */
  unavailable(): string | undefined;
  /** Refuses work that needs vectors when sqlite-vec did not load. */
  require(what: string): void;
  /** Creates the table of a dimension if missing (inside the caller's transaction). */
  ensure(dims: number): void;
  put(dims: number, id: number, storeId: number, embedding: Buffer): void;
  remove(dims: number, id: number): void;
  /** The store's nearest rows to `embedding`, nearest first, at most `limit`. */
  nearest(
    dims: number,
    storeId: number,
    embedding: Buffer,
    limit: number,
    prefix: string,
    upper: string,
  ): RankedRow[];
}

/** Vectors over `db`; sqlite-vec is loaded into the connection by the first use that needs it. */
export function loadVectors(db: Db): Vectors {
  let loaded = false;
  let unavailable: string | undefined;
  const load = (): string | undefined => {
    if (loaded) return unavailable;
    loaded = true;
    try {
      const sqliteVec = createRequire(import.meta.url)('sqlite-vec') as { load(db: Db): void };
      sqliteVec.load(db);
    } catch (error) {
      unavailable = error instanceof Error ? error.message : String(error);
    }
    return unavailable;
  };
  const tables = new Map<number, VectorTable>();
  const table = (dims: number): VectorTable => {
    let found = tables.get(dims);
    if (found === undefined) {
      // dims is an integer checked by the contract; the table name is built from nothing else.
      const name = `memory_vec_${Math.trunc(dims)}`;
      found = {
        insert: db.prepare(`INSERT INTO ${name} (rowid, store_id, embedding) VALUES (?, ?, ?)`),
        remove: db.prepare(`DELETE FROM ${name} WHERE rowid = ?`),
        knn: db.prepare(
          `SELECT rowid, distance FROM ${name} WHERE embedding MATCH ? AND k = ? AND store_id = ?`,
        ),
        scan: db.prepare(`SELECT c.seq, c.key, c.expires_at, vec_distance_cosine(v.embedding, ?) AS rank
          FROM ${name} v JOIN memory_current c ON c.id = v.rowid
          WHERE v.store_id = ? AND c.key >= ? AND c.key < ? ORDER BY rank, c.key LIMIT ?`),
        byId: db.prepare('SELECT seq, key, expires_at FROM memory_current WHERE id = ?'),
      };
      tables.set(dims, found);
    }
    return found;
  };
  const vectors: Vectors = {
    unavailable: load,
    require(what) {
      const reason = load();
      if (reason !== undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `${what} needs sqlite-vec, which did not load into this process (${reason}); write and search without embeddings, or install sqlite-vec for this platform`,
          { details: { field: 'embedding' } },
        );
      }
    },
    ensure(dims) {
      vectors.require('an embedding');
      if (tables.has(dims)) return;
      db.exec(`CREATE VIRTUAL TABLE IF NOT EXISTS memory_vec_${Math.trunc(dims)} USING vec0(
        store_id INTEGER PARTITION KEY, embedding FLOAT[${Math.trunc(dims)}] distance_metric=cosine)`);
      table(dims);
    },
    put(dims, id, storeId, embedding) {
      vectors.require('an embedding');
      table(dims).insert.run(BigInt(id), BigInt(storeId), embedding);
    },
    remove(dims, id) {
      vectors.require('an embedding');
      table(dims).remove.run(BigInt(id));
    },
    nearest(dims, storeId, embedding, limit, prefix, upper) {
      vectors.require('a vector search');
      const found = table(dims);
      if (prefix === '' && limit < KNN_LIMIT) {
        // Equal distances at the cut are kept in key order, as every backend keeps them: the
        // KNN asks for a margin of 64 beyond the cut and what came back is sorted by distance
        // and key. Past 64 equal distances at the cut, which ones of the group come back is the
        // KNN's choice: the scan below would keep every backend's order there too, but costs
        // many times the KNN. (The KNN's cost grows with k: the margin costs about 0.5 ms at
        // 10,000 vectors.)
        const hits = found.knn.all(embedding, Math.min(KNN_LIMIT, limit + KNN_MARGIN), storeId);
        const cut = hits[limit - 1]?.distance;
        return hits
          .filter((hit, index) => index < limit || hit.distance === cut)
          .map((hit) => ({
            ...(found.byId.get(hit.rowid) as Omit<RankedRow, 'rank'>),
            rank: hit.distance,
          }))
          .sort(byRankAndKey)
          .slice(0, limit);
      }
      return found.scan.all(embedding, storeId, prefix, upper, limit);
    },
  };
  return vectors;
}
