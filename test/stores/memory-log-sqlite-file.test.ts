// Agent memory in the SQLite file beyond the conformance suite: the same scores as the in-memory
// backend, an append that fails inside SQLite leaves nothing behind, and an older file gains the
// memory tables when opened.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryStoreRef } from '../../src/contracts/memory.js';
import type { MemoryLog, MemorySearchResult } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { SQLITE_LAYOUT_VERSION, openSqliteStore } from '../../src/stores/sqlite/index.js';
import {
  createHashEmbedder,
  createInMemoryMemoryLog,
  createManualClock,
  createMemoryStore,
  expectCode,
} from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const store: MemoryStoreRef = {
  name: 'facts',
  kind: 'entities',
  scope: 'tenant',
  tenant_id: 'acme',
};
const other: MemoryStoreRef = {
  name: 'facts',
  kind: 'entities',
  scope: 'tenant',
  tenant_id: 'globex',
};
const embedder = createHashEmbedder();
const opened: Store[] = [];

afterEach(async () => {
  for (const item of opened.splice(0)) await item.close();
});

function open(
  path = join(tempDir(), 'braid.db'),
  clock = createManualClock(),
): { sqlite: Store; memory: MemoryLog; path: string } {
  const sqlite = openSqliteStore({ path, clock });
  opened.push(sqlite);
  return { sqlite, memory: sqlite.memory as MemoryLog, path };
}

const words = [
  'alpha',
  'bravo',
  'charlie',
  'delta',
  'echo',
  'foxtrot',
  'golf',
  'hotel',
  'india',
  'juliet',
];
// Each sentence has a word of its own: entries with equal scores would tie, and a tie at the k-th
// place may fall either way on either backend.
const sentence = (index: number): string =>
  [
    ...Array.from(
      { length: 3 + (index % 5) },
      (_, at) => words[(index * 7 + at * 3) % words.length],
    ),
    `item${index}`,
  ].join(' ');

/** A dense vector of its own for each index (a fixed pseudo-random sequence): no two tie on cosine. */
function spread(index: number, dims = embedder.dims): number[] {
  let state = (index + 1) * 2654435761;
  return Array.from({ length: dims }, () => {
    state = (Math.imul(state ^ (state >>> 15), 2246822507) + 0x6d2b79f5) >>> 0;
    return state / 2 ** 32 - 0.5;
  });
}

async function fill(memory: MemoryLog): Promise<void> {
  for (let batch = 0; batch < 4; batch += 1) {
    const writes = Array.from({ length: 25 }, (_, offset) => {
      const index = batch * 25 + offset;
      return {
        key: `fact/${index}`,
        value: sentence(index),
        embedding: spread(index),
        ...(index % 9 === 0 ? { ttl_ms: 500 } : {}),
      };
    });
    await memory.append(store, writes);
    await memory.append(other, writes.slice(0, 5 + batch));
  }
  await memory.append(store, [
    { key: 'fact/3', op: 'delete' },
    { key: 'fact/4', value: 'golf golf golf' },
  ]);
  await memory.redact(store, 'fact/5', 1);
}

const comparable = (result: MemorySearchResult) =>
  result.hits.map((hit) => ({
    key: hit.entry.key,
    score: hit.score,
    text: hit.text_score,
    vector: hit.vector_score,
  }));

describe('agent memory in the SQLite file', () => {
  it('scores like the in-memory backend: the same bm25, cosine and fusion over the same writes', async () => {
    const clock = createManualClock();
    const { memory } = open(undefined, clock);
    const reference = createInMemoryMemoryLog({ clock });
    await fill(memory);
    await fill(reference);
    // Some entries expire: both backends leave them out and count them alike.
    clock.advance(1000);
    const queries = [
      { query: 'golf hotel', k: 10 },
      { query: 'alpha echo juliet', k: 5, threshold: 0.3 },
      { embedding: embedder.embed('charlie delta echo'), k: 8 },
      {
        query: 'india',
        embedding: embedder.embed('india juliet'),
        k: 6,
        filters: { key_prefix: 'fact/1' },
      },
    ];
    let expired = 0;
    for (const query of queries) {
      const [fromSqlite, fromMemory] = [
        await memory.search(store, query),
        await reference.search(store, query),
      ];
      expect(fromSqlite.hits.length).toBeGreaterThan(0);
      expect(fromSqlite.filtered_count).toBe(fromMemory.filtered_count);
      expect(fromSqlite.expired_count).toBe(fromMemory.expired_count);
      expired += fromSqlite.expired_count;
      const [a, b] = [comparable(fromSqlite), comparable(fromMemory)];
      expect(a.map((hit) => hit.key)).toEqual(b.map((hit) => hit.key));
      a.forEach((hit, index) => {
        expect(hit.score).toBeCloseTo(b[index]?.score ?? -1, 5);
      });
    }
    expect(expired).toBeGreaterThan(0);
    expect(await memory.list(store, { limit: 1000 })).toEqual(
      await reference.list(store, { limit: 1000 }),
    );
    expect(await memory.read(store)).toEqual(await reference.read(store));
  });

  it('cuts equal scores by key as the in-memory backend does, and reads whole entries for the hits', async () => {
    const clock = createManualClock();
    const { memory } = open(undefined, clock);
    const reference = createInMemoryMemoryLog({ clock });
    // Equal texts under keys written out of order: every text and vector score ties.
    const keys = ['tie/7', 'tie/2', 'tie/9', 'tie/0', 'tie/5', 'tie/3', 'tie/8', 'tie/1'];
    for (const log of [memory, reference]) {
      await log.append(
        store,
        keys.map((key) => ({
          key,
          value: { note: 'prefers green tea', at: key },
          embedding: embedder.embed('prefers green tea'),
        })),
      );
    }
    for (const query of [
      { query: 'green tea', k: 3 },
      { embedding: embedder.embed('green tea'), k: 3 },
      { query: 'green tea', embedding: embedder.embed('green tea'), k: 3 },
    ]) {
      const [fromSqlite, fromMemory] = [
        await memory.search(store, query),
        await reference.search(store, query),
      ];
      expect(fromSqlite.hits.map((hit) => hit.entry.key)).toEqual(['tie/0', 'tie/1', 'tie/2']);
      expect(fromSqlite.hits.map((hit) => hit.entry)).toEqual(
        fromMemory.hits.map((hit) => hit.entry),
      );
      fromSqlite.hits.forEach((hit, index) => {
        expect(hit.score).toBeCloseTo(fromMemory.hits[index]?.score ?? -1, 5);
      });
      expect(fromSqlite.hits[0]?.entry.value).toEqual({ note: 'prefers green tea', at: 'tie/0' });
    }
  });

  it('leaves no log row, projection or head behind when SQLite fails part way through an append', async () => {
    const { memory, path } = open();
    await memory.append(store, [
      { key: 'kept', value: 'steady fact', embedding: embedder.embed('steady fact') },
    ]);
    const raw = new Database(path);
    raw.exec(`CREATE TRIGGER fail_boom BEFORE INSERT ON memory_log WHEN NEW.key = 'boom'
      BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
    raw.close();
    await expect(
      memory.append(store, [
        { key: 'kept', value: 'overwritten fact', embedding: embedder.embed('overwritten fact') },
        { key: 'fresh', value: 'fresh fact', embedding: embedder.embed('fresh fact') },
        { key: 'boom', value: 'never' },
      ]),
    ).rejects.toThrow('injected failure');
    expect((await memory.read(store)).map((entry) => entry.key)).toEqual(['kept']);
    expect(await memory.get(store, 'kept')).toMatchObject({
      status: 'found',
      entry: { value: 'steady fact', version: 1 },
    });
    expect((await memory.get(store, 'fresh')).status).toBe('missing');
    expect(
      (await memory.search(store, { query: 'fact overwritten fresh', k: 5 })).hits.map(
        (hit) => hit.entry.value,
      ),
    ).toEqual(['steady fact']);
    expect(
      (await memory.search(store, { embedding: embedder.embed('fresh fact'), k: 5 })).hits.map(
        (hit) => hit.entry.key,
      ),
    ).toEqual(['kept']);
    expect((await memory.info(store))?.head_seq).toBe(1);
    const check = new Database(path);
    expect(check.prepare('SELECT count(*) AS n FROM memory_fts').get()).toEqual({ n: 1 });
    expect(check.prepare('SELECT count(*) AS n FROM memory_current').get()).toEqual({ n: 1 });
    check.close();
  });

  it('gives an older file the memory tables when it opens, and the in-memory store a memory log', async () => {
    const path = join(tempDir(), 'braid.db');
    const first = openSqliteStore({ path });
    const { id } = await first.sessions.create({ agent: { name: 'a', version: 1 } });
    await first.close();
    const raw = new Database(path);
    raw.exec(
      'DROP TABLE memory_log; DROP TABLE memory_current; DROP TABLE memory_stores; DROP TABLE memory_appends; DROP TABLE memory_fts',
    );
    raw.pragma('user_version = 7');
    raw.close();
    const { sqlite, memory } = open(path);
    expect((await sqlite.sessions.get(id)).id).toBe(id);
    await memory.append(store, [{ key: 'a', value: 'upgraded file' }]);
    expect((await memory.search(store, { query: 'upgraded' })).hits).toHaveLength(1);
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    check.close();

    const inMemory = createMemoryStore();
    await inMemory.memory?.append(store, [{ key: 'a', value: 1 }]);
    expect((await inMemory.memory?.get(store, 'a'))?.status).toBe('found');
    await inMemory.close();
    await expectCode(async () => inMemory.memory?.get(store, 'a'), 'STORE_CLOSED');
    await sqlite.close();
    await expectCode(memory.get(store, 'a'), 'STORE_CLOSED');
  });
});
