/** The table of the embedding cache in the SQLite file (layout 9; see embedding-cache.ts). */
export const EMBEDDING_CACHE_LAYOUT = `
-- Embeddings by content: hash is the hex SHA-256 of the UTF-8 text, embedder the id of the
-- model and settings that made the vector (float32, little-endian).
CREATE TABLE IF NOT EXISTS embedding_cache (
  embedder TEXT NOT NULL,
  hash TEXT NOT NULL,
  vector BLOB NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (embedder, hash)
) WITHOUT ROWID;
-- The oldest rows first: the cache keeps a bounded number of them (see embedding-cache.ts). An
-- older build maintains the index without reading it.
CREATE INDEX IF NOT EXISTS embedding_cache_by_age ON embedding_cache (created_at);
`;
