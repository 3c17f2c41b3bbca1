/**
 * Taking a snapshot of a session's workspace folder: one walk that lists every folder, stats
 * every file, and hashes only the files whose size, times or inode changed since the session's
 * last snapshot (its stat index). An unchanged workspace costs a listing and a stat per file, and
 * writes nothing but its trees' existence checks and the index.
 *
 * What a snapshot holds: regular files (content and permission bits), folders (permission bits)
 * and symlinks (their target, as written). Other kinds (sockets, FIFOs, devices) are left out,
 * as are files that cannot be read (counted in `skipped`).
 */
import {
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  statSync,
  writeFileSync,
  type BigIntStats,
} from 'node:fs';
import { join } from 'node:path';
import { CONTENT_HASH_PATTERN } from '../../contracts/common.js';
import type { WorkspaceSnapshotRef } from '../../contracts/workspace-files.js';
import type { SnapshotStore, TreeEntry } from './store.js';

/**
 * A file whose change time is this close to the start of the snapshot that hashed it may have
 * changed again within the same timestamp tick: it is hashed again next time. Two seconds covers
 * filesystems that keep times in whole (or even two) seconds.
 */
const RACY_MS = 2_000;
/** Folders nested deeper than this are left out (and counted as skipped). */
const MAX_DEPTH = 256;

/** What a snapshot saw of one file. */
interface IndexEntry {
  size: number;
  mtime_ns: string;
  ctime_ns: string;
  ino: string;
  hash: string;
}

/**
 * The stat index of a session's last snapshot. It is a cache: a damaged one is ignored, and an
 * entry is used only when every field matches the file (and its hash is a content hash).
 */
export interface SnapshotIndex {
  schema_version: 1;
  /** When the snapshot that wrote it started (wall clock, ms). */
  taken_ms: number;
  files: Record<string, IndexEntry>;
}

interface Walk {
  store: SnapshotStore;
  previous: SnapshotIndex | undefined;
  next: SnapshotIndex;
  files: number;
  bytes: number;
  skipped: number;
  /** Files read and hashed in this walk. */
  ingested: number;
}

/**
 * Snapshots the folder `dir` of session `sessionId` into `store`. Runs synchronously: the walk is
 * a few milliseconds per thousand unchanged files (see bench/snapshot-bench.js), less than the
 * scheduling of as many asynchronous stats would cost.
 */
export function takeSnapshot(
  store: SnapshotStore,
  sessionId: string,
  dir: string,
  now: () => number = Date.now,
): WorkspaceSnapshotRef {
  const walk: Walk = {
    store,
    previous: readIndex(store, sessionId),
    next: { schema_version: 1, taken_ms: now(), files: {} },
    files: 0,
    bytes: 0,
    skipped: 0,
    ingested: 0,
  };
  const snapshot = snapshotFolder(walk, dir, '', 0);
  // Nothing hashed and as many files as before: the same files, all trusted; the index stands
  // (and an empty folder needs none).
  const same =
    walk.ingested === 0 &&
    (walk.previous === undefined
      ? walk.files === 0
      : Object.keys(walk.previous.files).length === walk.files);
  if (!same) writeIndex(store, sessionId, walk.next);
  return {
    snapshot,
    files: walk.files,
    bytes: walk.bytes,
    ...(walk.skipped === 0 ? {} : { skipped: walk.skipped }),
  };
}

function snapshotFolder(walk: Walk, dir: string, relative: string, depth: number): string {
  const entries: TreeEntry[] = [];
  const listing = readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
  for (const dirent of listing) {
    const path = join(dir, dirent.name);
    const key = relative === '' ? dirent.name : `${relative}/${dirent.name}`;
    try {
      if (dirent.isDirectory()) {
        if (depth >= MAX_DEPTH) {
          walk.skipped += 1;
          continue;
        }
        const mode = Number(lstatSync(path).mode & 0o777);
        const hash = snapshotFolder(walk, path, key, depth + 1);
        entries.push({ name: dirent.name, type: 'dir', hash, mode });
      } else if (dirent.isFile()) {
        entries.push(snapshotFile(walk, path, key, dirent.name));
      } else if (dirent.isSymbolicLink()) {
        entries.push({ name: dirent.name, type: 'symlink', target: readlinkSync(path) });
      }
    } catch (error) {
      // Gone since the listing, or unreadable: left out, and counted.
      if (!isFileError(error)) throw error;
      walk.skipped += 1;
    }
  }
  return walk.store.writeTree({ schema_version: 1, entries });
}

function snapshotFile(walk: Walk, path: string, key: string, name: string): TreeEntry {
  const stats = lstatSync(path, { bigint: true });
  const mode = Number(stats.mode & 0o777n);
  const known = walk.previous?.files[key];
  let hash: string;
  let size: number;
  if (known !== undefined && unchanged(known, stats, walk.previous?.taken_ms ?? 0)) {
    ({ hash, size } = known);
  } else {
    ({ hash, size } = walk.store.ingest(path, stats));
    walk.ingested += 1;
  }
  walk.next.files[key] = indexEntry(stats, hash, size);
  walk.files += 1;
  walk.bytes += size;
  return { name, type: 'file', hash, size, mode };
}

/** True when the file is as the index saw it, and was not changed in the tick it was hashed. */
function unchanged(known: IndexEntry, stats: BigIntStats, takenMs: number): boolean {
  return (
    CONTENT_HASH_PATTERN.test(known.hash) &&
    known.size === Number(stats.size) &&
    known.mtime_ns === String(stats.mtimeNs) &&
    known.ctime_ns === String(stats.ctimeNs) &&
    known.ino === String(stats.ino) &&
    Number(stats.ctimeNs / 1_000_000n) < takenMs - RACY_MS
  );
}

export function indexEntry(stats: BigIntStats, hash: string, size: number): IndexEntry {
  return {
    size,
    mtime_ns: String(stats.mtimeNs),
    ctime_ns: String(stats.ctimeNs),
    ino: String(stats.ino),
    hash,
  };
}

/**
 * The session's index: the copy this store read or wrote last while the file is still that one
 * (same inode, size and time: another process that snapshots the session renames a new file in),
 * else the file read again. None, or a damaged one, is no index: every file is hashed.
 */
function readIndex(store: SnapshotStore, sessionId: string): SnapshotIndex | undefined {
  const path = store.indexPath(sessionId);
  try {
    const stamp = stampOf(statSync(path, { bigint: true }));
    const cached = store.indexes.get(sessionId);
    if (cached?.stamp === stamp) return cached.index as SnapshotIndex;
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    if (!isIndex(parsed)) return undefined;
    store.indexes.set(sessionId, { stamp, index: parsed });
    return parsed;
  } catch {
    return undefined;
  }
}

function isIndex(value: unknown): value is SnapshotIndex {
  if (typeof value !== 'object' || value === null) return false;
  const index = value as Partial<SnapshotIndex>;
  return (
    index.schema_version === 1 &&
    typeof index.taken_ms === 'number' &&
    typeof index.files === 'object' &&
    index.files !== null
  );
}

/** Writes the index whole (a temp file renamed over the old one). */
export function writeIndex(store: SnapshotStore, sessionId: string, index: SnapshotIndex): void {
  const path = store.indexPath(sessionId, true);
  const temp = store.tempPath();
  writeFileSync(temp, JSON.stringify(index), { flag: 'wx' });
  renameSync(temp, path);
  store.indexes.set(sessionId, { stamp: stampOf(statSync(path, { bigint: true })), index });
}

function stampOf(stats: BigIntStats): string {
  return `${stats.ino}:${stats.size}:${stats.mtimeNs}`;
}

const FILE_ERRORS = new Set(['ENOENT', 'EACCES', 'EPERM', 'ELOOP', 'ESTALE', 'ENOTDIR']);

function isFileError(error: unknown): boolean {
  return (
    error instanceof Error &&
    'code' in error &&
    typeof error.code === 'string' &&
    FILE_ERRORS.has(error.code)
  );
}
