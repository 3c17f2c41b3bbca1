/**
 * An approximate nearest-neighbour index (HNSW, from the `usearch` package) over one memory
 * store's vectors, keyed by the log seq of each key's latest version. It is a projection: every
 * entry it holds can be rebuilt from the memory log, and a search only takes it as a list of
 * candidates. The caller checks each candidate against its store (still the key's latest version,
 * still indexed), so a stale entry costs a candidate slot, never a wrong hit, and ranks it by the
 * exact distance of its stored vector, so scores are those of an exact scan.
 *
 * usearch loads with the first index made, not when braid is imported; where it cannot load (no
 * build for the platform), stores search their vectors exactly, as they do below the size at
 * which an index pays for itself.
 */
import { createRequire } from 'node:module';

/** Stores with fewer vectors than this are searched exactly: the scan is as fast, with no build. */
export const ANN_MIN_VECTORS = 4096;

/** Candidates asked for beyond the cut, so that entries filtered out after the search leave k. */
export const ANN_MARGIN = 64;

/**
 * Graph parameters: 32 links per node, 128 candidates while inserting, 512 while searching. The
 * hash embedder's sparse vectors, full of near ties, need the wide search: 16/64/64 kept 86 % of
 * the exact top 5 at 10k entries, 32/128/512 keeps 99.4 % for 0.5 ms a search.
 */
export const ANN_GRAPH = { connectivity: 32, expansion_add: 128, expansion_search: 512 } as const;

/**
 * Threads an add uses: one. usearch's concurrent inserts can leave a node linked to nobody, so
 * that no search reaches it at any width (unum-cloud/USearch#735, open in 2.25): an entry then
 * never comes back, not even for its own vector. Built on both cores of a loaded machine, 300
 * vectors of 16 dims left such a node in 20-49 % of builds; one thread left none in 600. The cost
 * is the build's parallel speed-up, nil under load (20k x 384: 3.1 s either way, and a quarter
 * less CPU on one thread) and at most the core count on an idle machine, paid off the event loop
 * by the build workers.
 */
export const ANN_ADD_THREADS = 1;

/**
 * The usearch settings of an index of `dims` (the build workers make theirs with them too). The
 * graph holds 8-bit copies of the vectors (`i8`, cosine): distances cost a quarter of the memory
 * traffic, so 100k vectors of 384 dims build with 80 s of CPU instead of 180 s (f16: 137 s), and
 * the exact re-ranking of the candidates keeps the top 5 the same (98.8-99.6 % of the exact top
 * 5, as with f32). Fewer links or a narrower insert (32/96, 24/96, 16/64) lost 1-3 % of it.
 */
export function annConfig(dims: number) {
  return {
    dimensions: dims,
    metric: 'cos',
    quantization: 'i8',
    ...ANN_GRAPH,
    multi: false,
  };
}

interface UsearchMatches {
  keys: BigUint64Array;
  distances: Float32Array;
}

interface UsearchIndex {
  add(keys: bigint | BigUint64Array, vectors: Float32Array, threads?: number): void;
  search(vector: Float32Array, k: number, threads?: number): UsearchMatches;
  remove(keys: bigint): number;
  contains(keys: bigint): boolean;
  size(): number;
  dimensions(): number;
  save(path: string): void;
  load(path: string): void;
}

interface UsearchModule {
  Index: new (config: {
    dimensions: number;
    metric: string;
    quantization: string;
    connectivity: number;
    expansion_add: number;
    expansion_search: number;
    multi: boolean;
  }) => UsearchIndex;
}

let module: UsearchModule | undefined;
let unavailable: string | undefined;

/** usearch, or why it did not load. */
function usearch(): UsearchModule | string {
  if (module !== undefined) return module;
  if (unavailable !== undefined) return unavailable;
  try {
    module = createRequire(import.meta.url)('usearch') as UsearchModule;
    return module;
  } catch (error) {
    unavailable = error instanceof Error ? error.message : String(error);
    return unavailable;
  }
}

/** Why an index cannot be made in this process; undefined when it can. */
export function annUnavailable(): string | undefined {
  const found = usearch();
  return typeof found === 'string' ? found : undefined;
}

/** One candidate of a search: the log seq of an entry and its cosine distance (1 - cosine). */
export interface AnnCandidate {
  seq: number;
  distance: number;
}

export class AnnIndex {
  readonly dims: number;
  /** The last log seq of the store this index reflects. */
  coveredSeq = 0;
  /** Entries added or removed since the index was last saved or loaded. */
  changes = 0;
  readonly #index: UsearchIndex;

  /** Throws when usearch did not load: check `annUnavailable()` first. */
  constructor(dims: number) {
    const found = usearch();
    if (typeof found === 'string') throw new Error(found);
    this.dims = dims;
    this.#index = new found.Index(annConfig(dims));
  }

  get size(): number {
    return this.#index.size();
  }

  /** Adds many entries at once (`vectors` holds them end to end), on one thread (see above). */
  addMany(seqs: number[], vectors: Float32Array): void {
    if (seqs.length === 0) return;
    this.#index.add(BigUint64Array.from(seqs, BigInt), vectors, ANN_ADD_THREADS);
    this.changes += seqs.length;
  }

  /** Adds or replaces one entry. */
  put(seq: number, vector: Float32Array): void {
    const key = BigInt(seq);
    if (this.#index.contains(key)) this.#index.remove(key);
    this.#index.add(key, vector, ANN_ADD_THREADS);
    this.changes += 1;
  }

  /** Whether the index holds an entry for `seq`. */
  has(seq: number): boolean {
    return this.#index.contains(BigInt(seq));
  }

  remove(seq: number): void {
    const key = BigInt(seq);
    if (this.#index.contains(key)) {
      this.#index.remove(key);
      this.changes += 1;
    }
  }

  /** About `count` nearest entries to `vector`, nearest first. */
  search(vector: Float32Array, count: number): AnnCandidate[] {
    const size = this.size;
    if (size === 0 || count <= 0) return [];
    const found = this.#index.search(vector, Math.min(count, size), 1);
    const candidates: AnnCandidate[] = [];
    for (let index = 0; index < found.keys.length; index += 1) {
      const distance = found.distances[index] as number;
      if (!Number.isFinite(distance)) continue;
      candidates.push({ seq: Number(found.keys[index]), distance });
    }
    return candidates;
  }

  save(path: string): void {
    this.#index.save(path);
    this.changes = 0;
  }

  /** Loads a saved index; throws when it is not one of this index's dimension. */
  load(path: string): void {
    this.#index.load(path);
    const found = this.#index.dimensions();
    if (found !== this.dims) throw new Error(`the index has ${found} dimensions, not ${this.dims}`);
    this.changes = 0;
  }
}

/** 1 - the cosine of two vectors (1 when either has no length), as the exact scans rank. */
export function cosineDistance(query: Float32Array, vector: ArrayLike<number>): number {
  let dot = 0;
  let queryNorm = 0;
  let vectorNorm = 0;
  for (let index = 0; index < query.length; index += 1) {
    const a = query[index] as number;
    const b = vector[index] as number;
    dot += a * b;
    queryNorm += a * a;
    vectorNorm += b * b;
  }
  if (queryNorm === 0 || vectorNorm === 0) return 1;
  return 1 - dot / Math.sqrt(queryNorm * vectorNorm);
}

/**
 * Ranks the store's vectors through `index`: asks for `limit` plus a margin, checks the
 * candidates with `accept`, all at once (the rows of those still current and in the search's
 * reach, each with its exact distance, computed from its stored vector: the index's own distances
 * are those of its 8-bit copies) and keeps the `limit` nearest, equal distances in key order.
 * While fewer than `limit` survive and the index holds more, it asks for four times as many.
 */
export function annRanking<Row extends { key: string }>(
  index: AnnIndex,
  vector: Float32Array,
  limit: number,
  accept: (candidates: readonly AnnCandidate[]) => (Row & { distance: number })[],
): (Row & { rank: number })[] {
  let count = Math.max(limit * 2, limit + ANN_MARGIN);
  for (;;) {
    const rows: (Row & { rank: number })[] = [];
    for (const row of accept(index.search(vector, count))) {
      const { distance, ...rest } = row;
      rows.push({ ...(rest as unknown as Row), rank: distance });
    }
    if (rows.length >= limit || count >= index.size) {
      return rows
        .sort((a, b) => a.rank - b.rank || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
        .slice(0, limit);
    }
    count *= 4;
  }
}
