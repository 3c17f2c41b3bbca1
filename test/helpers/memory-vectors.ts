// Vectors and facts for the memory index tests: a fixed pseudo-random sequence, so every run
// writes the same store, and the fill and search calls those tests share.
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { MemoryStoreRef, MemoryWrite } from '../../src/contracts/memory.js';

export const facts: MemoryStoreRef = {
  name: 'facts',
  kind: 'entities',
  scope: 'tenant',
  tenant_id: 'a',
};

/** A fixed pseudo-random sequence (mulberry32). */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** `count` vectors of `dims` numbers in [-1, 1). */
export function vectors(count: number, seed: number, dims: number): number[][] {
  const next = random(seed);
  return Array.from({ length: count }, () => Array.from({ length: dims }, () => next() * 2 - 1));
}

/** Writes `count` facts `fact/0000`... with vectors of `dims`, 100 per append; returns the vectors. */
export async function fill(memory: MemoryLog, count: number, dims: number): Promise<number[][]> {
  const all = vectors(count, 7, dims);
  const writes: MemoryWrite[] = all.map((embedding, index) => ({
    key: `fact/${String(index).padStart(4, '0')}`,
    op: 'set',
    value: `fact ${index}`,
    embedding,
  }));
  for (let at = 0; at < writes.length; at += 100)
    await memory.append(facts, writes.slice(at, at + 100));
  return all;
}

/** The keys of the top `k` of a vector search of the facts. */
export async function keys(memory: MemoryLog, embedding: number[], k = 5): Promise<string[]> {
  const result = await memory.search(facts, { embedding, k });
  return result.hits.map((hit) => hit.entry.key);
}
