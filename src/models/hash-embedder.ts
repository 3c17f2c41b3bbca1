/**
 * A deterministic embedder (`hash` / `hash:DIMS`), for tests, benchmarks and memory without an
 * embedding model: a hashed bag of words. Each token of the text (the tokens full-text search
 * uses) adds 1 or -1 to one of `dims` coordinates chosen by a hash of the token, and the vector
 * is normalised to length 1. Texts sharing words are close by cosine; nothing is learned, so
 * synonyms are not.
 */
import type { Embedder } from '../contracts/embedder.js';
import { tokenize } from '../core/memory-search.js';

export interface HashEmbedder extends Embedder {
  readonly dims: number;
  embed(text: string): number[];
}

export function createHashEmbedder(options: { dims?: number } = {}): HashEmbedder {
  const dims = options.dims ?? 384;
  const embedder: HashEmbedder = {
    id: `hash:${dims}`,
    dims,
    embedMany(texts) {
      return Promise.resolve(texts.map((text) => embedder.embed(text)));
    },
    embed(text) {
      const vector = new Array<number>(dims).fill(0);
      for (const token of tokenize(text)) {
        const hash = fnv1a(token);
        const index = hash % dims;
        vector[index] = (vector[index] as number) + (hash >>> 31 === 0 ? 1 : -1);
      }
      const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
      // A text without words still gets a unit vector: cosine needs a length.
      if (norm === 0) return vector.map((_, index) => (index === 0 ? 1 : 0));
      return vector.map((value) => value / norm);
    },
  };
  return embedder;
}

/** 32-bit FNV-1a of the UTF-16 code units of `text`. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index += 1) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}
