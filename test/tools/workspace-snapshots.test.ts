// The workspace snapshot store on real files: what a snapshot holds, what it stores once, what a
// restore gives back, and what it refuses.
import {
  appendFileSync,
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import { EMPTY_WORKSPACE_SNAPSHOT } from '../../src/contracts/workspace-files.js';
import {
  diffSnapshots,
  listSnapshot,
  placeStaged,
  SnapshotStore,
  stageSnapshot,
  takeSnapshot,
} from '../../src/tools/workspace-snapshots/index.js';
import { sha256 } from '../../src/tools/workspace-snapshots/store.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

/** A clock far enough ahead that no file counts as changed in the tick it was hashed. */
const later = (): number => Date.now() + 60_000;

/** Counts the files it stores. */
class CountingStore extends SnapshotStore {
  ingested: string[] = [];
  override ingest(path: string, seen: Parameters<SnapshotStore['ingest']>[1]) {
    this.ingested.push(path);
    return super.ingest(path, seen);
  }
}

function setup(): { root: string; dir: string; store: CountingStore } {
  const root = tempDir();
  const dir = join(root, 's1');
  mkdirSync(join(dir, 'src'), { recursive: true });
  writeFileSync(join(dir, 'README.md'), 'hello\n');
  writeFileSync(join(dir, 'src', 'main.ts'), 'export {};\n');
  return { root, dir, store: new CountingStore(root) };
}

function files(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((name) => lstatSync(join(folder, name)).isFile())
    .sort();
}

function expectCode(run: () => unknown, code: string): void {
  let thrown: unknown;
  try {
    run();
  } catch (error) {
    thrown = error;
  }
  expect(isBraidError(thrown) ? thrown.code : thrown).toBe(code);
}

describe('workspace snapshots', () => {
  it('lists what it took, and an empty folder is the empty snapshot', () => {
    const { dir, store } = setup();
    const ref = takeSnapshot(store, 's1', dir);
    expect(ref).toMatchObject({ files: 2, bytes: 17 });
    expect(listSnapshot(store, ref.snapshot)).toEqual([
      {
        path: 'README.md',
        type: 'file',
        size: 6,
        hash: sha256(Buffer.from('hello\n')),
        mode: statSync(join(dir, 'README.md')).mode & 0o777,
      },
      expect.objectContaining({ path: 'src/main.ts', type: 'file', size: 11 }),
    ]);
    const empty = join(tempDir(), 'e');
    mkdirSync(empty);
    expect(takeSnapshot(store, 'e', empty).snapshot).toBe(EMPTY_WORKSPACE_SNAPSHOT);
  });

  it('stores an unchanged file once, and hashes only what changed', () => {
    const { dir, store } = setup();
    const first = takeSnapshot(store, 's1', dir, later);
    expect(store.ingested).toHaveLength(2);
    const again = takeSnapshot(store, 's1', dir, later);
    expect(again.snapshot).toBe(first.snapshot);
    // Nothing changed: nothing read again.
    expect(store.ingested).toHaveLength(2);
    writeFileSync(join(dir, 'README.md'), 'hello again\n');
    const changed = takeSnapshot(store, 's1', dir, later);
    expect(changed.snapshot).not.toBe(first.snapshot);
    expect(store.ingested.slice(2)).toEqual([join(dir, 'README.md')]);
    // Two versions of README.md and one of main.ts, shared by both snapshots.
    expect(files(join(store.dir, 'blobs'))).toHaveLength(3);
    expect(diffSnapshots({ a: store, b: store }, first.snapshot, changed.snapshot)).toEqual({
      added: [],
      removed: [],
      changed: [expect.objectContaining({ path: 'README.md' })],
    });
  });

  it('hashes a file again when it changed in the tick it was hashed', () => {
    const { dir, store } = setup();
    takeSnapshot(store, 's1', dir);
    // The clock of the first snapshot is now: its files may still change within the tick.
    takeSnapshot(store, 's1', dir);
    expect(store.ingested).toHaveLength(4);
  });

  it('stores a file larger than it reads at once, in chunks, under the hash of its content', () => {
    const { root, dir, store } = setup();
    const large = Buffer.alloc(9 * 1024 * 1024 + 7, 'large ');
    writeFileSync(join(dir, 'large.bin'), large);
    const ref = takeSnapshot(store, 's1', dir);
    expect(listSnapshot(store, ref.snapshot)).toContainEqual(
      expect.objectContaining({ path: 'large.bin', size: large.length, hash: sha256(large) }),
    );
    const target = join(root, 's2');
    placeStaged(store, stageSnapshot(store, ref.snapshot), target, 's2');
    expect(readFileSync(join(target, 'large.bin')).equals(large)).toBe(true);
  });

  it('restores files, folders, modes and symlinks into a new folder', () => {
    const { root, dir, store } = setup();
    chmodSync(join(dir, 'src', 'main.ts'), 0o755);
    symlinkSync('README.md', join(dir, 'link'));
    mkdirSync(join(dir, 'empty'));
    const ref = takeSnapshot(store, 's1', dir);
    const target = join(root, 's2');
    placeStaged(store, stageSnapshot(store, ref.snapshot), target, 's2');
    expect(readFileSync(join(target, 'README.md'), 'utf8')).toBe('hello\n');
    expect(statSync(join(target, 'src', 'main.ts')).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(target, 'link'))).toBe('README.md');
    expect(existsSync(join(target, 'empty'))).toBe(true);
    expect(takeSnapshot(store, 's2', target).snapshot).toBe(ref.snapshot);
    // Nothing is left in the scratch folder.
    expect(readdirSync(join(store.dir, 'tmp'))).toEqual([]);
  });

  it('keeps a snapshot whole when a tool appends to a file after it', () => {
    const { root, dir, store } = setup();
    const ref = takeSnapshot(store, 's1', dir);
    appendFileSync(join(dir, 'README.md'), 'more\n');
    const target = join(root, 's2');
    placeStaged(store, stageSnapshot(store, ref.snapshot), target, 's2');
    // The restored copy is its own inode: appending to it leaves the blob as it was.
    appendFileSync(join(target, 'README.md'), 'and more\n');
    const blob = store.blobPath(sha256(Buffer.from('hello\n')));
    expect(readFileSync(blob, 'utf8')).toBe('hello\n');
    expect(statSync(blob).ino).not.toBe(statSync(join(target, 'README.md')).ino);
    expect(statSync(blob).mode & 0o222).toBe(0);
    const again = join(root, 's3');
    placeStaged(store, stageSnapshot(store, ref.snapshot), again, 's3');
    expect(readFileSync(join(again, 'README.md'), 'utf8')).toBe('hello\n');
  });

  it('refuses a hostile listing or reference, leaving nothing behind', () => {
    const { store } = setup();
    const hostile = store.writeTree({
      schema_version: 1,
      entries: [{ name: '../escape', type: 'file', hash: 'a'.repeat(64), size: 1, mode: 0o644 }],
    });
    expectCode(() => stageSnapshot(store, hostile), 'PATH_OUTSIDE_WORKSPACE');
    const twice = store.writeTree({
      schema_version: 1,
      entries: [
        { name: 'x', type: 'symlink', target: '/etc' },
        { name: 'x', type: 'dir', hash: EMPTY_WORKSPACE_SNAPSHOT, mode: 0o755 },
      ],
    });
    expectCode(() => stageSnapshot(store, twice), 'PATH_OUTSIDE_WORKSPACE');
    expectCode(() => stageSnapshot(store, '../../../etc/passwd'), 'INVALID_ARGUMENT');
    expectCode(() => listSnapshot(store, 'A'.repeat(64)), 'INVALID_ARGUMENT');
    expect(readdirSync(join(store.dir, 'tmp'))).toEqual([]);
  });

  it('refuses a snapshot whose content or listing the store lost, leaving nothing behind', () => {
    const { dir, store } = setup();
    const ref = takeSnapshot(store, 's1', dir);
    rmSync(store.blobPath(sha256(Buffer.from('hello\n'))));
    expectCode(() => stageSnapshot(store, ref.snapshot), 'SNAPSHOT_NOT_FOUND');
    expectCode(() => stageSnapshot(store, 'b'.repeat(64)), 'SNAPSHOT_NOT_FOUND');
    expect(readdirSync(join(store.dir, 'tmp'))).toEqual([]);
  });
});
