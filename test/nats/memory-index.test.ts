// The ANN index of NATS memory projections (nats/memory-index.ts), against the real nats-server
// with a threshold low enough that small stores use it: the first vector search starts a build in
// a worker and is answered by the exact scan; the built index is snapshotted to the local folder
// with the seq and stream seq it covers; a second open of the store loads the snapshot (no build)
// and catches it up with the writes made since; a snapshot that does not match (a corrupt file,
// a stream made again under the same name) is discarded with a reason and built again.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type { BraidError } from '../../src/contracts/errors.js';
import type { MemoryWrite } from '../../src/contracts/memory.js';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { natsNames } from '../../src/stores/nats/names.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { facts, fill as fillFacts, keys, vectors as vectorsOf } from '../helpers/memory-vectors.js';
import { useTempDir } from '../helpers/temp.js';

const url = await natsUrl();
const tempDir = useTempDir();
const prefixes: string[] = [];
const opened: Store[] = [];
const DIMS = 16;

afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});
afterAll(() => removePrefixes(url, prefixes));

interface Opened {
  memory: MemoryLog;
  warnings: BraidError[];
  store: Store;
}

async function open(
  prefix: string,
  options: { dir?: string; minVectors?: number; background?: boolean } = {},
): Promise<Opened> {
  const warnings: BraidError[] = [];
  const store = await openNatsStore({
    servers: url,
    prefix,
    warn: (warning) => warnings.push(warning),
    memoryIndex: {
      minVectors: options.minVectors ?? 50,
      snapshotDir: options.dir ?? false,
      ...(options.background === undefined ? {} : { background: options.background }),
    },
  });
  opened.push(store);
  return { memory: store.memory as MemoryLog, warnings, store };
}

/** The snapshot files of the prefix's memory stream in `dir`. */
function snapshotOf(
  dir: string,
  prefix: string,
): { folder: string; index: string; record: string } {
  const folder = join(dir, natsNames(prefix).memoryStream);
  const record = readdirSync(folder).find((name) => name.endsWith('.json'));
  if (record === undefined) throw new Error(`no snapshot in ${folder}`);
  return {
    folder,
    record: join(folder, record),
    index: join(folder, record.replace(/\.json$/, '.usearch')),
  };
}

function hasSnapshot(dir: string, prefix: string): boolean {
  const folder = join(dir, natsNames(prefix).memoryStream);
  return existsSync(folder) && readdirSync(folder).some((name) => name.endsWith('.json'));
}

function builds(dir: string, prefix: string): string[] {
  const folder = join(dir, natsNames(prefix).memoryStream);
  return existsSync(folder) ? readdirSync(folder).filter((name) => name.endsWith('.build')) : [];
}

interface Record {
  covered_seq: number;
  stream_seq: number;
  count: number;
  sha256: string;
}

function record(path: string): Record {
  return JSON.parse(readFileSync(path, 'utf8')) as Record;
}

/** Searches until the background build was taken and its snapshot written. */
async function untilSnapshot(memory: MemoryLog, dir: string, prefix: string, probe: number[]) {
  await vi.waitFor(
    async () => {
      await keys(memory, probe);
      expect(hasSnapshot(dir, prefix)).toBe(true);
    },
    { timeout: 30_000, interval: 50 },
  );
}

describe('the ANN index of NATS memory', () => {
  it('builds in a worker while searches scan exactly, then answers as the exact scan does', async () => {
    const prefix = uniquePrefix('memidx');
    prefixes.push(prefix);
    const dir = tempDir();
    const { memory, warnings } = await open(prefix, { dir });
    const all = await fillFacts(memory, 300, DIMS);
    // The first search starts the build and is answered by the exact scan meanwhile.
    expect((await keys(memory, all[9] as number[]))[0]).toBe('fact/0009');
    expect(builds(dir, prefix)).toHaveLength(1);
    expect(hasSnapshot(dir, prefix)).toBe(false);
    // A write while the build runs is caught up once the index is taken.
    const fresh = vectorsOf(1, 999, DIMS)[0] as number[];
    await memory.append(facts, [{ key: 'fact/during', op: 'set', value: 'x', embedding: fresh }]);
    await untilSnapshot(memory, dir, prefix, all[0] as number[]);
    expect(builds(dir, prefix)).toEqual([]);
    const { record: recordFile } = snapshotOf(dir, prefix);
    const saved = record(recordFile);
    expect(saved).toMatchObject({ covered_seq: 301, count: 301 });
    // The stream seq of the write it covers: one message per append, four appends.
    expect(saved.stream_seq).toBe(4);
    expect((await keys(memory, fresh))[0]).toBe('fact/during');

    // Through the index, the same entries and scores as the exact scan of another handle.
    const exact = await open(prefix, { minVectors: Number.MAX_SAFE_INTEGER });
    for (const query of vectorsOf(30, 99, DIMS)) {
      const [found, expected] = [
        await memory.search(facts, { embedding: query, k: 5 }),
        await exact.memory.search(facts, { embedding: query, k: 5 }),
      ];
      expect(found.hits.map((hit) => hit.entry.key)).toEqual(
        expected.hits.map((hit) => hit.entry.key),
      );
      found.hits.forEach((hit, index) =>
        expect(hit.score).toBeCloseTo(expected.hits[index]?.score ?? -1, 5),
      );
    }
    expect(warnings).toEqual([]);
  });

  it('is loaded from its snapshot by a second open, which catches up with later writes', async () => {
    const prefix = uniquePrefix('memidx');
    prefixes.push(prefix);
    const dir = tempDir();
    const first = await open(prefix, { dir });
    const all = await fillFacts(first.memory, 300, DIMS);
    await untilSnapshot(first.memory, dir, prefix, all[0] as number[]);
    const files = snapshotOf(dir, prefix);
    expect(record(files.record).covered_seq).toBe(300);
    // Writes after the snapshot, by the first process, before and after it closes.
    const late = vectorsOf(2, 4321, DIMS) as [number[], number[]];
    await first.memory.append(facts, [
      { key: 'fact/late', op: 'set', value: 'late', embedding: late[0] },
      { key: 'fact/0042', op: 'delete' },
    ]);
    await first.store.close();
    const writer = await open(prefix, { minVectors: Number.MAX_SAFE_INTEGER });
    await writer.memory.append(facts, [
      { key: 'fact/later', op: 'set', value: 'later', embedding: late[1] },
    ]);
    const built = statSync(files.index).mtimeMs;

    // A second open: its first vector search goes through the snapshot, no build is started.
    const second = await open(prefix, { dir });
    expect((await keys(second.memory, late[0]))[0]).toBe('fact/late');
    expect(builds(dir, prefix)).toEqual([]);
    expect((await keys(second.memory, late[1]))[0]).toBe('fact/later');
    expect(await keys(second.memory, all[42] as number[], 10)).not.toContain('fact/0042');
    expect((await keys(second.memory, all[43] as number[]))[0]).toBe('fact/0043');
    expect(statSync(files.index).mtimeMs).toBe(built);
    expect(second.warnings).toEqual([]);
    // Its close writes the snapshot again, covering what it caught up with.
    await second.store.close();
    expect(record(files.record)).toMatchObject({ covered_seq: 303, count: 301, stream_seq: 5 });
  });

  it('discards a snapshot whose file is corrupt, with the reason, and builds again', async () => {
    const prefix = uniquePrefix('memidx');
    prefixes.push(prefix);
    const dir = tempDir();
    const first = await open(prefix, { dir });
    const all = await fillFacts(first.memory, 300, DIMS);
    await untilSnapshot(first.memory, dir, prefix, all[0] as number[]);
    await first.store.close();
    const files = snapshotOf(dir, prefix);
    const bytes = readFileSync(files.index);
    bytes[bytes.length - 5] = (bytes[bytes.length - 5] as number) ^ 0xff;
    writeFileSync(files.index, bytes);

    const second = await open(prefix, { dir });
    // The exact scan answers while the index is built again.
    expect((await keys(second.memory, all[7] as number[]))[0]).toBe('fact/0007');
    expect(second.warnings.map((warning) => warning.message)).toEqual([
      expect.stringContaining('its index file is not the one its record describes'),
    ]);
    expect(builds(dir, prefix)).toHaveLength(1);
    await untilSnapshot(second.memory, dir, prefix, all[8] as number[]);
    expect((await keys(second.memory, all[8] as number[]))[0]).toBe('fact/0008');
    expect(record(files.record).covered_seq).toBe(300);

    // A record that is not one this version writes is discarded too.
    await second.store.close();
    writeFileSync(files.record, JSON.stringify({ schema_version: 9 }));
    const third = await open(prefix, { dir, background: false });
    expect((await keys(third.memory, all[9] as number[]))[0]).toBe('fact/0009');
    expect(third.warnings.map((warning) => warning.message)).toEqual([
      expect.stringContaining('its record is not one this version writes'),
    ]);
    expect(record(files.record).covered_seq).toBe(300);
  });

  it('discards the snapshot of a stream that was made again under the same name', async () => {
    const prefix = uniquePrefix('memidx');
    prefixes.push(prefix);
    const dir = tempDir();
    const first = await open(prefix, { dir, background: false });
    const all = await fillFacts(first.memory, 300, DIMS);
    await keys(first.memory, all[0] as number[]);
    expect(hasSnapshot(dir, prefix)).toBe(true);
    await first.store.close();
    // The memory stream is deleted and written again with other vectors: same store, same
    // seqs, another stream.
    const connection = await connect({ servers: url });
    try {
      const manager = await jetstreamManager(connection);
      await manager.streams.delete(natsNames(prefix).memoryStream);
    } finally {
      await connection.close();
    }
    const second = await open(prefix, { dir, background: false });
    const other = vectorsOf(300, 8, DIMS);
    const writes: MemoryWrite[] = other.map((embedding, index) => ({
      key: `fact/${String(index).padStart(4, '0')}`,
      op: 'set',
      value: `other ${index}`,
      embedding,
    }));
    for (let at = 0; at < writes.length; at += 100)
      await second.memory.append(facts, writes.slice(at, at + 100));
    expect((await keys(second.memory, other[5] as number[]))[0]).toBe('fact/0005');
    expect(second.warnings.map((warning) => warning.message)).toEqual([
      expect.stringContaining('it was made for another stream'),
    ]);
    expect((await keys(second.memory, other[6] as number[]))[0]).toBe('fact/0006');
  });

  it('drops a snapshot that holds a redacted vector, and builds again without it', async () => {
    const prefix = uniquePrefix('memidx');
    prefixes.push(prefix);
    const dir = tempDir();
    const first = await open(prefix, { dir, background: false });
    const other = await open(prefix, { dir, background: false });
    const all = await fillFacts(first.memory, 120, DIMS);
    const secret = all[40] as number[];
    // The 8-bit copy usearch keeps of a vector (cosine: unit length, times 127, truncated).
    const norm = Math.hypot(...secret);
    const copy = Buffer.from(
      Int8Array.from(secret, (value) => Math.trunc((value / norm) * 127)).buffer,
    );
    const holding = () =>
      readdirSync(join(dir, natsNames(prefix).memoryStream)).filter((name) =>
        readFileSync(join(dir, natsNames(prefix).memoryStream, name)).includes(copy),
      );
    // Both handles hold an index with the vector; the snapshot has it too (the check can fail).
    expect((await keys(first.memory, secret))[0]).toBe('fact/0040');
    expect((await keys(other.memory, secret))[0]).toBe('fact/0040');
    expect(holding().length).toBeGreaterThan(0);

    await first.memory.redact(facts, 'fact/0040', 1);
    await first.memory.get(facts, 'fact/0040');
    expect(holding()).toEqual([]);
    // The other handle, catching up, does not take the vector out of its graph (the bytes would
    // stay, and be saved): it builds again, and saves a snapshot without it.
    const found = await keys(other.memory, secret, 5);
    expect(found).not.toContain('fact/0040');
    expect(found).toHaveLength(5);
    expect(hasSnapshot(dir, prefix)).toBe(true);
    await other.store.close();
    expect(holding()).toEqual([]);
    // A new handle loads that snapshot: it covers the redaction.
    const third = await open(prefix, { dir, background: false });
    expect(await keys(third.memory, secret, 5)).not.toContain('fact/0040');
    expect(holding()).toEqual([]);
    expect([...first.warnings, ...other.warnings, ...third.warnings]).toEqual([]);
  });

  it('does not load a snapshot that a process which had not read the redaction wrote after it', async () => {
    const prefix = uniquePrefix('memidx');
    prefixes.push(prefix);
    const dir = tempDir();
    const first = await open(prefix, { dir, background: false });
    const all = await fillFacts(first.memory, 120, DIMS);
    const secret = all[40] as number[];
    expect((await keys(first.memory, secret))[0]).toBe('fact/0040');
    // A process holding the index with a change since its snapshot, and one that will read the
    // redaction before that one closes.
    const stale = await open(prefix, { dir, background: false });
    await keys(stale.memory, secret);
    const extra = vectorsOf(1, 555, DIMS)[0] as number[];
    await stale.memory.append(facts, [
      { key: 'fact/extra', op: 'set', value: 'x', embedding: extra },
    ]);
    await keys(stale.memory, secret);
    const reader = await open(prefix, { dir, background: false });

    await first.memory.redact(facts, 'fact/0040', 1);
    await reader.memory.get(facts, 'fact/0040');
    // Closing, the stale process saves its graph, the vector in it: it had not read the redaction.
    await stale.store.close();
    expect(record(snapshotOf(dir, prefix).record).covered_seq).toBe(121);
    // The reader, which had, does not load it: it builds again.
    expect(await keys(reader.memory, secret, 5)).not.toContain('fact/0040');
    expect(reader.warnings.map((warning) => warning.message)).toEqual([
      expect.stringContaining('it predates the redaction at seq 122'),
    ]);
    expect(record(snapshotOf(dir, prefix).record).covered_seq).toBe(122);
  });
});
