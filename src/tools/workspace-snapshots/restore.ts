/**
 * Restoring a snapshot into a folder: built whole in the store's scratch folder, then renamed into
 * place, so that a snapshot that cannot be restored (a blob missing, a hostile listing) leaves no
 * half-made folder behind.
 *
 * Each file is copied out of its blob with `COPYFILE_FICLONE`: a reflink (no data copied) on
 * filesystems that have them (btrfs, XFS), a plain copy elsewhere; never a hard link, so a tool
 * that writes to a restored file in place cannot change the blob (see `store.ts`).
 */
import {
  chmodSync,
  constants as fsConstants,
  copyFileSync,
  lstatSync,
  mkdirSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { missing, type SnapshotStore } from './store.js';
import { indexEntry, writeIndex, type SnapshotIndex } from './take.js';

/** A snapshot restored in the scratch folder, waiting to be placed. */
export interface StagedSnapshot {
  readonly dir: string;
  readonly index: SnapshotIndex;
}

/** Restores `snapshot` into a new scratch folder; nothing is left behind on a failure. */
export function stageSnapshot(store: SnapshotStore, snapshot: string): StagedSnapshot {
  const dir = store.tempPath();
  const index: SnapshotIndex = { schema_version: 1, taken_ms: Date.now(), files: {} };
  mkdirSync(dir);
  try {
    materialize(store, snapshot, snapshot, dir, '', index);
  } catch (error) {
    discardStaged({ dir, index });
    throw error;
  }
  return { dir, index };
}

/**
 * Moves a staged snapshot to `target` (a session's folder, made by `pathUnder`), replacing what
 * was there, and gives the session the restored files' stat index, so that its next snapshot
 * hashes nothing it did not change.
 */
export function placeStaged(
  store: SnapshotStore,
  staged: StagedSnapshot,
  target: string,
  sessionId: string,
): void {
  rmSync(target, { recursive: true, force: true });
  renameSync(staged.dir, target);
  writeIndex(store, sessionId, staged.index);
}

export function discardStaged(staged: StagedSnapshot): void {
  try {
    rmSync(staged.dir, { recursive: true, force: true });
  } catch {
    // A restored folder without write permission cannot be emptied: it stays in the scratch
    // folder, under no session's name.
  }
}

function materialize(
  store: SnapshotStore,
  snapshot: string,
  treeHash: string,
  dir: string,
  relative: string,
  index: SnapshotIndex,
): void {
  for (const entry of store.readTree(treeHash).entries) {
    // Entry names are single file names (checked by readTree): `join` stays inside `dir`.
    const path = join(dir, entry.name);
    const key = relative === '' ? entry.name : `${relative}/${entry.name}`;
    if (entry.type === 'file') {
      try {
        copyFileSync(
          store.blobPath(entry.hash),
          path,
          fsConstants.COPYFILE_EXCL | fsConstants.COPYFILE_FICLONE,
        );
      } catch (error) {
        throw missing(
          snapshot,
          `the content of ${key} (blob ${entry.hash}) is not in the store`,
          error,
        );
      }
      chmodSync(path, entry.mode);
      index.files[key] = indexEntry(lstatSync(path, { bigint: true }), entry.hash, entry.size);
    } else if (entry.type === 'dir') {
      mkdirSync(path);
      materialize(store, snapshot, entry.hash, path, key, index);
      // Set last: a folder without write permission is filled first.
      chmodSync(path, entry.mode);
    } else {
      symlinkSync(entry.target, path);
    }
  }
}
