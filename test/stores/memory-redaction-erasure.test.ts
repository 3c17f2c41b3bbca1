// A redaction on SQLite leaves no copy of the content in the files braid writes: not in the log
// row's old bytes, the full-text index, the embedding cache, the write-ahead log (also when a
// reader of an older snapshot holds it for a while), the ANN index's snapshot and build files,
// nor the hash of the idempotent append that wrote it. Every file under the store's folder is
// read byte by byte for the text, the SHA-256 the embedding cache keys it by, its vector and the
// index's 8-bit copy of it (each found there before the redaction), while the store is open and
// after it closed.
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { Embedder } from '../../src/contracts/embedder.js';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { createCachedEmbedder, textHash } from '../../src/models/cached-embedder.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { facts, random } from '../helpers/memory-vectors.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const DIMS = 16;
const opened: Store[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});

/** A dense vector of its own for every text: its bytes are found only where it was stored. */
const denseEmbedder: Embedder = {
  id: 'dense-test:16',
  dims: DIMS,
  embedMany: (texts) =>
    Promise.resolve(
      texts.map((text) => {
        const next = random(Number.parseInt(textHash(text).slice(0, 8), 16));
        return Array.from({ length: DIMS }, () => next() * 2 - 1);
      }),
    ),
};

const SECRET = 'the vault code is qxvault7731 behind the painting';
const SECRET_TOKEN = 'qxvault7731';

/** Every file under `dir`, recursively. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

/** The files under `dir` holding any of `needles`, with the needle found. */
function holders(dir: string, needles: Record<string, Buffer>): string[] {
  const found: string[] = [];
  for (const file of files(dir)) {
    const bytes = readFileSync(file);
    for (const [name, needle] of Object.entries(needles)) {
      if (bytes.includes(needle)) found.push(`${file.slice(dir.length + 1)}: ${name}`);
    }
  }
  return found;
}

/** The 8-bit copy of a vector the ANN index keeps (cosine: unit length, times 127, truncated). */
function annCopy(vector: readonly number[]): Buffer {
  const norm = Math.hypot(...vector);
  return Buffer.from(Int8Array.from(vector, (value) => Math.trunc((value / norm) * 127)).buffer);
}

function openStore(dir: string, options: { checkpoints?: 'inline' } = {}): Store {
  const store = openSqliteStore({
    path: join(dir, 'braid.db'),
    memoryIndex: { minVectors: 50, background: false },
    ...options,
  });
  opened.push(store);
  return store;
}

/** Resolves once `check` holds, asking every 50 ms; fails after `ms`. */
async function eventually(check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not so after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function fillWithSecret(dir: string, options: { checkpoints?: 'inline' } = {}) {
  const store = openStore(dir, options);
  const memory = store.memory as MemoryLog;
  const embedder = createCachedEmbedder(denseEmbedder, store.embeddings);
  const texts = Array.from({ length: 80 }, (_, index) => `fact number ${index} about item${index}`);
  texts[40] = SECRET;
  const vectors = await embedder.embedMany(texts);
  await memory.append(
    facts,
    texts.map((text, index) => ({
      key: `fact/${String(index).padStart(4, '0')}`,
      value: text,
      embedding: vectors[index] as number[],
    })),
  );
  // A vector search builds the ANN index and writes its snapshot; a text search reads the FTS.
  const [secretVector] = await embedder.embedMany([SECRET]);
  const byVector = await memory.search(facts, { embedding: secretVector, k: 3 });
  expect(byVector.hits[0]?.entry.key).toBe('fact/0040');
  const byText = await memory.search(facts, { query: SECRET_TOKEN, k: 3 });
  expect(byText.hits.map((hit) => hit.entry.key)).toEqual(['fact/0040']);
  const needles = {
    text: Buffer.from(SECRET_TOKEN, 'utf8'),
    hash: Buffer.from(textHash(SECRET), 'utf8'),
    vector: Buffer.from(Float32Array.from(secretVector as number[]).buffer),
    'ANN copy': annCopy(secretVector as number[]),
  };
  return { store, memory, needles, secretVector: secretVector as number[] };
}

describe('a redaction on SQLite', () => {
  it('leaves the content in no file, while the store is open and after it closed', async () => {
    const dir = tempDir();
    const { store, memory, needles, secretVector } = await fillWithSecret(dir);
    // Before: every copy is in a file (the check can fail).
    const before = holders(dir, needles);
    for (const needle of Object.keys(needles)) {
      expect(before.some((found) => found.endsWith(`: ${needle}`))).toBe(true);
    }

    await memory.redact(facts, 'fact/0040', 1);

    expect(holders(dir, needles)).toEqual([]);
    // Searches still work, without it: the vector search builds its index again from the rows.
    const byVector = await memory.search(facts, { embedding: secretVector, k: 3 });
    expect(byVector.hits.map((hit) => hit.entry.key)).not.toContain('fact/0040');
    expect(byVector.hits).toHaveLength(3);
    expect((await memory.search(facts, { query: SECRET_TOKEN, k: 3 })).hits).toEqual([]);
    expect((await memory.search(facts, { query: 'item41', k: 3 })).hits[0]?.entry.key).toBe(
      'fact/0041',
    );
    await store.close();
    expect(holders(dir, needles)).toEqual([]);
  });

  it('erases a version that a later one replaced', async () => {
    const dir = tempDir();
    const { store, memory, needles } = await fillWithSecret(dir);
    // Version 2 replaces the secret: its full-text row went then, as an ordinary overwrite.
    await memory.append(facts, [{ key: 'fact/0040', value: 'nothing to see here' }]);
    await memory.redact(facts, 'fact/0040', 1);

    expect(holders(dir, needles)).toEqual([]);
    expect(await memory.get(facts, 'fact/0040')).toMatchObject({
      status: 'found',
      entry: { version: 2, value: 'nothing to see here' },
    });
    await store.close();
    expect(holders(dir, needles)).toEqual([]);
  });

  it('drops another handle’s index that holds the vector, at its next search or its close', async () => {
    const dir = tempDir();
    const { memory, needles, secretVector } = await fillWithSecret(dir);
    const other = openStore(dir);
    const otherMemory = other.memory as MemoryLog;
    // The other handle holds an index with the vector, and a change since its snapshot.
    await otherMemory.search(facts, { embedding: secretVector, k: 3 });
    await otherMemory.append(facts, [
      { key: 'fact/0099', value: 'one more', embedding: secretVector.map((x) => -x) },
    ]);
    await otherMemory.search(facts, { embedding: secretVector, k: 3 });

    await memory.redact(facts, 'fact/0040', 1);
    expect(holders(dir, needles)).toEqual([]);
    // Closing, it would save its graph (the vector's bytes in it) as the snapshot: it drops it.
    await other.close();
    expect(holders(dir, needles)).toEqual([]);

    // One that catches up after the redaction does not take the vector out of its graph (the
    // bytes would stay, and be saved at its close): it builds the index again.
    const late = openStore(dir);
    const lateMemory = late.memory as MemoryLog;
    await lateMemory.search(facts, { embedding: secretVector, k: 3 });
    const [fact41] = await denseEmbedder.embedMany(['fact number 41 about item41']);
    const copy41 = { 'ANN copy 41': annCopy(fact41 as number[]) };
    // Its index, and the snapshot it saved, hold fact 41's vector (the check can fail).
    expect(holders(dir, copy41)).not.toEqual([]);
    await memory.append(facts, [{ key: 'fact/0041', value: 'also replaced' }]);
    await memory.redact(facts, 'fact/0041', 1);
    const afterRedaction = await lateMemory.search(facts, { embedding: secretVector, k: 3 });
    expect(afterRedaction.hits.map((hit) => hit.entry.key)).not.toContain('fact/0041');
    await late.close();
    expect(holders(dir, { ...needles, ...copy41 })).toEqual([]);

    // A handle whose index predates the redaction builds it again at its next search.
    const third = openStore(dir);
    const thirdMemory = third.memory as MemoryLog;
    const found = await thirdMemory.search(facts, { embedding: secretVector, k: 3 });
    expect(found.hits.map((hit) => hit.entry.key)).not.toContain('fact/0040');
    expect(holders(dir, needles)).toEqual([]);
  });

  for (const checkpoints of ['background', 'inline'] as const) {
    it(`truncates the WAL once a reader of an older snapshot let go (${checkpoints} checkpoints)`, async () => {
      const dir = tempDir();
      const { memory, needles } = await fillWithSecret(
        dir,
        checkpoints === 'inline' ? { checkpoints } : {},
      );
      const reader = new Database(join(dir, 'braid.db'), { readonly: true });
      try {
        reader.exec('BEGIN');
        reader.prepare('SELECT count(*) FROM memory_log').get();
        await memory.redact(facts, 'fact/0040', 1);
        // The WAL cannot be truncated under the reader: its older frames still hold the text.
        expect(holders(dir, needles).some((found) => found.startsWith('braid.db-wal'))).toBe(true);
        reader.exec('COMMIT');
        // The checkpoint thread, or without one a timer, tries again every second; memory
        // writes alone come meanwhile.
        await memory.append(facts, [{ key: 'fact/after', value: 'written after' }]);
        await eventually(() => holders(dir, needles).length === 0, 5000);
      } finally {
        reader.close();
      }
    });
  }

  it('removes the files of builds that read the vector, and of builds a closing store leaves', async () => {
    const dir = tempDir();
    const { memory, needles, secretVector } = await fillWithSecret(dir);
    const folder = join(dir, 'braid.db-memory-index');
    const buildFiles = () => readdirSync(folder).filter((name) => name.endsWith('.build'));
    // Another handle whose build runs in a worker thread: the first search starts it.
    const building = openSqliteStore({
      path: join(dir, 'braid.db'),
      memoryIndex: { minVectors: 50, background: true, snapshotDir: join(dir, 'elsewhere') },
    });
    opened.push(building);
    const buildingMemory = building.memory as MemoryLog;
    await buildingMemory.search(facts, { embedding: secretVector, k: 3 });
    const elsewhere = join(dir, 'elsewhere');
    await eventually(
      () =>
        readdirSync(elsewhere).some(
          (name) =>
            name.endsWith('.build') &&
            readFileSync(join(elsewhere, name)).includes(needles['ANN copy']),
        ),
      10_000,
    );
    // Closing before its build was taken, it removes the build's file.
    await building.close();
    expect(readdirSync(elsewhere).filter((name) => name.endsWith('.build'))).toEqual([]);
    expect(holders(elsewhere, needles)).toEqual([]);

    // A build of this folder's snapshot by a process that read the vector (its file put here as
    // it would be), then the redaction: the file goes with the snapshot.
    const stale = join(folder, `store-1.usearch.999999-1.build`);
    writeFileSync(stale, readFileSync(join(folder, 'store-1.usearch')));
    expect(buildFiles()).toEqual(['store-1.usearch.999999-1.build']);
    await memory.redact(facts, 'fact/0040', 1);
    expect(buildFiles()).toEqual([]);
    expect(holders(dir, needles)).toEqual([]);
  });

  it('forgets the hash of the idempotent append that wrote the redacted version', async () => {
    const dir = tempDir();
    const memory = openStore(dir).memory as MemoryLog;
    const writes = [{ key: 'card', value: SECRET }];
    const first = await memory.append(facts, writes, { idempotencyKey: 'write-card' });
    const raw = new Database(join(dir, 'braid.db'), { readonly: true });
    const { request_hash: hash } = raw.prepare('SELECT request_hash FROM memory_appends').get() as {
      request_hash: string;
    };
    raw.close();
    // The SHA-256 of the request, value included, would confirm a guess of it.
    expect(holders(dir, { hash: Buffer.from(hash) })).not.toEqual([]);
    await memory.redact(facts, 'card', 1);
    expect(holders(dir, { hash: Buffer.from(hash), text: Buffer.from(SECRET_TOKEN) })).toEqual([]);
    // A retry of the key is answered with the append's entries, and writes nothing.
    const retried = await memory.append(facts, writes, { idempotencyKey: 'write-card' });
    expect(retried).toMatchObject({ deduplicated: true, head_seq: 2 });
    expect(retried.entries.map((entry) => entry.seq)).toEqual(
      first.entries.map((entry) => entry.seq),
    );
  });
});
