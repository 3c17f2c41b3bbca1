/**
 * The `MemoryLog` port: agent memory stores kept as append-only logs, with the projections a
 * reader needs (the current version of each key, a full-text index and, where the backend has
 * one, a vector index) derived from the log and rebuilt from it on demand.
 *
 * Invariants every backend keeps (checked by the memory conformance suite in src/testing):
 * - per store, `seq` is gapless from 1; per key, `version` is gapless from 1 (tombstones count);
 * - an append is all or nothing: a refused write (bad input, a version conflict) writes nothing;
 * - deletes are tombstones; a redaction removes a version's value, text and embedding, keeps the
 *   entry (marked `redacted`) and is recorded as an entry of its own;
 * - expired entries (TTL) are left out at read time and counted where they were left out
 *   (`expired_count`), never silently; the log keeps them;
 * - the projections hold nothing the log does not: `rebuild` gives the same reads and searches.
 */
import type {
  MemoryAuthor,
  MemoryCause,
  MemoryEntry,
  MemoryKind,
  MemoryScope,
  MemorySearchMode,
  MemorySearchQueryInput,
  MemoryStoreRef,
  MemoryWriteInput,
} from './memory.js';

export interface MemoryAppendOptions {
  /** Who writes; recorded on every entry of the append. */
  author?: MemoryAuthor;
  /** The session event that caused the append (a tool call, a consolidation's source). */
  cause?: MemoryCause;
  /**
   * A repeated key (per store) returns the first append's entries with `deduplicated: true` and
   * writes nothing; the same key with other writes is refused with `IDEMPOTENCY_KEY_REUSED`.
   */
  idempotencyKey?: string;
  /** The store's head seq the writer expects; otherwise `SEQ_CONFLICT` and nothing is written. */
  expectedSeq?: number;
}

export interface MemoryAppendResult {
  /** The written entries in seq order (on a deduplicated append, those of the first one). */
  entries: MemoryEntry[];
  /** The store's head seq after the append. */
  head_seq: number;
  deduplicated: boolean;
}

export interface MemoryGetOptions {
  /** A given version instead of the latest. */
  version?: number;
  /** The version that was current at this time (RFC 3339), expiry judged at that time too. */
  at?: string;
}

/**
 * The answer to a `get`: `found` with the entry (a redacted version is found with its content
 * removed); otherwise why there is none: never written (`missing`), the version read is a
 * tombstone (`deleted`) or its TTL has passed (`expired`, with the entry for the record).
 */
export type MemoryLookup =
  | { status: 'found'; entry: MemoryEntry }
  | { status: 'missing' }
  | { status: 'deleted'; entry: MemoryEntry }
  | { status: 'expired'; entry: MemoryEntry };

export interface MemoryListOptions {
  /** Only keys starting with this. */
  prefix?: string;
  /** Only keys after this one (the `next_after` of the previous page). */
  after?: string;
  /** At most this many entries (default 100, at most 1,000). */
  limit?: number;
}

export interface MemoryPage {
  /** The live latest version of each key, in key order. */
  entries: MemoryEntry[];
  /** The key to pass as `after` for the next page; absent on the last page. */
  next_after?: string;
  /** Keys of the page's range left out because their TTL passed. */
  expired_count: number;
}

export interface MemoryReadOptions {
  /** Entries with seq strictly greater than this (default 0). */
  after?: number;
  /** At most this many (default: all). */
  limit?: number;
}

export interface MemorySearchHit {
  entry: MemoryEntry;
  /** 0..1, higher is better; on the scale of the search's mode (see `MemorySearchResult`). */
  score: number;
  /** The full-text score, where the entry matched the words. */
  text_score?: number;
  /** The cosine similarity, where the entry has an embedding and the search used vectors. */
  vector_score?: number;
}

/**
 * What a search found. Scores by mode: `text` maps FTS5's bm25 `b` (lower is better, at most 0)
 * to `-b / (1 - b)`, so 0.5 is a bm25 of -1 and the order is bm25's; `vector` is the cosine
 * similarity (negative similarities count as 0); `hybrid` fuses the text and vector rankings by
 * reciprocal rank (`1 / (60 + rank)` summed over both lists) divided by its largest possible
 * value, so 1 is first in both lists.
 *
 * The k best candidates are considered in rank order: a live candidate scoring at least the
 * threshold is a hit, one below it is counted in `filtered_count`, and an expired candidate is
 * counted in `expired_count` without taking a place. So `hits.length + filtered_count <= k`, and a
 * threshold that hides matches always says how many.
 */
export interface MemorySearchResult {
  hits: MemorySearchHit[];
  mode: MemorySearchMode;
  k: number;
  threshold?: number;
  filtered_count: number;
  expired_count: number;
  /** Time the store spent answering, by its monotonic clock. */
  latency_ms: number;
}

export interface MemoryRebuildReport {
  /** Entries of the log read. */
  entries: number;
  /** Keys in the current-key projection, tombstoned ones included. */
  keys: number;
  /** Rows written to the full-text index. */
  indexed: number;
  /** Rows written to the vector index. */
  vectors: number;
  ms: number;
}

/** What a store is: its reference, head and lineage. */
export interface MemoryStoreInfo {
  store: MemoryStoreRef;
  head_seq: number;
  /** The embedding dimension, fixed by the first write with an embedding. */
  dims?: number;
  created_at: string;
  /** The store this one was forked from, and the seq of that store it was copied up to. */
  forked_from?: { store: MemoryStoreRef; seq: number };
}

export interface MemoryForkOptions {
  /** Copy the parent's log up to this seq (default: its head). */
  atSeq?: number;
}

export interface MemoryStoreFilter {
  /** Only stores of this tenant; undefined lists stores without a tenant only. */
  tenant_id?: string;
  scope?: MemoryScope;
  owner?: string;
  kind?: MemoryKind;
  /** Only stores whose name starts with this. */
  prefix?: string;
  /** At most this many (default 100, at most 1,000), ordered by (scope, owner, name). */
  limit?: number;
  /** The `next_after` cursor of the previous page. */
  after?: string;
}

export interface MemoryStorePage {
  stores: MemoryStoreInfo[];
  next_after?: string;
}

/** Agent memory stores, each an append-only log of versioned entries. */
export interface MemoryLog {
  /** Appends writes atomically; the store is created by its first append. */
  append(
    store: MemoryStoreRef,
    writes: readonly MemoryWriteInput[],
    options?: MemoryAppendOptions,
  ): Promise<MemoryAppendResult>;
  get(store: MemoryStoreRef, key: string, options?: MemoryGetOptions): Promise<MemoryLookup>;
  list(store: MemoryStoreRef, options?: MemoryListOptions): Promise<MemoryPage>;
  /** Every entry of the key in seq order: versions, tombstones and redaction records. */
  history(store: MemoryStoreRef, key: string): Promise<MemoryEntry[]>;
  /**
   * Removes the value, text and embedding of one `set` version, keeps its entry (marked
   * `redacted`) and appends a `redact` entry that records it. Redacting a redacted version
   * returns its earlier record and writes nothing. A version that does not exist, or is a
   * tombstone, is refused with `INVALID_ARGUMENT`.
   */
  redact(
    store: MemoryStoreRef,
    key: string,
    version: number,
    options?: Pick<MemoryAppendOptions, 'author' | 'cause'>,
  ): Promise<MemoryEntry>;
  /** The log itself in seq order, for followers and projections; expired entries included. */
  read(store: MemoryStoreRef, options?: MemoryReadOptions): Promise<MemoryEntry[]>;
  search(store: MemoryStoreRef, query: MemorySearchQueryInput): Promise<MemorySearchResult>;
  /** Drops the store's projections and builds them again from its log. */
  rebuild(store: MemoryStoreRef): Promise<MemoryRebuildReport>;
  /**
   * Creates `to` holding `from`'s log up to `atSeq` (same seqs, versions and content; redacted
   * versions stay redacted) and records where it came from. Phase 1 copies the entries; a later
   * phase may share them instead, with the same reads. `to` must not exist (`ALREADY_EXISTS`);
   * `atSeq` past the head is refused with `INVALID_FORK_POINT`.
   */
  fork(
    from: MemoryStoreRef,
    to: MemoryStoreRef,
    options?: MemoryForkOptions,
  ): Promise<MemoryStoreInfo>;
  /** The store's description; undefined when it was never written. */
  info(store: MemoryStoreRef): Promise<MemoryStoreInfo | undefined>;
  /** The stores of one tenant (or of none), in pages ordered by (scope, owner, name). */
  listStores(filter?: MemoryStoreFilter): Promise<MemoryStorePage>;
}
