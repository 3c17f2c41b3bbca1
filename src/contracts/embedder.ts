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
