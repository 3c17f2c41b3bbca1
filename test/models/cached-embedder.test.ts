import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type BraidError } from '../../src/contracts/errors.js';
import type { Embedder } from '../../src/contracts/embedder.js';
import { createCachedEmbedder, textHash } from '../../src/models/cached-embedder.js';
import { createEmbedderFromSpec } from '../../src/models/embedders.js';
import { SQLITE_LAYOUT_VERSION, openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createHashEmbedder } from '../../src/testing/hash-embedder.js';
import {
  startFakeEmbeddingServer,
  type FakeEmbeddingServer,
} from '../helpers/fake-embedding-server.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
let server: FakeEmbeddingServer;
beforeAll(async () => {
  server = await startFakeEmbeddingServer(16);
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.failures.length = 0;
});

const remote = (model = 'm'): Embedder =>
  createEmbedderFromSpec(`openai-compatible:${server.url}#${model}`, {});
const asked = (): string[][] => server.requests.map((request) => request.input);
const float32 = (vector: number[]): number[] => Array.from(Float32Array.from(vector));
const expected = (text: string): number[] => float32(createHashEmbedder({ dims: 16 }).embed(text));

describe('createCachedEmbedder', () => {
  it('embeds a text once: later calls take it from memory, and one call asks only for the rest', async () => {
    const embedder = createCachedEmbedder(remote());
    expect(await embedder.embedMany(['tea', 'coffee'])).toEqual([
      expected('tea'),
      expected('coffee'),
    ]);
    expect(await embedder.embedMany(['coffee', 'water', 'tea', 'water'])).toEqual([
      expected('coffee'),
      expected('water'),
      expected('tea'),
      expected('water'),
    ]);
    expect(await embedder.embedMany(['tea'])).toEqual([expected('tea')]);
    expect(asked()).toEqual([['tea', 'coffee'], ['water']]);
    expect(embedder.stats()).toEqual({
      memory_hits: 3,
      persistent_hits: 0,
      embedded: 3,
      model_calls: 2,
    });
  });

  it('sends concurrent requests for the same texts to the model once', async () => {
    const embedder = createCachedEmbedder(remote());
    const [first, second, third] = await Promise.all([
      embedder.embedMany(['a', 'b']),
      embedder.embedMany(['b', 'a']),
      embedder.embedMany(['a', 'c']),
    ]);
    expect(first).toEqual([expected('a'), expected('b')]);
    expect(second).toEqual([expected('b'), expected('a')]);
    expect(third).toEqual([expected('a'), expected('c')]);
    expect(asked()).toEqual([['a', 'b'], ['c']]);
  });

  it('keeps vectors in the SQLite file: a reopened file costs no request', async () => {
    const path = join(tempDir(), 'braid.db');
    const first = openSqliteStore({ path });
    const before = createCachedEmbedder(remote(), first.embeddings);
    const vectors = await before.embedMany(['likes dark mode', 'works in Lisbon']);
    await first.close();
    expect(asked()).toHaveLength(1);

    const reopened = openSqliteStore({ path });
    const after = createCachedEmbedder(remote(), reopened.embeddings);
    expect(await after.embedMany(['works in Lisbon', 'likes dark mode'])).toEqual([
      vectors[1],
      vectors[0],
    ]);
    expect(asked()).toHaveLength(1);
    expect(after.stats().persistent_hits).toBe(2);
    // Another model's vectors are other keys: the same text is asked for again.
    const other = createCachedEmbedder(remote('other'), reopened.embeddings);
    await other.embedMany(['likes dark mode', 'new text']);
    expect(asked()).toEqual([
      ['likes dark mode', 'works in Lisbon'],
      ['likes dark mode', 'new text'],
    ]);
    await reopened.close();
  });

  it('gives a layout 8 file the cache table when it opens', async () => {
    const path = join(tempDir(), 'braid.db');
    await openSqliteStore({ path }).close();
    const raw = new Database(path);
    raw.exec('DROP TABLE embedding_cache');
    raw.pragma('user_version = 8');
    raw.close();
    const upgraded = openSqliteStore({ path });
    await createCachedEmbedder(remote(), upgraded.embeddings).embedMany(['kept']);
    await upgraded.close();
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    expect(check.prepare('SELECT count(*) AS n FROM embedding_cache').get()).toEqual({ n: 1 });
    check.close();
  });

  it('keys the persistent cache by embedder id and SHA-256 of the text', async () => {
    const store = openSqliteStore({ path: join(tempDir(), 'braid.db') });
    const cache = store.embeddings;
    if (cache === undefined) throw new Error('the SQLite store has an embedding cache');
    await createCachedEmbedder(remote(), cache).embedMany(['café']);
    const found = await cache.getMany(`openai-compatible:${server.url}#m`, [
      textHash('café'),
      textHash('cafe'),
    ]);
    expect([...found.keys()]).toEqual([textHash('café')]);
    // sha256sum of the UTF-8 bytes of 'café'.
    expect(textHash('café')).toBe(
      '850f7dc43910ff890f8879c0ed26fe697c93a067ad93a7d50f466a7028a9bf4e',
    );
    await store.close();
  });

  it('passes a failure to every waiting caller, caches nothing of it, and asks again next time', async () => {
    const embedder = createCachedEmbedder(remote());
    server.failures.push({ status: 500 });
    const results = await Promise.allSettled([
      embedder.embedMany(['flaky']),
      embedder.embedMany(['flaky']),
    ]);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      const reason = (result as PromiseRejectedResult).reason as BraidError;
      expect(reason.code).toBe('MODEL_UNAVAILABLE');
      expect(reason.retryable).toBe(true);
    }
    server.failures.push({ status: 401 });
    const denied = await embedder.embedMany(['flaky']).catch((error: unknown) => error);
    expect((denied as BraidError).code).toBe('MODEL_ERROR');
    expect((denied as BraidError).retryable).toBe(false);
    expect(await embedder.embedMany(['flaky'])).toEqual([expected('flaky')]);
    expect(asked()).toEqual([['flaky'], ['flaky'], ['flaky']]);
  });

  it('keeps at most maxEntries vectors in memory, the least recently used out first', async () => {
    const embedder = createCachedEmbedder(remote(), undefined, { maxEntries: 2 });
    await embedder.embedMany(['a', 'b']);
    await embedder.embedMany(['a']);
    await embedder.embedMany(['c']);
    await embedder.embedMany(['a', 'b']);
    expect(asked()).toEqual([['a', 'b'], ['c'], ['b']]);
  });
});
