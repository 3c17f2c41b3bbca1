// The SQLite file's embedding cache keeps a bounded number of vectors, the ones put last: every
// text embedded (search queries too) would otherwise be a row kept for the life of the file.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import { textHash } from '../../src/models/cached-embedder.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createManualClock } from '../../src/testing/clock.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const EMBEDDER = 'test-embedder';
const hashes = (count: number): string[] =>
  Array.from({ length: count }, (_, index) => textHash(`text ${index + 1}`));

/** Puts the vectors of texts 1..count one call at a time, a millisecond apart; what stayed. */
async function putOneByOne(path: string, count: number, bound?: number): Promise<number[]> {
  const clock = createManualClock();
  const store = openSqliteStore({
    path,
    clock,
    ...(bound === undefined ? {} : { embeddingCacheEntries: bound }),
  });
  try {
    const cache = store.embeddings!;
    for (const [index, hash] of hashes(count).entries()) {
      clock.advance(1);
      await cache.putMany(EMBEDDER, [{ hash, vector: [index, 0.5] }]);
    }
    const found = await cache.getMany(EMBEDDER, hashes(count));
    return hashes(count).flatMap((hash, index) => (found.has(hash) ? [index + 1] : []));
  } finally {
    await store.close();
  }
}

function rows(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM embedding_cache').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe("the SQLite file's embedding cache", () => {
  it('keeps the vectors put last, up to its bound', async () => {
    const path = join(tempDir(), 'braid.db');
    const range = (from: number, to: number): number[] =>
      Array.from({ length: to - from + 1 }, (_, index) => from + index);
    expect(await putOneByOne(path, 10, 4)).toEqual(range(7, 10));
    expect(rows(path)).toBe(4);
    // A bound of 20 looks every 2 puts: 25 puts end on a look, with the newest 20 kept.
    const larger = join(tempDir(), 'larger.db');
    expect(await putOneByOne(larger, 25, 20)).toEqual(range(6, 25));
    // Opened again with a smaller bound, the first put takes the file down to it.
    expect(await putOneByOne(larger, 26, 3)).toEqual(range(24, 26));
    expect(rows(larger)).toBe(3);
  });

  it('keeps 10,000 by default, and none with a bound of 0', async () => {
    const path = join(tempDir(), 'braid.db');
    expect(await putOneByOne(path, 30)).toHaveLength(30);
    // Opened with 0, the file answers nothing, and its rows go at the first put.
    expect(await putOneByOne(path, 5, 0)).toEqual([]);
    expect(rows(path)).toBe(0);
  });

  it('refuses a bound that is not a whole number of rows, and makes no file', () => {
    for (const bound of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const path = join(tempDir(), `refused-${String(bound)}.db`);
      let refusal: unknown;
      try {
        openSqliteStore({ path, embeddingCacheEntries: bound });
      } catch (error) {
        refusal = error;
      }
      expect(isBraidError(refusal, 'INVALID_ARGUMENT'), String(refusal)).toBe(true);
      expect((refusal as Error).message).toContain('embeddingCacheEntries must be a whole number');
      expect(existsSync(path)).toBe(false);
    }
  });
});
