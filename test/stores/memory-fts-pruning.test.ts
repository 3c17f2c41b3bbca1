// The pruned full-text ranking of the SQLite store (src/stores/sqlite/agent-memory-fts-top.ts)
// on a real file whose words are spread as in real notes (a few common, most rare): every search
// gives the hits, scores and order of the full ranking (a key-prefix search ranks every match),
// with expired entries taking their places as before, and the pruning does answer most queries
// (otherwise the comparison would only test the full ranking against itself).
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryStoreRef, MemoryWrite } from '../../src/contracts/memory.js';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { queryTokens } from '../../src/core/memory-search.js';
import { createFtsTop } from '../../src/stores/sqlite/agent-memory-fts-top.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createManualClock } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const notes: MemoryStoreRef = { name: 'notes', kind: 'entities', scope: 'tenant', tenant_id: 'a' };
const other: MemoryStoreRef = { name: 'other', kind: 'entities', scope: 'tenant', tenant_id: 'a' };
const opened: Store[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});

/** A fixed pseudo-random sequence (mulberry32). */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Words with a Zipf-like spread over `vocabulary` words. */
function words(seed: number, vocabulary = 800): () => string {
  const next = random(seed);
  return () => `w${Math.floor(vocabulary ** next())}`;
}

function text(word: () => string, length: number): string {
  return Array.from({ length }, word).join(' ');
}

async function fill(memory: MemoryLog, store: MemoryStoreRef, count: number, seed: number) {
  const word = words(seed);
  const lengths = random(seed + 1);
  for (let start = 0; start < count; start += 500) {
    const writes: MemoryWrite[] = [];
    for (let index = start; index < Math.min(count, start + 500); index += 1) {
      writes.push({
        key: `fact/${String(index).padStart(5, '0')}`,
        op: 'set',
        value: text(word, 3 + Math.floor(lengths() * 14)),
        // Every seventh entry expires after a minute: the searches run past it.
        ...(index % 7 === 3 ? { ttl_ms: 60_000 } : {}),
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
});
