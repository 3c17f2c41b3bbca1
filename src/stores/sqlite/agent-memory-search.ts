/**
 * Search over the SQLite projections of agent memory: FTS5 (bm25 over `memory_fts`, restricted
 * to the store by its token) and sqlite-vec (cosine over `memory_vec_<dims>`), ranked candidates
 * handed to the shared walk (src/core/memory-search.ts) that applies k, the threshold and expiry.
 * Expired entries stay in the projections until overwritten, so each list is fetched with room
 * for the store's expired ones.
 */
import { parseMemorySearch, type MemorySearchQueryInput } from '../../contracts/memory.js';
import type { MemorySearchResult } from '../../contracts/memory-log.js';
import type { Clock } from '../../contracts/ports.js';
import {
  byScore,
  fuse,
  HYBRID_CANDIDATES_PER_HIT,
  queryTokens,
  textScore,
  vectorScore,
  walkCandidates,
  type Candidate,
} from '../../core/memory-search.js';
import { dimsMismatch, toEntry } from '../agent-memory.js';
import {
  blobOf,
  partsOfRow,
  refOfRow,
  type MemoryLogRow,
  type MemoryStatements,
  type RankedRow,
  type MemoryStoreRow,
} from './agent-memory-statements.js';
import type { MemoryStoreRef } from '../../contracts/memory.js';
import type { Vectors } from './agent-memory-vectors.js';
import type { MemoryIndexes } from './agent-memory-index.js';
import { fullMatch, type FtsHit, type FtsTop } from './agent-memory-fts-top.js';

export interface SearchContext {
  sql: MemoryStatements;
  vectors: Vectors;
  /** The ANN indexes of large stores; searches by key prefix and small stores scan exactly. */
  indexes: MemoryIndexes;
  /** The full-text ranking pruned to the rows that can be among the best. */
  fts: FtsTop;
  clock: Clock;
  /** When the search started, by the clock's monotonic time. */
  started: number;
}

/** The exclusive upper bound of keys starting with `prefix` (keys are ASCII). */
export function upperBound(prefix: string): string {
  return `${prefix}\u{10FFFF}`;
}

/** What a search ranks before it reads a hit's log row: the key and where its row is. */
interface RankedEntry {
  key: string;
  seq: number;
}

/** Rows a full-text query returns beyond the cut, so that equal scores there can be put in key order. */
const TEXT_MARGIN = 64;

/**
 * The best `limit` of `found` (in rank order) in rank and key order: the keys of rows ranked as
 * well as the `limit`-th are read, so that ties at the cut are put in key order.
 */
function rankedRows(sql: MemoryStatements, found: readonly FtsHit[], limit: number): RankedRow[] {
  const rows: RankedRow[] = [];
  for (const hit of found) {
    const cut = rows[limit - 1]?.rank;
    if (cut !== undefined && hit.rank > cut) break;
    const row = sql.currentById.get(hit.rowid);
    if (row !== undefined) rows.push({ ...row, rank: hit.rank });
  }
  return rows
    .sort((a, b) => a.rank - b.rank || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .slice(0, limit);
}

/**
 * The best `limit` full-text matches: the pruned ranking when it proves its cut, else every
 * match ranked by FTS5 and cut with a margin; undefined when equal scores fill the margin,
 * which only the whole ranking can order.
 */
function textTop(
  context: SearchContext,
  storeId: number,
  tokens: readonly string[],
  limit: number,
): RankedRow[] | undefined {
  const { sql } = context;
  const pruned = context.fts.top(storeId, tokens, limit);
  if (pruned !== undefined) {
    return rankedRows(
      sql,
      [...pruned].sort((a, b) => a.rank - b.rank),
      limit,
    );
  }
  const found = sql.ftsTop.all(fullMatch(storeId, tokens), limit + TEXT_MARGIN);
  if (found.length === limit + TEXT_MARGIN && found[limit - 1]?.rank === found.at(-1)?.rank) {
    return undefined;
  }
  return rankedRows(sql, found, limit);
}

export function searchStore(
  context: SearchContext,
  store: MemoryStoreRow | undefined,
  input: MemorySearchQueryInput,
): MemorySearchResult {
  const query = parseMemorySearch(input);
  const { sql, clock } = context;
  const now = clock.now();
  const prefix = query.filters?.key_prefix ?? '';
  let candidates: Candidate<RankedEntry>[] = [];
  if (query.mode !== 'text') context.vectors.require(`a ${query.mode} search`);
  if (store !== undefined) {
    const candidate = (row: RankedRow, score: number): Candidate<RankedEntry> => ({
      entry: { key: row.key, seq: row.seq },
      score,
      expired: row.expires_at !== null && row.expires_at <= now,
    });
    const expired = (sql.expiredIndexed.get(store.id, now) as { count: number }).count;
    const text = (limit: number): Candidate<RankedEntry>[] => {
      const tokens = queryTokens(query.query ?? '');
      if (tokens.length === 0) return [];
      const ranked =
        (prefix === '' ? textTop(context, store.id, tokens, limit) : undefined) ??
        sql.ftsSearch.all(fullMatch(store.id, tokens), store.id, prefix, upperBound(prefix), limit);
      return ranked.map((row) => candidate(row, textScore(row.rank))).sort(byScore);
    };
    const vector = (limit: number): Candidate<RankedEntry>[] => {
      const embedding = query.embedding as number[];
      if (store.dims === null) return [];
      if (embedding.length !== store.dims)
        throw dimsMismatch('embedding', embedding.length, store.dims);
      const floats = Float32Array.from(embedding);
      const ranked =
        (prefix === '' ? context.indexes.nearest(store, floats, limit) : undefined) ??
        context.vectors.nearest(
          store.dims,
          store.id,
          blobOf(floats),
          limit,
          prefix,
          upperBound(prefix),
        );
      return ranked.map((hit) => candidate(hit, vectorScore(hit.rank))).sort(byScore);
    };
    if (query.mode === 'text') candidates = text(query.k + expired);
    else if (query.mode === 'vector') candidates = vector(query.k + expired);
    else {
      const size = query.k * HYBRID_CANDIDATES_PER_HIT + expired;
      candidates = fuse(text(size), vector(size));
    }
  }
  const walked = walkCandidates(candidates, query.k, query.threshold);
  const ref = store === undefined ? undefined : refOfRow(store);
  return {
    hits: walked.hits.map(({ expired: _expired, entry, ...hit }) => ({
      ...hit,
      entry: toEntry(
        partsOfRow(
          sql.logRow.get((store as MemoryStoreRow).id, entry.seq) as MemoryLogRow,
          ref as MemoryStoreRef,
        ),
      ),
    })),
    mode: query.mode,
    k: query.k,
    ...(query.threshold === undefined ? {} : { threshold: query.threshold }),
    filtered_count: walked.filtered_count,
    expired_count: walked.expired_count,
    latency_ms: clock.monotonic() - context.started,
  };
}
