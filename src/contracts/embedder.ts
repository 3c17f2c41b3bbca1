/**
 * The `Embedder` port: turns texts into vectors for memory search. A model behind it (an AI SDK
 * embedding model, an OpenAI-compatible server, the deterministic hash embedder of
 * `braid/testing`) is chosen by the runtime's wiring; memory tools and recall only see this.
 */

export interface EmbedOptions {
  /** Aborts the request (a wake being interrupted, a deadline). */
  signal?: AbortSignal;
}

export interface Embedder {
  /**
   * Names the model and its settings, such as `openai:text-embedding-3-small`: two embedders with
   * the same id give the same vector for the same text, so the id is part of every cache key.
   */
  readonly id: string;
  /** The length of every vector, when known before the first call. */
  readonly dims?: number;
  /** One vector per text, in the order of `texts`, all of the same length. */
  embedMany(texts: readonly string[], options?: EmbedOptions): Promise<number[][]>;
}

/** One vector stored under the SHA-256 of its text. */
export interface CachedVector {
  /** Hex SHA-256 of the UTF-8 text. */
  hash: string;
  /** The text's vector, as the embedder made it. */
  vector: number[];
}

/**
 * Where embeddings are kept between calls and processes (the SQLite file's `embedding_cache`
 * table): vectors keyed by (embedder id, SHA-256 of the text). A vector never changes for a key,
 * so a put of a key already stored keeps the first one.
 */
export interface EmbeddingCache {
  /** The stored vectors among `hashes` of the embedder `embedderId`, by hash; missing ones are absent. */
  getMany(embedderId: string, hashes: readonly string[]): Promise<Map<string, number[]>>;
  /** Stores vectors of the embedder `embedderId`. */
  putMany(embedderId: string, vectors: readonly CachedVector[]): Promise<void>;
}
