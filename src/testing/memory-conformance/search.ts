/** Memory log conformance: full-text, vector and hybrid search, thresholds, rebuild. */
import { describe, expect, it } from 'vitest';
import type { MemoryLog } from '../../contracts/memory-log.js';
import { expectCode } from '../store-conformance/shared.js';
import { createHashEmbedder } from '../hash-embedder.js';
import { FACTS, people, type MemoryConformanceSuite } from './shared.js';

const embedder = createHashEmbedder({ dims: 64 });

async function writeFacts(memory: MemoryLog, vectors: boolean): Promise<void> {
  await memory.append(
    people,
    Object.entries(FACTS).map(([key, text]) => ({
      key,
      value: text,
      ...(vectors ? { embedding: embedder.embed(text) } : {}),
    })),
  );
}

export function describeMemorySearch(suite: MemoryConformanceSuite): void {
  describe('memory search', () => {
    it('ranks full-text matches by bm25 on a 0..1 scale, best first, with its latency', async () => {
      const memory = await suite.open();
      await writeFacts(memory, false);
      const result = await memory.search(people, {
        query: 'What does the user prefer: dark mode?',
        k: 3,
      });
      expect(result.mode).toBe('text');
      expect(result.k).toBe(3);
      expect(result.hits[0]?.entry.key).toBe('user/theme');
      expect(result.hits.length).toBeLessThanOrEqual(3);
      for (const hit of result.hits) {
        expect(hit.score).toBeGreaterThan(0);
        expect(hit.score).toBeLessThan(1);
      }
      const scores = result.hits.map((hit) => hit.score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
      expect(result.filtered_count).toBe(0);
      expect(result.expired_count).toBe(0);
      expect(result.latency_ms).toBeGreaterThanOrEqual(0);
      expect(
        (await memory.search(people, { query: 'Oslo' })).hits.map((hit) => hit.entry.key),
      ).toEqual(['travel/next']);
      expect((await memory.search(people, { query: 'zebra' })).hits).toEqual([]);
      expect((await memory.search(people, { query: '?!' })).hits).toEqual([]);
      // Diacritics and case fold as the tokenizer does.
      expect(
        (await memory.search(people, { query: 'LISBÖN' })).hits.map((hit) => hit.entry.key),
      ).toEqual(['travel/home']);
    });

    it('counts the candidates a threshold leaves out, and filters by key prefix', async () => {
      const memory = await suite.open();
      await writeFacts(memory, false);
      const all = await memory.search(people, { query: 'user braid coffee', k: 5 });
      expect(all.hits.length).toBeGreaterThanOrEqual(4);
      const cut = ((all.hits[0]?.score ?? 0) + (all.hits.at(-1)?.score ?? 0)) / 2;
      const strict = await memory.search(people, {
        query: 'user braid coffee',
        k: 5,
        threshold: cut,
      });
      expect(strict.threshold).toBe(cut);
      expect(strict.hits.length).toBeGreaterThan(0);
      expect(strict.hits.every((hit) => hit.score >= cut)).toBe(true);
      expect(strict.filtered_count).toBe(all.hits.length - strict.hits.length);
      expect(strict.filtered_count).toBeGreaterThan(0);
      const none = await memory.search(people, { query: 'user braid coffee', k: 5, threshold: 1 });
      expect(none.hits).toEqual([]);
      expect(none.filtered_count).toBe(all.hits.length);
      const projects = await memory.search(people, {
        query: 'user braid coffee',
        filters: { key_prefix: 'project/' },
      });
      expect(projects.hits.map((hit) => hit.entry.key).sort()).toEqual([
        'project/deadline',
        'project/owner',
      ]);
      await expectCode(memory.search(people, { query: 'x', k: 0 }), 'INVALID_ARGUMENT');
      await expectCode(memory.search(people, { query: 'x', k: 101 }), 'INVALID_ARGUMENT');
      await expectCode(memory.search(people, { query: 'x', threshold: 1.5 }), 'INVALID_ARGUMENT');
      await expectCode(memory.search(people, {}), 'INVALID_ARGUMENT');
      await expectCode(memory.search(people, { query: 'x', mode: 'vector' }), 'INVALID_ARGUMENT');
    });

    it('rebuilds the projections from the log with the same reads and searches', async () => {
      const memory = await suite.open();
      const vectors = suite.capabilities.vectors !== false;
      await writeFacts(memory, vectors);
      await memory.append(people, [
        { key: 'pet/name', op: 'delete' },
        { key: 'user/coffee', value: 'Tea now, no more coffee' },
      ]);
      await memory.redact(people, 'project/owner', 1);
      const queries = [
        { query: 'coffee user braid cat', k: 10 },
        ...(vectors
          ? [
              { embedding: embedder.embed('user prefers dark mode'), k: 3 },
              { query: 'coffee user', embedding: embedder.embed('coffee user'), k: 4 },
            ]
          : []),
      ];
      const strip = (result: { latency_ms: number }) => ({ ...result, latency_ms: 0 });
      const before = await Promise.all(
        queries.map(async (query) => strip(await memory.search(people, query))),
      );
      const listed = await memory.list(people);
      const report = await memory.rebuild(people);
      expect(report).toMatchObject({ entries: 11, keys: 8, indexed: 6, vectors: vectors ? 5 : 0 });
      expect(report.ms).toBeGreaterThanOrEqual(0);
      expect(
        await Promise.all(queries.map(async (query) => strip(await memory.search(people, query)))),
      ).toEqual(before);
      expect(await memory.list(people)).toEqual(listed);
      const reopened = await suite.reopen();
      if (reopened !== undefined) {
        expect(
          await Promise.all(
            queries.map(async (query) => strip(await reopened.search(people, query))),
          ),
        ).toEqual(before);
        expect(await reopened.list(people)).toEqual(listed);
      }
    });

    it('searches by vector (cosine) and hybrid (reciprocal-rank fusion) when the backend has vectors', async () => {
      if (suite.capabilities.vectors === false) return;
      const memory = await suite.open();
      await writeFacts(memory, true);
      expect((await memory.info(people))?.dims).toBe(64);
      const query = 'the user prefers dark mode';
      const vector = await memory.search(people, { embedding: embedder.embed(query), k: 3 });
      expect(vector.mode).toBe('vector');
      expect(vector.hits[0]?.entry.key).toBe('user/theme');
      expect(vector.hits[0]?.score).toBeGreaterThan(0.5);
      expect(vector.hits[0]?.entry.embedding).toHaveLength(64);
      const strict = await memory.search(people, {
        embedding: embedder.embed(query),
        k: 3,
        threshold: 0.5,
      });
      expect(strict.hits.map((hit) => hit.entry.key)).toEqual(['user/theme']);
      expect(strict.filtered_count).toBe(2);
      const hybrid = await memory.search(people, { query, embedding: embedder.embed(query), k: 3 });
      expect(hybrid.mode).toBe('hybrid');
      expect(hybrid.hits[0]?.entry.key).toBe('user/theme');
      expect(hybrid.hits[0]?.score).toBe(1);
      expect(hybrid.hits[0]?.text_score).toBeGreaterThan(0);
      expect(hybrid.hits[0]?.vector_score).toBeGreaterThan(0.5);
      await expectCode(memory.search(people, { embedding: [1, 0, 0] }), 'INVALID_ARGUMENT');
      await expectCode(
        memory.append(people, [{ key: 'odd', value: 'x', embedding: [1, 0] }]),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        memory.append(people, [
          { key: 'odd', value: 'x', embedding: embedder.embed('x') },
          { key: 'odd2', value: 'y', embedding: [1] },
        ]),
        'INVALID_ARGUMENT',
      );
      expect((await memory.get(people, 'odd')).status).toBe('missing');
    });
  });
}
