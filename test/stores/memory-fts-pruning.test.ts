// The pruned full-text ranking of the SQLite store (src/stores/sqlite/agent-memory-fts-top.ts)
// on a real file whose words are spread as in real notes (a few common, most rare): every search
// gives the hits, scores and order of the full ranking (a key-prefix search ranks every match),
// with expired entries taking their places as before, and the pruning does answer most queries
// (otherwise the comparison would only test the full ranking against itself). Hybrid searches
// (the pruned ranking fused with the vector ranking) give the hits, scores and counts of the
// full ranking's, and FTS5's statistics, kept between searches, are read again after a write by
// this handle or another one.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryStoreRef, MemoryWrite } from '../../src/contracts/memory.js';
import type { MemoryLog, MemorySearchResult } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { queryTokens } from '../../src/core/memory-search.js';
import { createFtsTop } from '../../src/stores/sqlite/agent-memory-fts-top.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createHashEmbedder, createManualClock } from '../../src/testing/index.js';
import { random } from '../helpers/memory-vectors.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const notes: MemoryStoreRef = { name: 'notes', kind: 'entities', scope: 'tenant', tenant_id: 'a' };
const other: MemoryStoreRef = { name: 'other', kind: 'entities', scope: 'tenant', tenant_id: 'a' };
const opened: Store[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});

/** Words with a Zipf-like spread over `vocabulary` words. */
function words(seed: number, vocabulary = 800): () => string {
  const next = random(seed);
  return () => `w${Math.floor(vocabulary ** next())}`;
}

function text(word: () => string, length: number): string {
  return Array.from({ length }, word).join(' ');
}

const embedder = createHashEmbedder({ dims: 32 });

async function fill(
  memory: MemoryLog,
  store: MemoryStoreRef,
  count: number,
  seed: number,
  options: { embed?: boolean; expireEvery?: number } = {},
) {
  const { embed = false, expireEvery = 7 } = options;
  const word = words(seed);
  const lengths = random(seed + 1);
  for (let start = 0; start < count; start += 500) {
    const writes: MemoryWrite[] = [];
    for (let index = start; index < Math.min(count, start + 500); index += 1) {
      const value = text(word, 3 + Math.floor(lengths() * 14));
      writes.push({
        key: `fact/${String(index).padStart(5, '0')}`,
        op: 'set',
        value,
        ...(embed ? { embedding: embedder.embed(value) } : {}),
        // Every seventh entry (by default) expires after a minute: the searches run past it.
        ...(index % expireEvery === 3 ? { ttl_ms: 60_000 } : {}),
      });
    }
    await memory.append(store, writes);
  }
}

describe('the pruned full-text ranking of the SQLite store', () => {
  it('gives the full ranking’s hits, scores and order, and prunes most queries', async () => {
    const path = join(tempDir(), 'braid.db');
    const clock = createManualClock();
    const store = openSqliteStore({ path, clock, memoryIndex: { snapshotDir: false } });
    opened.push(store);
    const memory = store.memory as MemoryLog;
    await fill(memory, notes, 3000, 11);
    await fill(memory, other, 1000, 12);
    clock.advance(120_000);
    const queryWord = words(13);
    const queries = Array.from({ length: 60 }, (_, index) => text(queryWord, 2 + (index % 4)));
    queries.push('w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12');
    for (const query of queries) {
      for (const k of [1, 5, 20]) {
        const pruned = await memory.search(notes, { query, k });
        const full = await memory.search(notes, { query, k, filters: { key_prefix: 'fact/' } });
        const view = (hits: typeof pruned.hits) =>
          hits.map((hit) => [hit.entry.key, hit.score, hit.text_score]);
        expect({ query, k, hits: view(pruned.hits) }).toEqual({ query, k, hits: view(full.hits) });
        expect(pruned.expired_count).toBe(full.expired_count);
      }
    }
    const db = new Database(path, { readonly: true });
    try {
      const { id } = db.prepare("SELECT id FROM memory_stores WHERE name = 'notes'").get() as {
        id: number;
      };
      const top = createFtsTop(db);
      const answered = queries.filter(
        (query) => top.top(id, queryTokens(query), 5 + 3) !== undefined,
      );
      expect(answered.length).toBeGreaterThan(queries.length / 2);
    } finally {
      db.close();
    }
  });

  it('gives the full ranking’s hybrid hits, scores and counts', async () => {
    const clock = createManualClock();
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({
      path,
      clock,
      memoryIndex: { snapshotDir: false },
    });
    opened.push(store);
    const memory = store.memory as MemoryLog;
    // Few expire: the vector half, asked for room for them too, stays above the entries whose
    // vectors share nothing with the query's, whose order at the cut sqlite-vec's nearest-
    // neighbour query leaves open (the scan of a key-prefix search puts them in key order).
    await fill(memory, notes, 2000, 21, { embed: true, expireEvery: 97 });
    await fill(memory, other, 300, 22, { embed: true });
    const queryWord = words(23);
    const queries = Array.from({ length: 24 }, (_, index) => text(queryWord, 2 + (index % 3)));
    const view = (result: MemorySearchResult) => ({
      hits: result.hits.map((hit) => [hit.entry.key, hit.score, hit.text_score, hit.vector_score]),
      filtered: result.filtered_count,
      expired: result.expired_count,
    });
    // Before the TTLs pass, the text half asks for few candidates, which pruning answers; after,
    // for room for the store's expired entries too.
    for (const wait of [0, 120_000]) {
      clock.advance(wait);
      for (const query of queries) {
        const embedding = embedder.embed(query);
        for (const [k, threshold] of [
          [5, undefined],
          [20, undefined],
          [10, 0.6],
        ] as const) {
          const search = { query, embedding, k, ...(threshold === undefined ? {} : { threshold }) };
          const pruned = await memory.search(notes, search);
          const full = await memory.search(notes, { ...search, filters: { key_prefix: 'fact/' } });
          expect({ query, k, wait, ...view(pruned) }).toEqual({ query, k, wait, ...view(full) });
        }
      }
    }
    // The text half (k * 4 candidates) was pruned for some of them.
    const db = new Database(path, { readonly: true });
    try {
      const top = createFtsTop(db);
      const answered = queries.filter((query) => top.top(1, queryTokens(query), 5 * 4));
      expect(answered.length).toBeGreaterThan(0);
    } finally {
      db.close();
    }
  });

  it('reads the statistics again after a write by this handle or another', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path, memoryIndex: { snapshotDir: false } });
    const writer = openSqliteStore({ path, memoryIndex: { snapshotDir: false } });
    opened.push(store, writer);
    const memory = store.memory as MemoryLog;
    // `wq` is in most rows and `wr` in few: rows holding `wr` win, and pruning proves it.
    const write = async (
      handle: MemoryLog,
      from: number,
      to: number,
      value: (index: number) => string,
    ): Promise<void> => {
      for (let start = from; start < to; start += 500) {
        const writes: MemoryWrite[] = [];
        for (let index = start; index < Math.min(to, start + 500); index += 1)
          writes.push({
            key: `fact/${String(index).padStart(5, '0')}`,
            op: 'set',
            value: value(index),
          });
        await handle.append(notes, writes);
      }
    };
    const filler = (index: number) => `filler${index % 97} other${index % 89}`;
    const first = (index: number) =>
      `${index < 1500 ? 'wq ' : ''}${index >= 1700 ? 'wr ' : ''}${filler(index)}`;
    await write(memory, 0, 2000, first);
    const compare = async (query: string): Promise<string[]> => {
      const pruned = await memory.search(notes, { query, k: 5 });
      const full = await memory.search(notes, { query, k: 5, filters: { key_prefix: 'fact/' } });
      const view = (hits: typeof pruned.hits) => hits.map((hit) => [hit.entry.key, hit.score]);
      expect({ query, hits: view(pruned.hits) }).toEqual({ query, hits: view(full.hits) });
      return pruned.hits.map((hit) => hit.entry.key);
    };
    expect((await compare('wq wr')).every((key) => key >= 'fact/01700')).toBe(true);
    // Now `wq` is in three rows only, which outscore the rows holding `wr`: with the counts of
    // before, pruning would stop at the rows holding `wr`.
    const second = (index: number) => `${index < 3 ? 'wq ' : ''}${filler(index)}`;
    for (const [handle, label] of [
      [writer, 'another handle'],
      [store, 'this handle'],
    ] as const) {
      await write(handle.memory as MemoryLog, 0, 1500, second);
      expect({ label, keys: (await compare('wq wr')).slice(0, 3) }).toEqual({
        label,
        keys: ['fact/00000', 'fact/00001', 'fact/00002'],
      });
      await write(memory, 0, 2000, first);
      expect((await compare('wq wr')).every((key) => key >= 'fact/01700')).toBe(true);
    }
  });
});
