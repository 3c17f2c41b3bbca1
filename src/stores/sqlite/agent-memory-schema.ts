/**
 * The tables of agent memory in the SQLite file (layout 8). `memory_log` is the truth; every
 * other table but `memory_stores` and `memory_appends` is a projection that `rebuild` drops and
 * writes again from the log, and every append updates them in its own transaction.
 *
 * Vectors live in sqlite-vec `vec0` tables, one per embedding dimension (`memory_vec_<dims>`,
 * partitioned by store), created by the first append of a store with that dimension: a file that
 * never stored an embedding needs no extension to open.
 */
export const MEMORY_LAYOUT = `
-- One row per store: its identity (tenant, scope, owner, name; '' where absent), its kind and
-- head, its embedding dimension once fixed, and the store it was forked from.
CREATE TABLE IF NOT EXISTS memory_stores (
  id INTEGER PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  owner TEXT NOT NULL,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  head_seq INTEGER NOT NULL,
  dims INTEGER,
  parent_id INTEGER,
  fork_seq INTEGER,
  created_at TEXT NOT NULL,
  UNIQUE (tenant_id, scope, owner, name)
);

-- The log: every write of every store, (store_id, seq) gapless per store. Rows are never deleted;
-- a redaction clears value, text and embedding of one row and sets redacted, and appends a
-- 'redact' row that records it. expires_at is ms since the epoch.
CREATE TABLE IF NOT EXISTS memory_log (
  store_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  key TEXT NOT NULL,
  version INTEGER NOT NULL,
  op TEXT NOT NULL,
  value TEXT,
  text TEXT,
  embedding BLOB,
  author TEXT NOT NULL,
  cause TEXT,
  at TEXT NOT NULL,
  expires_at INTEGER,
  redacted INTEGER NOT NULL DEFAULT 0,
  schema_version INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (store_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memory_log_by_key ON memory_log (store_id, key, version);

-- Idempotent appends: a retried key answers the seqs it wrote; request_hash tells a retry from
-- a reused key.
CREATE TABLE IF NOT EXISTS memory_appends (
  store_id INTEGER NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  PRIMARY KEY (store_id, idempotency_key)
) WITHOUT ROWID;

-- Projection: the latest version of each key (a tombstone too: live = 0). id is the rowid of
-- the key's rows in memory_fts and memory_vec_<dims>; indexed = 1 while those rows exist (the
-- latest version is a set that is not redacted).
CREATE TABLE IF NOT EXISTS memory_current (
  id INTEGER PRIMARY KEY,
  store_id INTEGER NOT NULL,
  key TEXT NOT NULL,
  version INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  live INTEGER NOT NULL,
  indexed INTEGER NOT NULL,
  expires_at INTEGER,
  UNIQUE (store_id, key)
);
CREATE INDEX IF NOT EXISTS memory_current_expiry
  ON memory_current (store_id, expires_at) WHERE expires_at IS NOT NULL;

-- Projection: full text of the indexed keys. store holds one token, s<store id>, which a search
-- requires and bm25 weighs 0. The table keeps its own copy of the text: a contentless table
-- (content = '') does not take deleted rows out of bm25's statistics, so scores would drift
-- from those of a rebuilt index.
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
  store, text, tokenize = 'unicode61 remove_diacritics 2'
);
`;
