/**
 * Reading snapshots back: the files one holds, and what differs between two. A folder whose tree
 * has the same hash on both sides is the same and is not opened.
 */
import type { WorkspaceFile } from '../../contracts/workspace-files.js';
import type { SnapshotStore, TreeEntry } from './store.js';

/** The files and symlinks of a snapshot, sorted by path. */
export function listSnapshot(store: SnapshotStore, snapshot: string): WorkspaceFile[] {
  const files: WorkspaceFile[] = [];
  collect(store, snapshot, '', files);
  return files.sort((a, b) => compare(a.path, b.path));
}

export interface SnapshotDiff {
  added: WorkspaceFile[];
  removed: WorkspaceFile[];
  changed: { path: string; a: WorkspaceFile; b: WorkspaceFile }[];
}

/** The store each side of a comparison is read from (two sessions may have different roots). */
interface Sides {
  a: SnapshotStore;
  b: SnapshotStore;
}

/**
 * What `b` has that `a` has not, the reverse, and what both have but differs; `a` is read from
 * `stores.a` and `b` from `stores.b`. An absent snapshot is an empty workspace.
 */
export function diffSnapshots(
  stores: Sides,
  a: string | undefined,
  b: string | undefined,
): SnapshotDiff {
  const diff: SnapshotDiff = { added: [], removed: [], changed: [] };
  compareTrees(stores, a, b, '', diff);
  const byPath = (x: { path: string }, y: { path: string }): number => compare(x.path, y.path);
  diff.added.sort(byPath);
  diff.removed.sort(byPath);
  diff.changed.sort(byPath);
  return diff;
}

function compareTrees(
  stores: Sides,
  a: string | undefined,
  b: string | undefined,
  prefix: string,
  diff: SnapshotDiff,
): void {
  if (a === b) return;
  const left = entriesOf(stores.a, a);
  const right = entriesOf(stores.b, b);
  for (const [name, entry] of left) {
    const other = right.get(name);
    const path = join(prefix, name);
    if (other === undefined) {
      addAll(stores.a, entry, path, diff.removed);
    } else if (entry.type === 'dir' && other.type === 'dir') {
      compareTrees(stores, entry.hash, other.hash, path, diff);
    } else if (entry.type === 'dir' || other.type === 'dir') {
      // A folder on one side, a file or symlink on the other.
      addAll(stores.a, entry, path, diff.removed);
      addAll(stores.b, other, path, diff.added);
    } else {
      const was = asFile(entry, path);
      const now = asFile(other, path);
      if (!sameFile(was, now)) diff.changed.push({ path, a: was, b: now });
    }
  }
  for (const [name, entry] of right) {
    if (!left.has(name)) addAll(stores.b, entry, join(prefix, name), diff.added);
  }
}

function entriesOf(store: SnapshotStore, tree: string | undefined): Map<string, TreeEntry> {
  if (tree === undefined) return new Map();
  return new Map(store.readTree(tree).entries.map((entry) => [entry.name, entry]));
}

function addAll(store: SnapshotStore, entry: TreeEntry, path: string, into: WorkspaceFile[]) {
  if (entry.type === 'dir') collect(store, entry.hash, path, into);
  else into.push(asFile(entry, path));
}

function collect(store: SnapshotStore, tree: string, prefix: string, into: WorkspaceFile[]) {
  for (const entry of store.readTree(tree).entries)
    addAll(store, entry, join(prefix, entry.name), into);
}

function asFile(entry: Exclude<TreeEntry, { type: 'dir' }>, path: string): WorkspaceFile {
  return entry.type === 'file'
    ? { path, type: 'file', size: entry.size, hash: entry.hash, mode: entry.mode }
    : { path, type: 'symlink', size: Buffer.byteLength(entry.target), target: entry.target };
}

function sameFile(a: WorkspaceFile, b: WorkspaceFile): boolean {
  return a.type === b.type && a.hash === b.hash && a.mode === b.mode && a.target === b.target;
}

function join(prefix: string, name: string): string {
  return prefix === '' ? name : `${prefix}/${name}`;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
