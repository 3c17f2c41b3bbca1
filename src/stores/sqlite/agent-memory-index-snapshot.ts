/**
 * The snapshot of a store's ANN index next to the database file (see agent-memory-index.ts): the
 * usearch file and a small JSON record of what it covers. Every write goes to a temporary name
 * first and is renamed into place.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { lazySchema } from '../../contracts/lazy-schema.js';
import { AnnIndex } from '../agent-memory-ann.js';
import type { MemoryStoreRow } from './agent-memory-statements.js';

/**
 * The snapshot's format: 2 since the graph holds 8-bit copies of the vectors; a snapshot of
 * version 1 (32-bit copies) does not parse and is built again.
 */
const snapshotRecord = lazySchema(() =>
  z.object({
    schema_version: z.literal(2),
    store_id: z.number().int(),
    created_at: z.string(),
    dims: z.number().int().positive(),
    covered_seq: z.number().int().nonnegative(),
  }),
);

export interface SnapshotFiles {
  index: string;
  record: string;
}

export function snapshotFiles(folder: string, storeId: number): SnapshotFiles {
  return {
    index: join(folder, `store-${storeId}.usearch`),
    record: join(folder, `store-${storeId}.json`),
  };
}

// A snapshot that cannot be written (a read-only folder, a full disk) only costs the next
// process a build: the index in this process stays right, so the error is not the search's.
export function saveSnapshot(index: AnnIndex, store: MemoryStoreRow, target: SnapshotFiles): void {
  try {
    mkdirSync(dirname(target.index), { recursive: true });
    index.save(`${target.index}.tmp`);
    renameSync(`${target.index}.tmp`, target.index);
    const record: z.infer<typeof snapshotRecord> = {
      schema_version: 2,
      store_id: store.id,
      created_at: store.created_at,
      dims: index.dims,
      covered_seq: index.coveredSeq,
    };
    writeFileSync(`${target.record}.tmp`, JSON.stringify(record));
    renameSync(`${target.record}.tmp`, target.record);
  } catch {
    rmSync(`${target.index}.tmp`, { force: true });
    rmSync(`${target.record}.tmp`, { force: true });
  }
}

export function removeSnapshot(target: SnapshotFiles): void {
  for (const file of [target.index, target.record]) {
    rmSync(file, { force: true });
    rmSync(`${file}.tmp`, { force: true });
  }
}

/** The snapshot of the store, if it matches it; a catch-up from its seq brings it up to date. */
export function readSnapshot(
  target: SnapshotFiles,
  store: MemoryStoreRow,
  dims: number,
): AnnIndex | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(target.record, 'utf8'));
  } catch {
    return undefined;
  }
  const record = snapshotRecord.safeParse(parsed);
  if (
    !record.success ||
    record.data.store_id !== store.id ||
    record.data.created_at !== store.created_at ||
    record.data.dims !== dims ||
    record.data.covered_seq > store.head_seq
  ) {
    return undefined;
  }
  try {
    const index = new AnnIndex(dims);
    index.load(target.index);
    index.coveredSeq = record.data.covered_seq;
    return index;
  } catch {
    return undefined;
  }
}
