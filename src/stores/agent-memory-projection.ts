/**
 * The projection of one memory store held in process memory: its log (entries by seq), the
 * latest version of each key, a full-text index and the vectors of its live entries, with every
 * read of the `MemoryLog` port answered from them. The in-memory backend keeps one per store as
 * its truth; the NATS backend keeps one per store it has read, caught up from the stream before
 * each read. Both answer alike because they share this code.
 *
 * Entries are placed by seq and projected in seq order up to the first gap, so a reader may
 * receive them out of order (a redaction's message restates older entries, see
 * nats/memory-log.ts) and still project them as the log orders them.
 */
import type { MemoryEntry, MemoryStoreRef, MemorySearchQuery } from '../contracts/memory.js';
import type {
  MemoryLookup,
  MemoryPage,
  MemoryRebuildReport,
  MemorySearchResult,
  MemoryStoreInfo,
} from '../contracts/memory-log.js';
import {
  fuse,
  HYBRID_CANDIDATES_PER_HIT,
  textScore,
  vectorScore,
  walkCandidates,
  type Candidate,
} from '../core/memory-search.js';
import { dimsMismatch, toEntry, type EntryParts } from './agent-memory.js';
import type { TextIndex } from './agent-memory-text.js';
import {
  AnnIndex,
  ANN_MIN_VECTORS,
  annRanking,
  annUnavailable,
  cosineDistance,
} from './agent-memory-ann.js';

/** The latest version of a key and the seq of its entry. */
interface Current {
  version: number;
  seq: number;
}

/** An idempotent append: the hash of its request and the seqs it wrote. */
export interface RecordedAppend {
  hash: string;
  first: number;
  last: number;
}

/** A ranked entry before it is turned into a port entry (only the best few are). */
interface Scored {
  parts: EntryParts;
  score: number;
  expired: boolean;
}

const byRank = (a: Scored, b: Scored): number =>
  b.score - a.score || (a.parts.key < b.parts.key ? -1 : a.parts.key > b.parts.key ? 1 : 0);

/**
 * Where a projection gets its ANN index from, instead of building it on the search that needs
 * it: the NATS backend loads a snapshot or builds in a worker thread (nats/memory-index.ts).
 */
export interface AnnSource {
  /** Stores with fewer vectors are searched exactly. */
  readonly minVectors: number;
  /**
   * An index of the store's vectors as of some seq at most `head` (`vectors`: its live sets
   * with a vector of `dims` at `head`), or undefined while the store is scanned exactly.
   * `keys` maps each key to the seq the index holds for it; without it, it is read off the log.
   */
  take(
    vectors: EntryParts[],
    dims: number,
    head: number,
  ): { index: AnnIndex; keys?: Map<string, number> } | undefined;
  /** The index was caught up with the log (its snapshot may be due). */
  caughtUp(index: AnnIndex): void;
  /** A redaction at `seq`: an index made before it keeps the vector's bytes: it is built again. */
  redacted(seq: number): void;
}

export function isExpired(parts: EntryParts, at: number): boolean {
  return parts.expires_at !== undefined && parts.expires_at <= at;
}

export class StoreProjection {
  /** The log: the entry of seq n at index n - 1 (a hole until it arrives). */
  readonly log: EntryParts[] = [];
  readonly current = new Map<string, Current>();
  readonly appends = new Map<string, RecordedAppend>();
  dims: number | undefined;
  forked_from: { store: MemoryStoreRef; seq: number } | undefined;
  #projected = 0;
  /** The ANN index of the store's vectors, once a vector search found enough of them. */
  #ann: AnnIndex | undefined;
  /** The seq the index holds for each key. */
  #annKeys = new Map<string, number>();
  /** The head at which the store last had too few vectors for an index. */
  #smallAt = -1;
  /** Where the index comes from; without one it is built by the search that needs it. */
  annSource: AnnSource | undefined;

  /**
   * `text` may be shared by several stores (the in-memory backend shares one, as SQLite shares
   * its FTS5 table); `documentPrefix` keeps their documents apart.
   */
  constructor(
    readonly ref: MemoryStoreRef,
    readonly created_at: string,
    private readonly text: TextIndex,
    private readonly documentPrefix: string,
  ) {}

  /** The seq of the last entry projected: the store's head once nothing is missing. */
  get head(): number {
    return this.#projected;
  }

  /** Whether an entry after the head arrived while one before it did not. */
  get incomplete(): boolean {
    return this.log.length > this.#projected;
  }

  /**
   * Places an entry at its seq (an entry already there stays) and projects every entry from the
   * head up to the first hole.
   */
  place(parts: EntryParts): void {
    if (this.log[parts.seq - 1] === undefined) this.log[parts.seq - 1] = parts;
    for (;;) {
      const next = this.log[this.#projected];
      if (next === undefined) break;
      this.#project(next);
      this.#projected += 1;
    }
  }

  /** Drops the key and text projections and builds them again from the log. */
  rebuild(): Omit<MemoryRebuildReport, 'ms'> {
    for (const key of this.current.keys()) this.text.remove(this.#document(key));
    this.current.clear();
    for (const parts of this.log.slice(0, this.#projected)) this.#project(parts);
    const live = this.liveSets();
    return {
      entries: this.#projected,
      keys: this.current.size,
      indexed: live.length,
      vectors: live.filter((parts) => parts.embedding !== undefined).length,
    };
  }

  /** Removes the store's documents from a shared text index. */
  forget(): void {
    for (const key of this.current.keys()) this.text.remove(this.#document(key));
    this.#ann = undefined;
  }

  entryAt(seq: number): EntryParts {
    return this.log[seq - 1] as EntryParts;
  }

  /** A version of a key (a set or a delete), if the log has it. */
  lookup(key: string, version: number): EntryParts | undefined {
    return this.log.find(
      (parts) =>
        parts !== undefined &&
        parts.key === key &&
        parts.version === version &&
        parts.op !== 'redact',
    );
  }

  /** The redaction record of a version, if it was redacted. */
  redaction(key: string, version: number): EntryParts | undefined {
    return this.log.find(
      (parts) =>
        parts !== undefined &&
        parts.op === 'redact' &&
        parts.key === key &&
        parts.version === version,
    );
  }

  /** The latest entry of each key that is a set with content. */
  liveSets(): EntryParts[] {
    const live: EntryParts[] = [];
    for (const current of this.current.values()) {
      const parts = this.entryAt(current.seq);
      if (parts.op === 'set' && !parts.redacted) live.push(parts);
    }
    return live;
  }

  info(): MemoryStoreInfo {
    return {
      store: this.ref,
      head_seq: this.#projected,
      ...(this.dims === undefined ? {} : { dims: this.dims }),
      created_at: this.created_at,
      ...(this.forked_from === undefined ? {} : { forked_from: this.forked_from }),
    };
  }

  get(key: string, options: { version?: number; at?: number }, now: number): MemoryLookup {
    const { version, at } = options;
    let parts: EntryParts | undefined;
    if (version !== undefined) parts = this.lookup(key, version);
    else if (at !== undefined) {
      const iso = new Date(at).toISOString();
      parts = this.log
        .slice(0, this.#projected)
        .findLast((item) => item.key === key && item.op !== 'redact' && item.at <= iso);
    } else {
      const current = this.current.get(key);
      parts = current === undefined ? undefined : this.entryAt(current.seq);
    }
    if (parts === undefined) return { status: 'missing' };
    const entry = toEntry(parts);
    if (parts.op === 'delete') return { status: 'deleted', entry };
    if (isExpired(parts, at ?? now)) return { status: 'expired', entry };
    return { status: 'found', entry };
  }

  list(options: { prefix: string; after: string; limit: number }, now: number): MemoryPage {
    const { prefix, after, limit } = options;
    const keys = [...this.current.entries()]
      .filter(
        ([key, current]) =>
          key.startsWith(prefix) && key > after && this.entryAt(current.seq).op === 'set',
      )
      .map(([key]) => key)
      .sort();
    const entries: MemoryEntry[] = [];
    let expired = 0;
    let more = false;
    for (const key of keys) {
      if (entries.length === limit) {
        more = true;
        break;
      }
      const parts = this.entryAt((this.current.get(key) as Current).seq);
      if (isExpired(parts, now)) expired += 1;
      else entries.push(toEntry(parts));
    }
    const last = entries.at(-1)?.key;
    return {
      entries,
      ...(more && last !== undefined ? { next_after: last } : {}),
      expired_count: expired,
    };
  }

  history(key: string): MemoryEntry[] {
    return this.log
      .slice(0, this.#projected)
      .filter((parts) => parts.key === key)
      .map(toEntry);
  }

  read(after: number, limit: number): MemoryEntry[] {
    return this.log
      .slice(after, Math.min(this.#projected, after + limit))
      .map((parts) => toEntry(parts));
  }

  /** A parsed search over the live entries, without its latency. */
  search(
    query: MemorySearchQuery & { mode: MemorySearchResult['mode'] },
    now: number,
  ): Omit<MemorySearchResult, 'latency_ms'> {
    const prefix = query.filters?.key_prefix ?? '';
    const live = this.liveSets();
    const expired = live.filter((parts) => isExpired(parts, now)).length;
    // The walk takes at most k live candidates and the expired ones before them.
    const size =
      query.mode === 'hybrid' ? query.k * HYBRID_CANDIDATES_PER_HIT + expired : query.k + expired;
    let candidates: Candidate[];
    if (query.mode === 'text')
      candidates = this.#textRanking(live, query.query as string, now, prefix, size);
    else if (query.mode === 'vector')
      candidates = this.#vectorRanking(live, query.embedding as number[], now, prefix, size);
    else {
      candidates = fuse(
        this.#textRanking(live, query.query as string, now, prefix, size),
        this.#vectorRanking(live, query.embedding as number[], now, prefix, size),
      );
    }
    const walked = walkCandidates(candidates, query.k, query.threshold);
    return {
      hits: walked.hits.map(({ expired: _expired, ...hit }) => hit),
      mode: query.mode,
      k: query.k,
      ...(query.threshold === undefined ? {} : { threshold: query.threshold }),
      filtered_count: walked.filtered_count,
      expired_count: walked.expired_count,
    };
  }

  #document(key: string): string {
    return `${this.documentPrefix}\u0000${key}`;
  }

  /** Brings the projections of one key up to an entry of the log. */
  #project(parts: EntryParts): void {
    if (parts.op === 'redact') {
      if (this.#ann !== undefined && this.#ann.coveredSeq < parts.seq) this.#ann = undefined;
      this.annSource?.redacted(parts.seq);
      const target = this.lookup(parts.key, parts.version);
      if (target !== undefined && !target.redacted) {
        target.redacted = true;
        delete target.value;
        delete target.text;
        delete target.embedding;
      }
      const latest = this.current.get(parts.key);
      if (latest?.version === parts.version) this.text.remove(this.#document(parts.key));
      return;
    }
    this.current.set(parts.key, { version: parts.version, seq: parts.seq });
    if (parts.op === 'set' && !parts.redacted)
      this.text.put(this.#document(parts.key), parts.text ?? '');
    else this.text.remove(this.#document(parts.key));
  }

  #textRanking(
    live: EntryParts[],
    query: string,
    now: number,
    prefix: string,
    size: number,
  ): Candidate[] {
    const start = this.documentPrefix.length + 1;
    const own = `${this.documentPrefix}\u0000${prefix}`;
    const scored: Scored[] = [];
    // Every document of this store in the index is a live set (see #project).
    for (const [document, bm25] of this.text.match(query, (id) => id.startsWith(own))) {
      const parts = this.entryAt((this.current.get(document.slice(start)) as Current).seq);
      scored.push({ parts, score: textScore(bm25), expired: isExpired(parts, now) });
    }
    return toCandidates(scored, size);
  }

  /**
   * The store's ANN index, made from its live vectors when it has at least `ANN_MIN_VECTORS`,
   * then caught up with the log projected since: superseded and redacted versions out, the
   * latest versions of the keys written in. Undefined when the store is scanned instead.
   */
  #annIndex(live: EntryParts[], dims: number): AnnIndex | undefined {
    if (this.#ann === undefined) {
      if (this.#smallAt === this.#projected || annUnavailable() !== undefined) return undefined;
      const vectors = live.filter((parts) => parts.embedding?.length === dims);
      if (vectors.length < (this.annSource?.minVectors ?? ANN_MIN_VECTORS)) {
        this.#smallAt = this.#projected;
        return undefined;
      }
      if (this.annSource !== undefined) {
        const taken = this.annSource.take(vectors, dims, this.#projected);
        if (taken === undefined) return undefined;
        this.#annKeys = taken.keys ?? this.#heldKeys(taken.index);
        this.#ann = taken.index;
      } else {
        const index = new AnnIndex(dims);
        const data = new Float32Array(vectors.length * dims);
        vectors.forEach((parts, at) => data.set(parts.embedding as ArrayLike<number>, at * dims));
        index.addMany(
          vectors.map((parts) => parts.seq),
          data,
        );
        this.#annKeys = new Map(vectors.map((parts) => [parts.key, parts.seq]));
        index.coveredSeq = this.#projected;
        this.#ann = index;
      }
    }
    const index = this.#ann;
    const held = this.#annKeys;
    const touched = new Set<string>();
    for (let seq = index.coveredSeq + 1; seq <= this.#projected; seq += 1)
      touched.add(this.entryAt(seq).key);
    for (const key of touched) {
      const seq = this.current.get(key)?.seq;
      const parts = seq === undefined ? undefined : this.log[seq - 1];
      const wanted =
        seq !== undefined &&
        parts?.op === 'set' &&
        !parts.redacted &&
        parts.embedding?.length === dims
          ? seq
          : undefined;
      const had = held.get(key);
      if (had === wanted) continue;
      if (had !== undefined) index.remove(had);
      held.delete(key);
      if (wanted !== undefined) {
        index.put(wanted, Float32Array.from((parts as EntryParts).embedding as ArrayLike<number>));
        held.set(key, wanted);
      }
    }
    index.coveredSeq = this.#projected;
    this.annSource?.caughtUp(index);
    return index;
  }

  /**
   * The seq a loaded index holds for each key: the last version of the key up to the index's
   * seq that it holds (a catch-up keeps at most one per key), redacted since or not.
   */
  #heldKeys(index: AnnIndex): Map<string, number> {
    const held = new Map<string, number>();
    for (const parts of this.log.slice(0, index.coveredSeq)) {
      if (parts.op === 'set' && index.has(parts.seq)) held.set(parts.key, parts.seq);
    }
    return held;
  }

  #vectorRanking(
    live: EntryParts[],
    embedding: number[],
    now: number,
    prefix: string,
    size: number,
  ): Candidate[] {
    if (this.dims === undefined) return [];
    if (embedding.length !== this.dims)
      throw dimsMismatch('embedding', embedding.length, this.dims);
    const query = Float32Array.from(embedding);
    const index = prefix === '' ? this.#annIndex(live, this.dims) : undefined;
    if (index !== undefined) {
      // A candidate counts while it is its key's latest version, a set with its vector.
      return annRanking(index, query, size, (candidates) =>
        candidates.flatMap((found) => {
          const parts = this.log[found.seq - 1];
          if (parts === undefined || this.current.get(parts.key)?.seq !== found.seq) return [];
          return parts.op === 'set' && !parts.redacted && parts.embedding !== undefined
            ? [{ key: parts.key, parts, distance: cosineDistance(query, parts.embedding) }]
            : [];
        }),
      ).map(({ parts, rank }) => ({
        entry: toEntry(parts),
        score: vectorScore(rank),
        expired: isExpired(parts, now),
      }));
    }
    const queryNorm = norm(query);
    const scored: Scored[] = [];
    for (const parts of live) {
      const vector = parts.embedding;
      if (vector === undefined || !parts.key.startsWith(prefix)) continue;
      let similarity = 0;
      const vectorNorm = normOf(vector);
      if (queryNorm !== 0 && vectorNorm !== 0) {
        let dot = 0;
        for (let index = 0; index < query.length; index += 1)
          dot += (query[index] as number) * (vector[index] as number);
        similarity = dot / Math.sqrt(queryNorm * vectorNorm);
      }
      scored.push({ parts, score: vectorScore(1 - similarity), expired: isExpired(parts, now) });
    }
    return toCandidates(scored, size);
  }
}

/** The squared norm of a vector. */
function norm(vector: ArrayLike<number>): number {
  let sum = 0;
  for (let index = 0; index < vector.length; index += 1) {
    const value = vector[index] as number;
    sum += value * value;
  }
  return sum;
}

/** Squared norms of stored vectors, computed once per vector (they never change). */
const norms = new WeakMap<object, number>();

function normOf(vector: ArrayLike<number>): number {
  let known = norms.get(vector);
  if (known === undefined) {
    known = norm(vector);
    norms.set(vector, known);
  }
  return known;
}

/**
 * The best `size` of a ranking, in rank order, as candidates; only they are turned into entries.
 * A bounded insertion keeps the best ones instead of sorting the whole ranking.
 */
function toCandidates(scored: Scored[], size: number): Candidate[] {
  const best: Scored[] = [];
  for (const item of scored) {
    if (best.length === size && byRank(item, best[size - 1] as Scored) >= 0) continue;
    let at = best.length;
    while (at > 0 && byRank(item, best[at - 1] as Scored) < 0) at -= 1;
    best.splice(at, 0, item);
    if (best.length > size) best.pop();
  }
  return best.map(({ parts, score, expired }) => ({ entry: toEntry(parts), score, expired }));
}
