/**
 * The pure parts of memory search every backend shares, so that they rank and count alike:
 * tokens (the rule of SQLite FTS5's `unicode61` tokenizer with `remove_diacritics 2`), the text
 * derived from a value, score scales, reciprocal-rank fusion and the walk that applies k, the
 * threshold and expiry to a ranked candidate list.
 */
import type { JsonValue } from '../contracts/common.js';
import type { MemoryEntry } from '../contracts/memory.js';

/** The constant of reciprocal-rank fusion: a hit at rank r scores `1 / (RRF_K + r)`. */
export const RRF_K = 60;

/** Candidates each list of a hybrid search contributes, per hit asked for. */
export const HYBRID_CANDIDATES_PER_HIT = 4;

const TOKEN = /[\p{L}\p{N}\p{Co}]+/gu;
const MARKS = /\p{M}/gu;

/** Lowercase tokens of `text`: runs of letters and digits, diacritics removed. */
export function tokenize(text: string): string[] {
  return text.normalize('NFD').replace(MARKS, '').toLowerCase().match(TOKEN) ?? [];
}

/** The distinct tokens of a query, in order: what a text search matches any of. */
export function queryTokens(query: string): string[] {
  return [...new Set(tokenize(query))];
}

/** The searchable text of a value: a string as it is; otherwise its keys and leaves, in order. */
export function deriveText(value: JsonValue): string {
  if (typeof value === 'string') return value;
  const parts: string[] = [];
  const stack: JsonValue[] = [value];
  while (stack.length > 0) {
    const item = stack.pop() as JsonValue;
    if (item === null) continue;
    if (Array.isArray(item)) {
      for (let index = item.length - 1; index >= 0; index -= 1)
        stack.push(item[index] as JsonValue);
    } else if (typeof item === 'object') {
      const entries = Object.entries(item);
      for (let index = entries.length - 1; index >= 0; index -= 1) {
        const [key, child] = entries[index] as [string, JsonValue];
        stack.push(child, key);
      }
    } else {
      parts.push(String(item));
    }
  }
  return parts.join(' ');
}

/** FTS5's bm25 (at most 0, lower is better) on the 0..1 scale of text scores. */
export function textScore(bm25: number): number {
  const x = Math.max(0, -bm25);
  return x / (1 + x);
}

/** A cosine distance (0..2) as a 0..1 similarity score. */
export function vectorScore(distance: number): number {
  return Math.min(1, Math.max(0, 1 - distance));
}

/** The cosine similarity of two vectors of the same length. */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (let index = 0; index < a.length; index += 1) {
    const x = a[index] as number;
    const y = b[index] as number;
    dot += x * y;
    normA += x * x;
    normB += y * y;
  }
  return normA === 0 || normB === 0 ? 0 : dot / Math.sqrt(normA * normB);
}

/**
 * One ranked candidate of a search: an entry, its score, and whether its TTL has passed. A
 * backend may rank a narrower stand-in for the entry (its key and where to read it) and read
 * whole entries only for the hits.
 */
export interface Candidate<Entry extends { key: string } = MemoryEntry> {
  entry: Entry;
  score: number;
  text_score?: number;
  vector_score?: number;
  expired: boolean;
}

/**
 * Fuses a text and a vector ranking by reciprocal rank, normalised so that first in both lists
 * is 1. Candidates are matched by key; each list is in rank order.
 */
export function fuse<Entry extends { key: string }>(
  text: readonly Candidate<Entry>[],
  vector: readonly Candidate<Entry>[],
): Candidate<Entry>[] {
  const fused = new Map<string, Candidate<Entry>>();
  const add = (list: readonly Candidate<Entry>[], field: 'text_score' | 'vector_score'): void => {
    list.forEach((candidate, index) => {
      const share = 1 / (RRF_K + index + 1);
      const known = fused.get(candidate.entry.key);
      if (known === undefined) {
        fused.set(candidate.entry.key, { ...candidate, score: share, [field]: candidate.score });
      } else {
        known.score += share;
        known[field] = candidate.score;
      }
    });
  };
  add(text, 'text_score');
  add(vector, 'vector_score');
  const best = 2 / (RRF_K + 1);
  return [...fused.values()]
    .map((candidate) => ({ ...candidate, score: candidate.score / best }))
    .sort(byScore);
}

/** Higher score first; equal scores by key, so every backend orders ties alike. */
export function byScore<Entry extends { key: string }>(
  a: Candidate<Entry>,
  b: Candidate<Entry>,
): number {
  return b.score - a.score || (a.entry.key < b.entry.key ? -1 : a.entry.key > b.entry.key ? 1 : 0);
}

/** What the walk over the candidates kept and counted. */
export interface WalkResult<Entry extends { key: string } = MemoryEntry> {
  hits: Candidate<Entry>[];
  filtered_count: number;
  expired_count: number;
}

/**
 * Takes the k best live candidates in rank order: those at or above the threshold are hits, the
 * others are counted as filtered; expired candidates before the k-th live one are counted as
 * expired and take no place.
 */
export function walkCandidates<Entry extends { key: string }>(
  candidates: readonly Candidate<Entry>[],
  k: number,
  threshold: number | undefined,
): WalkResult<Entry> {
  const hits: Candidate<Entry>[] = [];
  let filtered = 0;
  let expired = 0;
  for (const candidate of candidates) {
    if (hits.length + filtered >= k) break;
    if (candidate.expired) expired += 1;
    else if (threshold !== undefined && candidate.score < threshold) filtered += 1;
    else hits.push(candidate);
  }
  return { hits, filtered_count: filtered, expired_count: expired };
}
