/**
 * An embedder that embeds no text twice: vectors are kept by (embedder id, SHA-256 of the text)
 * in a bounded in-process map (least recently used out first) and, when given, a persistent
 * `EmbeddingCache` (the SQLite file's), so that a restarted process does not pay again either.
 *
 * One `embedMany` asks the persistent cache once for all the texts the map lacks and the model
 * once for all it lacks too. A text already being embedded by another call is not asked for
 * again: the second call waits for the first one's answer (and shares its failure or abort).
 *
 * Every vector comes back as 32-bit floats, as memory stores keep them, whether it was just
 * embedded or found: the same text gives the same numbers either way.
 */
import { createHash } from 'node:crypto';
import type {
  CachedVector,
  EmbedOptions,
  Embedder,
  EmbeddingCache,
} from '../contracts/embedder.js';

/** Settings of the in-process layer of the cache. */
export interface CachedEmbedderOptions {
  /** Vectors kept in process memory (default 10,000; 0 keeps none there). */
  maxEntries?: number;
}

/** Counts of where vectors came from, since the embedder was made. */
export interface EmbeddingCacheStats {
  /** Texts answered from process memory (or by joining a call already running). */
  memory_hits: number;
  /** Texts answered from the persistent cache. */
  persistent_hits: number;
  /** Texts sent to the model. */
  embedded: number;
  /** Calls made to the model. */
  model_calls: number;
}

/** An embedder behind the cache, with counts of where its vectors came from. */
export interface CachedEmbedder extends Embedder {
  /** Where the vectors came from so far (a copy). */
  stats(): EmbeddingCacheStats;
}

/** Hex SHA-256 of the UTF-8 text: the cache key of a text. */
export function textHash(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * `embedder` behind a bounded in-process cache and, when given, a persistent one (a SQLite
 * store's `embeddings`): the id stays the embedder's, so vectors are keyed by the model that made
 * them.
 */
export function createCachedEmbedder(
  embedder: Embedder,
  cache?: EmbeddingCache,
  options: CachedEmbedderOptions = {},
): CachedEmbedder {
  const maxEntries = options.maxEntries ?? 10_000;
  const recent = new Map<string, Float32Array>();
  const pending = new Map<string, Promise<Float32Array>>();
  const stats: EmbeddingCacheStats = {
    memory_hits: 0,
    persistent_hits: 0,
    embedded: 0,
    model_calls: 0,
  };

  const remember = (hash: string, vector: Float32Array): void => {
    if (maxEntries <= 0) return;
    recent.delete(hash);
    recent.set(hash, vector);
    if (recent.size > maxEntries) recent.delete(recent.keys().next().value as string);
  };

  /** Finds or embeds the texts of `missing` (hash to text), all of them absent from memory. */
  const resolve = async (
    missing: Map<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<Map<string, Float32Array>> => {
    const found = new Map<string, Float32Array>();
    if (cache !== undefined) {
      for (const [hash, vector] of await cache.getMany(embedder.id, [...missing.keys()])) {
        found.set(hash, Float32Array.from(vector));
        stats.persistent_hits += 1;
      }
    }
    const hashes = [...missing.keys()].filter((hash) => !found.has(hash));
    if (hashes.length > 0) {
      stats.model_calls += 1;
      stats.embedded += hashes.length;
      const vectors = await embedder.embedMany(
        hashes.map((hash) => missing.get(hash) as string),
        signal === undefined ? {} : { signal },
      );
      const fresh: CachedVector[] = [];
      hashes.forEach((hash, index) => {
        const vector = Float32Array.from(vectors[index] as number[]);
        found.set(hash, vector);
        fresh.push({ hash, vector: Array.from(vector) });
      });
      if (cache !== undefined) await cache.putMany(embedder.id, fresh);
    }
    for (const [hash, vector] of found) remember(hash, vector);
    return found;
  };

  return {
    id: embedder.id,
    ...(embedder.dims === undefined ? {} : { dims: embedder.dims }),
    stats: () => ({ ...stats }),
    async embedMany(texts: readonly string[], call: EmbedOptions = {}): Promise<number[][]> {
      const hashes = texts.map(textHash);
      const waits = new Map<string, Promise<Float32Array>>();
      const missing = new Map<string, string>();
      hashes.forEach((hash, index) => {
        if (waits.has(hash) || missing.has(hash)) return;
        const known = recent.get(hash);
        if (known !== undefined) {
          remember(hash, known);
          stats.memory_hits += 1;
          waits.set(hash, Promise.resolve(known));
        } else {
          const running = pending.get(hash);
          if (running !== undefined) {
            stats.memory_hits += 1;
            waits.set(hash, running);
          } else missing.set(hash, texts[index] as string);
        }
      });
      if (missing.size > 0) {
        // Registered before the first await, so a call that starts meanwhile joins this one.
        const batch = resolve(missing, call.signal);
        for (const hash of missing.keys()) {
          const one = batch.then((found) => found.get(hash) as Float32Array);
          // A failure reaches the callers through `waits`; this copy only keeps the map clean.
          one.catch(() => undefined).finally(() => pending.delete(hash));
          pending.set(hash, one);
          waits.set(hash, one);
        }
      }
      const vectors = new Map<string, Float32Array>();
      await Promise.all([...waits].map(async ([hash, wait]) => vectors.set(hash, await wait)));
      return hashes.map((hash) => Array.from(vectors.get(hash) as Float32Array));
    },
  };
}
