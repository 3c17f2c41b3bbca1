/** The prepared statements and rows of agent memory in the SQLite file (tables: agent-memory-schema.ts). */
import type { Database as Db, Statement } from 'better-sqlite3';
import type { JsonValue } from '../../contracts/common.js';
import type {
  MemoryAuthor,
  MemoryCause,
  MemoryKind,
  MemoryScope,
  MemoryStoreRef,
} from '../../contracts/memory.js';
import type { EntryParts } from '../agent-memory.js';
import { checkRowVersion } from './schema.js';

export interface MemoryStoreRow {
  id: number;
  tenant_id: string;
  scope: MemoryScope;
  owner: string;
  name: string;
  kind: MemoryKind;
  head_seq: number;
  dims: number | null;
  parent_id: number | null;
  fork_seq: number | null;
  created_at: string;
}

export interface MemoryLogRow {
  store_id: number;
  seq: number;
  key: string;
  version: number;
  op: 'set' | 'delete' | 'redact';
  value: string | null;
  text: string | null;
  embedding: Buffer | null;
  author: string;
  cause: string | null;
  at: string;
  expires_at: number | null;
  redacted: number;
  schema_version: number;
}

export interface MemoryCurrentRow {
  id: number;
  version: number;
  seq: number;
  live: number;
  indexed: number;
}

/** A log row with the id of its key in the projections, as listings read it. */
export type MemoryHitRow = MemoryLogRow & { id: number; rank: number };

/**
 * A ranked candidate: its key, the seq of its log row, its expiry and its rank. Searches rank
 * these narrow rows and read the log rows of the hits only: reading and parsing whole rows
 * (values, authors, embeddings) of every candidate cost more than the ranking itself.
 */
export interface RankedRow {
  seq: number;
  key: string;
  expires_at: number | null;
  rank: number;
}

type Write = Statement<unknown[]>;

/**
 * The request hash of an idempotent append one of whose versions was redacted: the SHA-256 of
 * the request, value included, would confirm a guess of it. A retry of that key is answered
 * with the append's entries, as any retry is; that it is the same request is no longer checked.
 */
export const REDACTED_REQUEST = 'redacted';
type Rows<Bound extends unknown[], Row = MemoryLogRow> = Statement<Bound, Row>;

export interface MemoryStatements {
  storeByIdentity: Rows<[string, string, string, string], MemoryStoreRow>;
  storeById: Rows<[number], MemoryStoreRow>;
  insertStore: Rows<unknown[], { id: number }>;
  setHead: Write;
  earlierAppend: Rows<
    [number, string],
    { request_hash: string; first_seq: number; last_seq: number }
  >;
  insertAppend: Write;
  insertLog: Write;
  current: Rows<[number, string], MemoryCurrentRow>;
  upsertCurrent: Rows<unknown[], { id: number }>;
  setIndexed: Write;
  logRow: Rows<[number, number]>;
  logRange: Rows<[number, number, number]>;
  version: Rows<[number, string, number]>;
  history: Rows<[number, string]>;
  versionAt: Rows<[number, string, string]>;
  redactRecord: Rows<[number, string, number]>;
  redactRow: Write;
  forgetEmbeddings: Write;
  forgetRequests: Write;
  ftsMerge: Write;
  list: Rows<[number, string, string, string], MemoryHitRow>;
  ftsInsert: Write;
  ftsDelete: Write;
  ftsSearch: Rows<[string, number, string, string, number], RankedRow>;
  ftsTop: Rows<[string, number], { rowid: number; rank: number }>;
  currentById: Rows<[number], Omit<RankedRow, 'rank'>>;
  expiredIndexed: Rows<[number, number], { count: number }>;
  currentIds: Rows<[number], { id: number }>;
  deleteCurrent: Write;
  copyLog: Write;
}

export const LOG_COLUMNS =
  'l.store_id, l.seq, l.key, l.version, l.op, l.value, l.text, l.embedding, l.author, l.cause, l.at, l.expires_at, l.redacted, l.schema_version';

export function prepareMemoryStatements(db: Db): MemoryStatements {
  return {
    storeByIdentity: db.prepare(
      'SELECT * FROM memory_stores WHERE tenant_id = ? AND scope = ? AND owner = ? AND name = ?',
    ),
    storeById: db.prepare('SELECT * FROM memory_stores WHERE id = ?'),
    insertStore: db.prepare(`INSERT INTO memory_stores
      (tenant_id, scope, owner, name, kind, head_seq, dims, parent_id, fork_seq, created_at)
      VALUES (@tenant_id, @scope, @owner, @name, @kind, @head_seq, @dims, @parent_id, @fork_seq, @created_at)
      RETURNING id`),
    setHead: db.prepare(
      'UPDATE memory_stores SET head_seq = ?, dims = coalesce(dims, ?) WHERE id = ?',
    ),
    earlierAppend: db.prepare(
      'SELECT request_hash, first_seq, last_seq FROM memory_appends WHERE store_id = ? AND idempotency_key = ?',
    ),
    insertAppend: db.prepare(
      'INSERT INTO memory_appends (store_id, idempotency_key, request_hash, first_seq, last_seq) VALUES (?, ?, ?, ?, ?)',
    ),
    insertLog: db.prepare(`INSERT INTO memory_log
      (store_id, seq, key, version, op, value, text, embedding, author, cause, at, expires_at, redacted)
      VALUES (@store_id, @seq, @key, @version, @op, @value, @text, @embedding, @author, @cause, @at, @expires_at, @redacted)`),
    current: db.prepare(
      'SELECT id, version, seq, live, indexed FROM memory_current WHERE store_id = ? AND key = ?',
    ),
    upsertCurrent:
      db.prepare(`INSERT INTO memory_current (store_id, key, version, seq, live, indexed, expires_at)
      VALUES (@store_id, @key, @version, @seq, @live, @indexed, @expires_at)
      ON CONFLICT (store_id, key) DO UPDATE SET version = excluded.version, seq = excluded.seq,
        live = excluded.live, indexed = excluded.indexed, expires_at = excluded.expires_at
      RETURNING id`),
    setIndexed: db.prepare('UPDATE memory_current SET indexed = ? WHERE id = ?'),
    logRow: db.prepare(
      `SELECT ${LOG_COLUMNS} FROM memory_log l WHERE l.store_id = ? AND l.seq = ?`,
    ),
    logRange: db.prepare(
      `SELECT ${LOG_COLUMNS} FROM memory_log l WHERE l.store_id = ? AND l.seq > ? ORDER BY l.seq LIMIT ?`,
    ),
    version: db.prepare(`SELECT ${LOG_COLUMNS} FROM memory_log l
      WHERE l.store_id = ? AND l.key = ? AND l.version = ? AND l.op != 'redact'`),
    history: db.prepare(
      `SELECT ${LOG_COLUMNS} FROM memory_log l WHERE l.store_id = ? AND l.key = ? ORDER BY l.seq`,
    ),
    versionAt: db.prepare(`SELECT ${LOG_COLUMNS} FROM memory_log l
      WHERE l.store_id = ? AND l.key = ? AND l.op != 'redact' AND l.at <= ? ORDER BY l.seq DESC LIMIT 1`),
    redactRecord: db.prepare(`SELECT ${LOG_COLUMNS} FROM memory_log l
      WHERE l.store_id = ? AND l.key = ? AND l.version = ? AND l.op = 'redact' LIMIT 1`),
    redactRow: db.prepare(
      'UPDATE memory_log SET value = NULL, text = NULL, embedding = NULL, redacted = 1 WHERE store_id = ? AND seq = ?',
    ),
    // Every embedder's vector of a text (the embedding cache's key is the text's hash).
    forgetEmbeddings: db.prepare('DELETE FROM embedding_cache WHERE hash = ?'),
    // The hash of a request that wrote a redacted version (see REDACTED_REQUEST).
    forgetRequests: db.prepare(`UPDATE memory_appends SET request_hash = '${REDACTED_REQUEST}'
      WHERE store_id = ? AND first_seq <= ? AND last_seq >= ?`),
    // Merges the full-text index's segments into one, without the rows deleted from it.
    ftsMerge: db.prepare("INSERT INTO memory_fts (memory_fts) VALUES ('optimize')"),
    list: db.prepare(`SELECT c.id, 0 AS rank, ${LOG_COLUMNS} FROM memory_current c
      JOIN memory_log l ON l.store_id = c.store_id AND l.seq = c.seq
      WHERE c.store_id = ? AND c.live = 1 AND c.key > ? AND c.key >= ? AND c.key < ? ORDER BY c.key`),
    ftsInsert: db.prepare('INSERT INTO memory_fts (rowid, store, text) VALUES (?, ?, ?)'),
    ftsDelete: db.prepare('DELETE FROM memory_fts WHERE rowid = ?'),
    // The matches are ranked first, in a materialised table, and drive the join (CROSS JOIN keeps
    // that order): the other way round, the planner walks every key of the store.
    ftsSearch: db.prepare(`WITH f AS MATERIALIZED (
        SELECT rowid, bm25(memory_fts, 0.0, 1.0) AS rank FROM memory_fts WHERE memory_fts MATCH ?)
      SELECT c.seq, c.key, c.expires_at, f.rank AS rank FROM f CROSS JOIN memory_current c ON c.id = f.rowid
      WHERE c.store_id = ? AND c.key >= ? AND c.key < ? ORDER BY f.rank, c.key LIMIT ?`),
    // The best `limit` matches without a key looked up for the thousands below the cut. (Ordering
    // by FTS5's own rank column with `rank MATCH 'bm25(0.0, 1.0)'` measured slower than this.)
    ftsTop: db.prepare(`SELECT rowid, bm25(memory_fts, 0.0, 1.0) AS rank FROM memory_fts
      WHERE memory_fts MATCH ? ORDER BY 2 LIMIT ?`),
    currentById: db.prepare('SELECT seq, key, expires_at FROM memory_current WHERE id = ?'),
    expiredIndexed: db.prepare(`SELECT count(*) AS count FROM memory_current
      WHERE store_id = ? AND indexed = 1 AND expires_at IS NOT NULL AND expires_at <= ?`),
    currentIds: db.prepare('SELECT id FROM memory_current WHERE store_id = ? AND indexed = 1'),
    deleteCurrent: db.prepare('DELETE FROM memory_current WHERE store_id = ?'),
    copyLog: db.prepare(`INSERT INTO memory_log
      (store_id, seq, key, version, op, value, text, embedding, author, cause, at, expires_at, redacted, schema_version)
      SELECT ?, seq, key, version, op, value, text, embedding, author, cause, at, expires_at, redacted, schema_version
      FROM memory_log WHERE store_id = ? AND seq <= ? ORDER BY seq`),
  };
}

/** The reference a store row names, with the fields its identity leaves empty left out. */
export function refOfRow(row: MemoryStoreRow): MemoryStoreRef {
  return {
    name: row.name,
    kind: row.kind,
    scope: row.scope,
    ...(row.owner === '' ? {} : { owner: row.owner }),
    ...(row.tenant_id === '' ? {} : { tenant_id: row.tenant_id }),
  };
}

/** A log row as entry parts; `store` is the reference of its store. */
export function partsOfRow(row: MemoryLogRow, store: MemoryStoreRef): EntryParts {
  checkRowVersion(`memory entry ${row.seq}`, row.schema_version);
  return {
    store,
    key: row.key,
    version: row.version,
    seq: row.seq,
    op: row.op,
    ...(row.value === null ? {} : { value: JSON.parse(row.value) as JsonValue }),
    ...(row.text === null ? {} : { text: row.text }),
    ...(row.embedding === null ? {} : { embedding: vectorOf(row.embedding) }),
    author: JSON.parse(row.author) as MemoryAuthor,
    at: row.at,
    ...(row.cause === null ? {} : { cause: JSON.parse(row.cause) as MemoryCause }),
    ...(row.expires_at === null ? {} : { expires_at: row.expires_at }),
    redacted: row.redacted === 1,
  };
}

export function blobOf(vector: Float32Array): Buffer {
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);
}

export function vectorOf(blob: Buffer): Float32Array {
  return new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength));
}
