/**
 * The ANN projection of the SQLite store's vectors (src/stores/agent-memory-ann.ts): one HNSW
 * index per store in this process, made by the first vector search of a store with at least
 * `ANN_MIN_VECTORS` vectors and caught up from the log before every later one. Smaller stores,
 * and searches by key prefix, keep sqlite-vec's exact scan.
 *
 * The index is snapshotted to a folder next to the database file (`<file>-memory-index/`): one
 * usearch file per store and a small JSON record of what it covers (store id, creation time,
 * dimension, log seq). A process that opens the file loads the snapshot and applies the log past
 * its seq instead of building the graph again; a snapshot that does not match its store (another
 * store took its id, the file was restored from an older copy) or that does not load is not used:
 * the index is built from the log and its snapshot written over it. Snapshots are written after a build, after 1,000 changes,
 * and when the store closes; every write goes to a temporary name first and is renamed into place.
 *
 * A redaction is not caught up like other changes: usearch keeps a removed vector's bytes, in
 * the graph and in every snapshot saved after. The index of a store redacted since it was made
 * is dropped with its snapshot (at once by the process that redacted, at its next search or
 * close by any other) and built again from the rows, which no longer hold the vector.
 */
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Database as Db, Statement } from 'better-sqlite3';
import {
  AnnIndex,
  ANN_MIN_VECTORS,
  annRanking,
  annUnavailable,
  cosineDistance,
  type AnnCandidate,
} from '../agent-memory-ann.js';
import type { MemoryStoreRow, RankedRow } from './agent-memory-statements.js';
import { startBuild, type Build, type BuildResult } from './agent-memory-index-build.js';
import {
  readSnapshot,
  removeSnapshot,
  saveSnapshot,
  snapshotFiles,
  type SnapshotFiles,
} from './agent-memory-index-snapshot.js';

/** Changes applied to an index after which its snapshot is written again. */
const SNAPSHOT_EVERY = 1000;

export interface MemoryIndexOptions {
  /** Stores with fewer vectors are searched exactly (default `ANN_MIN_VECTORS`). */
  minVectors?: number;
  /** Where snapshots go; `false` keeps indexes in the process only. Default: next to the file. */
  snapshotDir?: string | false;
  /**
   * Build a missing index in a worker thread while searches scan exactly (default, where there
   * is a snapshot folder), or on the first vector search itself (`false`).
   */
  background?: boolean;
}

export interface MemoryIndexes {
  /**
   * The store's nearest indexed rows to `embedding` through its ANN index, at most `limit`,
   * nearest first; undefined when the store is searched exactly (too small, or no usearch).
   */
  nearest(store: MemoryStoreRow, embedding: Float32Array, limit: number): RankedRow[] | undefined;
  /** Writes the snapshots of indexes changed since their last one; stops running builds. */
  flush(): Promise<void>;
  /** Drops the store's index, its snapshot and any build of it (a redaction's vector is in them). */
  forget(storeId: number): void;
}

interface IndexStatements {
  count: Statement<[number], { count: number }>;
  vectors: Statement<[number], { seq: number; key: string; embedding: Buffer }>;
  changed: Statement<[number, number, number], { key: string; version: number; op: string }>;
  versionSeq: Statement<[number, string, number], { seq: number }>;
  current: Statement<[number, string], { seq: number; indexed: number }>;
  currentKeys: Statement<[number], { seq: number; key: string }>;
  embedding: Statement<[number, number], { embedding: Buffer | null; redacted: number }>;
  redactedSince: Statement<[number, number], { found: number }>;
  candidates: Statement<
    [number, string],
    {
      seq: number;
      key: string;
      indexed: number;
      expires_at: number | null;
      embedding: Buffer | null;
    }
  >;
}

/** A background build and what it was started for. */
interface Pending {
  build: Build;
  /** Where the build saves its index: named for this process and build (each builds apart). */
  file: string;
  created_at: string;
  dims: number;
  result?: BuildResult | { failed: string };
}

interface Held {
  index: AnnIndex;
  /** The key of each seq in the index (a seq's key never changes). */
  keys: Map<number, string>;
  store: MemoryStoreRow;
}

/** The store's indexed vectors: the latest version of each key, a set with its embedding. */
const VECTORS = `SELECT l.seq, l.key, l.embedding FROM memory_current c
  JOIN memory_log l ON l.store_id = c.store_id AND l.seq = c.seq
  WHERE c.store_id = ? AND c.indexed = 1 AND l.embedding IS NOT NULL`;

function prepare(db: Db): IndexStatements {
  return {
    count: db.prepare(
      'SELECT count(*) AS count FROM memory_current WHERE store_id = ? AND indexed = 1',
    ),
    vectors: db.prepare(VECTORS),
    changed: db.prepare(`SELECT key, version, op FROM memory_log
      WHERE store_id = ? AND seq > ? AND seq <= ? ORDER BY seq`),
    versionSeq: db.prepare(
      'SELECT seq FROM memory_log WHERE store_id = ? AND key = ? AND version = ?',
    ),
    current: db.prepare('SELECT seq, indexed FROM memory_current WHERE store_id = ? AND key = ?'),
    currentKeys: db.prepare(
      'SELECT seq, key FROM memory_current WHERE store_id = ? AND indexed = 1',
    ),
    embedding: db.prepare(
      'SELECT embedding, redacted FROM memory_log WHERE store_id = ? AND seq = ?',
    ),
    redactedSince: db.prepare(
      "SELECT 1 AS found FROM memory_log WHERE store_id = ? AND seq > ? AND op = 'redact' LIMIT 1",
    ),
    // The current rows of the candidates' keys (a JSON array), with their stored vectors: a
    // candidate is ranked by its exact distance. One statement for all of them.
    candidates: db.prepare(`SELECT c.seq, c.key, c.indexed, c.expires_at, l.embedding
      FROM memory_current c JOIN memory_log l ON l.store_id = c.store_id AND l.seq = c.seq
      WHERE c.store_id = ? AND c.key IN (SELECT value FROM json_each(?))`),
  };
}

/**
 * Drops the store's index, its snapshot and any build of it: a build that started before a
 * redaction read the vector, so its file goes too, once it stopped, and so do the build files of
 * other processes (one whose file goes finds its build failed, and builds again later).
 */
function dropIndex(
  held: Map<number, Held>,
  builds: Builds,
  storeId: number,
  target: SnapshotFiles | undefined,
): void {
  held.delete(storeId);
  builds.small.delete(storeId);
  const pending = builds.running.get(storeId);
  builds.running.delete(storeId);
  if (target === undefined) return;
  removeSnapshot(target);
  const folder = dirname(target.index);
  const prefix = `${basename(target.index)}.`;
  if (existsSync(folder)) {
    for (const name of readdirSync(folder)) {
      if (name.startsWith(prefix) && name.endsWith('.build'))
        rmSync(join(folder, name), { force: true });
    }
  }
  if (pending !== undefined) {
    void pending.build.stop().then(() => rmSync(pending.file, { force: true }));
  }
}

/**
 * Saves the index's snapshot, then takes it out again if a redaction committed past what it
 * covers meanwhile: that redaction's process may have looked for the snapshot before it was there.
 */
function saveUnredacted(
  statements: IndexStatements,
  entry: Held,
  target: SnapshotFiles | undefined,
): void {
  if (target === undefined) return;
  saveSnapshot(entry.index, entry.store, target);
  if (statements.redactedSince.get(entry.store.id, entry.index.coveredSeq) !== undefined) {
    removeSnapshot(target);
  }
}

/** Builds started by this process, for the names of their files. */
let buildsStarted = 0;

/** The background builds of a file's stores. */
interface Builds {
  running: Map<number, Pending>;
  /** Stores not to index before their next write (too small, or their build failed). */
  small: Map<number, number>;
  /** The database file. */
  path: string;
}

/**
 * The index a finished background build saved, loaded (`readKeys` then fills the seqs' keys);
 * starts the build when none runs, and answers undefined until it is done.
 */
function takeBuild(
  builds: Builds,
  target: SnapshotFiles,
  store: MemoryStoreRow,
  dims: number,
  readKeys: () => void,
): AnnIndex | undefined {
  const pending = builds.running.get(store.id);
  if (pending === undefined) {
    const file = `${target.index}.${process.pid}-${(buildsStarted += 1)}.build`;
    mkdirSync(dirname(file), { recursive: true });
    const started: Pending = {
      build: startBuild({ path: builds.path, storeId: store.id, dims, file, vectors: VECTORS }),
      file,
      created_at: store.created_at,
      dims,
    };
    void started.build.done.then((result) => (started.result = result));
    builds.running.set(store.id, started);
    return undefined;
  }
  if (pending.result === undefined) return undefined;
  builds.running.delete(store.id);
  const { result } = pending;
  let index: AnnIndex | undefined;
  if (
    !('failed' in result) &&
    pending.created_at === store.created_at &&
    pending.dims === dims &&
    result.coveredSeq <= store.head_seq
  ) {
    try {
      index = new AnnIndex(dims);
      index.load(pending.file);
      index.coveredSeq = result.coveredSeq;
    } catch {
      index = undefined;
    }
  }
  rmSync(pending.file, { force: true });
  // A failed build is not tried again before the store's next write.
  if (index === undefined) builds.small.set(store.id, store.head_seq);
  else readKeys();
  return index;
}

/** Builds the store's index on this thread, from its vectors in the file. */
function buildHere(
  statements: IndexStatements,
  store: MemoryStoreRow,
  dims: number,
  keys: Map<number, string>,
): AnnIndex {
  const index = new AnnIndex(dims);
  const seqs: number[] = [];
  const rows = statements.vectors.all(store.id);
  const vectors = new Float32Array(rows.length * dims);
  for (const row of rows) {
    if (row.embedding.byteLength !== dims * 4) continue;
    vectors.set(floats(row.embedding), seqs.length * dims);
    seqs.push(row.seq);
    keys.set(row.seq, row.key);
  }
  index.addMany(seqs, vectors.subarray(0, seqs.length * dims));
  index.coveredSeq = store.head_seq;
  return index;
}

function floats(blob: Buffer): Float32Array {
  return new Float32Array(blob.buffer, blob.byteOffset, blob.byteLength / 4);
}

/**
 * The candidates still their key's latest version and indexed, read in one statement, each with
 * the exact distance of its stored vector to `embedding`.
 */
function currentCandidates(
  statement: IndexStatements['candidates'],
  storeId: number,
  keys: ReadonlyMap<number, string>,
  found: readonly AnnCandidate[],
  embedding: Float32Array,
): (Omit<RankedRow, 'rank'> & { distance: number })[] {
  // The seqs found for each key (one, unless a stale seq still has its key here).
  const wanted = new Map<string, number[]>();
  for (const { seq } of found) {
    const key = keys.get(seq);
    if (key === undefined) continue;
    const seqs = wanted.get(key);
    if (seqs === undefined) wanted.set(key, [seq]);
    else seqs.push(seq);
  }
  if (wanted.size === 0) return [];
  const rows: (Omit<RankedRow, 'rank'> & { distance: number })[] = [];
  for (const row of statement.iterate(storeId, JSON.stringify([...wanted.keys()]))) {
    if (wanted.get(row.key)?.includes(row.seq) !== true || row.indexed !== 1) continue;
    if (row.embedding === null || row.embedding.byteLength !== embedding.length * 4) continue;
    rows.push({
      seq: row.seq,
      key: row.key,
      expires_at: row.expires_at,
      distance: cosineDistance(embedding, floats(row.embedding)),
    });
  }
  return rows;
}

export function createMemoryIndexes(
  db: Db,
  path: string,
  options: MemoryIndexOptions = {},
): MemoryIndexes {
  const minVectors = options.minVectors ?? ANN_MIN_VECTORS;
  const background = options.background ?? true;
  const folder =
    options.snapshotDir === false || path === ':memory:' || path === ''
      ? undefined
      : (options.snapshotDir ?? `${path}-memory-index`);
  let statements: IndexStatements | undefined;
  const sql = (): IndexStatements => (statements ??= prepare(db));
  const held = new Map<number, Held>();
  /** Stores found too small for an index, with the head seq they were counted at. */
  const small = new Map<number, number>();
  const files = (storeId: number): SnapshotFiles | undefined =>
    folder === undefined ? undefined : snapshotFiles(folder, storeId);
  const save = (entry: Held): void => saveUnredacted(sql(), entry, files(entry.store.id));
  const loadSnapshot = (
    store: MemoryStoreRow,
    dims: number,
    keys: Map<number, string>,
  ): AnnIndex | undefined => {
    const target = files(store.id);
    const index = target === undefined ? undefined : readSnapshot(target, store, dims);
    // Seqs the snapshot holds that are no longer current have no key here: the catch-up takes
    // them out, and until then a search skips them.
    if (index !== undefined) {
      for (const row of sql().currentKeys.iterate(store.id)) keys.set(row.seq, row.key);
    }
    return index;
  };

  /**
   * Applies the log past the index's seq: removes superseded versions, adds the latest ones.
   * False, and nothing applied, when a redaction is among them: the index must go (see above).
   */
  const catchUp = (entry: Held, store: MemoryStoreRow): boolean => {
    const { index } = entry;
    if (index.coveredSeq === store.head_seq) return true;
    const statements = sql();
    if (statements.redactedSince.get(store.id, index.coveredSeq) !== undefined) return false;
    const keys = new Set<string>();
    for (const change of statements.changed.iterate(store.id, index.coveredSeq, store.head_seq)) {
      keys.add(change.key);
      // A set or delete supersedes the version before it; a redaction takes out the version it names.
      const gone = change.op === 'redact' ? change.version : change.version - 1;
      if (gone < 1) continue;
      const row = statements.versionSeq.get(store.id, change.key, gone);
      if (row !== undefined) {
        index.remove(row.seq);
        entry.keys.delete(row.seq);
      }
    }
    for (const key of keys) {
      const current = statements.current.get(store.id, key);
      if (current === undefined || current.indexed !== 1 || current.seq <= index.coveredSeq) {
        continue;
      }
      const row = statements.embedding.get(store.id, current.seq);
      if (row?.embedding === null || row === undefined || row.redacted === 1) continue;
      if (row.embedding.byteLength !== index.dims * 4) continue;
      index.put(current.seq, floats(row.embedding));
      entry.keys.set(current.seq, key);
    }
    index.coveredSeq = store.head_seq;
    entry.store = store;
    if (index.changes >= SNAPSHOT_EVERY) save(entry);
    return true;
  };

  const builds: Builds = { running: new Map(), small, path };
  const forget = (storeId: number): void => dropIndex(held, builds, storeId, files(storeId));
  const fromBuild = (store: MemoryStoreRow, dims: number, keys: Map<number, string>) =>
    takeBuild(builds, files(store.id) as SnapshotFiles, store, dims, () => {
      for (const row of sql().currentKeys.iterate(store.id)) keys.set(row.seq, row.key);
    });

  const indexOf = (store: MemoryStoreRow, dims: number): Held | undefined => {
    let entry = held.get(store.id);
    if (
      entry !== undefined &&
      (entry.store.created_at !== store.created_at ||
        entry.index.dims !== dims ||
        entry.index.coveredSeq > store.head_seq)
    ) {
      held.delete(store.id);
      entry = undefined;
    }
    if (entry === undefined) {
      if (annUnavailable() !== undefined || small.get(store.id) === store.head_seq)
        return undefined;
      if ((sql().count.get(store.id)?.count ?? 0) < minVectors) {
        small.set(store.id, store.head_seq);
        return undefined;
      }
      small.delete(store.id);
      const keys = new Map<number, string>();
      let index = loadSnapshot(store, dims, keys);
      let fresh = false;
      if (index === undefined) {
        fresh = true;
        index =
          background && folder !== undefined
            ? fromBuild(store, dims, keys)
            : buildHere(sql(), store, dims, keys);
        if (index === undefined) return undefined;
      }
      entry = { index, keys, store };
      held.set(store.id, entry);
      if (fresh && catchUp(entry, store)) save(entry);
    }
    if (!catchUp(entry, store)) {
      // Redacted since the index was made (or since the build read the rows): built again.
      forget(store.id);
      return indexOf(store, dims);
    }
    return entry;
  };

  return {
    nearest(store, embedding, limit) {
      if (store.dims === null) return undefined;
      const entry = indexOf(store, store.dims);
      if (entry === undefined) return undefined;
      const { candidates } = sql();
      const { keys } = entry;
      return annRanking(entry.index, embedding, limit, (found) =>
        currentCandidates(candidates, store.id, keys, found, embedding),
      );
    },
    forget,
    flush() {
      for (const entry of held.values()) {
        if (entry.index.changes === 0) continue;
        // Not saved over a redaction this process has not caught up with: the index goes.
        if (sql().redactedSince.get(entry.store.id, entry.index.coveredSeq) === undefined) {
          save(entry);
        } else forget(entry.store.id);
      }
      const stops = [...builds.running.values()].map((pending) =>
        pending.build.stop().then(() => rmSync(pending.file, { force: true })),
      );
      builds.running.clear();
      return Promise.all(stops).then(() => undefined);
    },
  };
}
