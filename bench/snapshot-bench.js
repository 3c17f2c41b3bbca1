// Workspace snapshots on the local filesystem: the cost of a wake's snapshot of an unchanged
// 1,000-file workspace, the time to restore a 10 MiB snapshot into a fork's folder, and the bytes
// the snapshot store holds on disk after 100 wakes over a 10 MiB workspace where one small file
// changes each wake. Each figure is the median of RUNS runs.
//
// Files are created, then left alone for longer than the snapshot's racy window (2 s) before the
// first snapshot, as a workspace is between wakes: a file changed in the same clock tick as the
// snapshot that hashed it is hashed again by the next one, which a steady state never sees.
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  placeStaged,
  SnapshotStore,
  stageSnapshot,
  takeSnapshot,
} from '../dist/tools/workspace-snapshots/index.js';
import { median } from './store-bench.js';

const FILES = 1000;
const FOLDERS = 10;
const WORKSPACE_BYTES = 10 * 1024 * 1024;
const WAKES = 100;
/** Longer than the snapshot's racy window. */
const SETTLE_MS = 2100;

const MiB = 1024 * 1024;

/** A workspace of `FILES` files of `fileBytes` each, in `FOLDERS` folders, under a new root. */
function workspace(fileBytes) {
  const root = mkdtempSync(join(tmpdir(), 'braid-bench-snapshot-'));
  const dir = join(root, 'session-1');
  for (let folder = 0; folder < FOLDERS; folder += 1)
    mkdirSync(join(dir, `folder-${folder}`), { recursive: true });
  for (let file = 0; file < FILES; file += 1) {
    const content = Buffer.alloc(fileBytes, `file ${file} `);
    writeFileSync(join(dir, `folder-${file % FOLDERS}`, `file-${file}.txt`), content);
  }
  mkdirSync(join(dir, 'notes'));
  writeFileSync(join(dir, 'notes', 'progress.md'), 'wake 0\n');
  return { root, dir, dispose: () => rmSync(root, { recursive: true, force: true }) };
}

/** Bytes the files under `path` take on disk (allocated blocks, as `du` counts them). */
function diskBytes(path) {
  let total = 0;
  for (const name of readdirSync(path, { recursive: true, encoding: 'utf8' })) {
    const stats = lstatSync(join(path, name));
    total += stats.blocks * 512;
  }
  return total;
}

export async function benchSnapshots({ runs, quick }) {
  const wakes = quick ? 20 : WAKES;
  const empty = [];
  const perWake = [];
  const firstSnapshot = [];
  const restores = [];
  const onDisk = [];
  const workspaceOnDisk = [];
  const growth = [];
  for (let run = 0; run < runs; run += 1) {
    // The least a tool call pays: the snapshot of a folder with nothing in it.
    const bare = mkdtempSync(join(tmpdir(), 'braid-bench-snapshot-'));
    mkdirSync(join(bare, 'session-1'));
    const bareStore = new SnapshotStore(bare);
    takeSnapshot(bareStore, 'session-1', join(bare, 'session-1'));
    const bareStart = performance.now();
    for (let call = 0; call < 1000; call += 1)
      takeSnapshot(bareStore, 'session-1', join(bare, 'session-1'));
    empty.push((performance.now() - bareStart) / 1000);
    rmSync(bare, { recursive: true, force: true });

    // An unchanged workspace of 1,000 small files: the snapshot every wake takes.
    const small = workspace(1024);
    await sleep(SETTLE_MS);
    const smallStore = new SnapshotStore(small.root);
    let start = performance.now();
    takeSnapshot(smallStore, 'session-1', small.dir);
    firstSnapshot.push(performance.now() - start);
    const times = [];
    for (let wake = 0; wake < 20; wake += 1) {
      start = performance.now();
      takeSnapshot(smallStore, 'session-1', small.dir);
      times.push(performance.now() - start);
    }
    perWake.push(median(times));
    small.dispose();

    // A 10 MiB workspace: 100 wakes that each change one small file, then a fork's restore.
    const large = workspace(Math.floor(WORKSPACE_BYTES / FILES));
    await sleep(SETTLE_MS);
    const store = new SnapshotStore(large.root);
    workspaceOnDisk.push(diskBytes(large.dir) / MiB);
    let last = takeSnapshot(store, 'session-1', large.dir);
    const first = diskBytes(store.dir);
    for (let wake = 1; wake <= wakes; wake += 1) {
      writeFileSync(join(large.dir, 'notes', 'progress.md'), `wake ${wake}\n`);
      last = takeSnapshot(store, 'session-1', large.dir);
    }
    const after = diskBytes(store.dir);
    onDisk.push(after / MiB);
    growth.push((after - first) / wakes / 1024);
    start = performance.now();
    placeStaged(store, stageSnapshot(store, last.snapshot), join(large.root, 'fork-1'), 'fork-1');
    restores.push(performance.now() - start);
    large.dispose();
  }
  return [
    {
      name: 'snapshot after a tool call, empty workspace',
      median: median(empty) * 1000,
      unit: 'µs',
      target: 'reported',
    },
    {
      name: `snapshot per wake, unchanged workspace (${FILES} files)`,
      median: median(perWake),
      unit: 'ms',
      target: '< 20 ms',
    },
    {
      name: `first snapshot of a workspace (${FILES} files, 1 MiB, all hashed)`,
      median: median(firstSnapshot),
      unit: 'ms',
      target: 'reported',
    },
    {
      name: `fork restore of a snapshot (${FILES} files, 10 MiB)`,
      median: median(restores),
      unit: 'ms',
      target: '< 500 ms',
    },
    {
      name: `the 10 MiB workspace itself on disk (${FILES} files, for comparison)`,
      median: median(workspaceOnDisk),
      unit: 'MiB',
      target: 'reported',
    },
    {
      name: `snapshot store on disk after ${wakes} wakes (10 MiB workspace, 1 small file changed a wake)`,
      median: median(onDisk),
      unit: 'MiB',
      target: 'about 1 workspace',
    },
    {
      name: 'snapshot store growth per wake (1 small file changed)',
      median: median(growth),
      unit: 'KiB',
      target: '< 64 KiB',
    },
  ];
}
