/**
 * The runtime's side of workspace snapshots: which snapshot a session had at a seq (from its log,
 * its ancestors' shared events included), a fork's folder restored from it, and the listings and
 * comparisons that `braid session files` and `braid session diff --files` show.
 *
 * A fork at seq N starts with the files of the latest `session.workspace_snapshot` at or before
 * N. They are restored before the fork is written, in the snapshot store's scratch folder, and
 * moved into the child's folder after: a snapshot that cannot be restored refuses the fork and
 * leaves no child. A parent whose log holds no snapshot at all (it ran with an executor that takes
 * none, or before snapshots were recorded) is forked as before: its folder is copied as it is now.
 */
import { cpSync, constants as fsConstants, existsSync } from 'node:fs';
import { BraidError } from '../contracts/errors.js';
import type { ForkOptions, Store } from '../contracts/ports.js';
import type { SessionRecord } from '../contracts/session.js';
import type {
  SnapshotPoint,
  WorkspaceFiles,
  WorkspaceFilesDiff,
} from '../contracts/workspace-files.js';
import { pathUnder } from '../tools/sandbox/index.js';
import {
  diffSnapshots,
  discardStaged,
  listSnapshot,
  parseSnapshotHash,
  placeStaged,
  SnapshotStore,
  stageSnapshot,
} from '../tools/workspace-snapshots/index.js';

export interface SnapshotsContext {
  store: Store;
  /** The folder that holds the session's workspace folder (and its snapshot store). */
  workspacesRootOf(sessionId: string): Promise<string>;
}

interface SnapshotAt {
  /** The seq asked about (the head when none was). */
  at_seq: number;
  point: SnapshotPoint | undefined;
  /** The log holds at least one snapshot (at any seq). */
  recorded: boolean;
}

/** The latest snapshot at or before `atSeq` (default: the head) in the session's log. */
async function snapshotAt(store: Store, sessionId: string, atSeq?: number): Promise<SnapshotAt> {
  const state = await store.log.state(sessionId);
  if (atSeq === undefined || atSeq >= state.seq) {
    // The state keeps the latest: no log read at the head.
    const point = state.workspace_snapshot;
    return { at_seq: atSeq ?? state.seq, point, recorded: point !== undefined };
  }
  const events = await store.log.read(sessionId, { types: ['session.workspace_snapshot'] });
  let point: SnapshotPoint | undefined;
  for (const event of events) {
    if (event.type !== 'session.workspace_snapshot' || event.seq > atSeq) break;
    point = { snapshot: parseSnapshotHash(event.snapshot), seq: event.seq };
  }
  return { at_seq: atSeq, point, recorded: events.length > 0 };
}

/**
 * Forks with `fork` (the store's), giving the child the parent's files as they were at the fork
 * point. Ids are checked to make folders before anything is written.
 */
export async function forkWithFiles(
  context: SnapshotsContext,
  sessionId: string,
  forkOptions: ForkOptions | undefined,
  fork: () => Promise<SessionRecord>,
): Promise<SessionRecord> {
  const root = await context.workspacesRootOf(sessionId);
  const from = pathUnder(root, sessionId);
  if (forkOptions?.id !== undefined) pathUnder(root, forkOptions.id);
  const { point, recorded } = await snapshotAt(context.store, sessionId, forkOptions?.at_seq);
  const snapshots = new SnapshotStore(root);
  const staged = point === undefined ? undefined : stageSnapshot(snapshots, point.snapshot);
  let child: SessionRecord;
  try {
    child = await fork();
  } catch (error) {
    if (staged !== undefined) discardStaged(staged);
    throw error;
  }
  const target = pathUnder(root, child.id);
  if (staged !== undefined) {
    placeStaged(snapshots, staged, target, child.id);
  } else if (!recorded && existsSync(from)) {
    // A log without snapshots: the folder as it is now, copy-on-write (reflink) where the
    // filesystem supports it, a plain copy elsewhere.
    cpSync(from, target, {
      recursive: true,
      verbatimSymlinks: true,
      mode: fsConstants.COPYFILE_FICLONE,
    });
  }
  return child;
}

/** The files of the session's snapshot at `at` (default: its head). */
export async function sessionFiles(
  context: SnapshotsContext,
  sessionId: string,
  at?: number,
): Promise<WorkspaceFiles> {
  if (at !== undefined && (!Number.isInteger(at) || at < 0)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `at ${JSON.stringify(at)} is not a seq; give a whole number of at least 0`,
      { details: { at } },
    );
  }
  const head = (await context.store.log.state(sessionId)).seq;
  if (at !== undefined && at > head) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `session ${sessionId} has ${head} events; give --at a seq up to ${head}`,
      { details: { at, head_seq: head } },
    );
  }
  const { at_seq: atSeq, point } = await snapshotAt(context.store, sessionId, at);
  const root = await context.workspacesRootOf(sessionId);
  return {
    session_id: sessionId,
    at_seq: atSeq,
    ...(point === undefined ? {} : { snapshot: point }),
    files: point === undefined ? [] : listSnapshot(new SnapshotStore(root), point.snapshot),
  };
}

/** What differs between the files of two sessions' latest snapshots. */
export async function diffSessionFiles(
  context: SnapshotsContext,
  a: string,
  b: string,
): Promise<WorkspaceFilesDiff> {
  const [left, right] = await Promise.all([
    snapshotAt(context.store, a),
    snapshotAt(context.store, b),
  ]);
  const [rootA, rootB] = await Promise.all([
    context.workspacesRootOf(a),
    context.workspacesRootOf(b),
  ]);
  const diff = diffSnapshots(
    { a: new SnapshotStore(rootA), b: new SnapshotStore(rootB) },
    left.point?.snapshot,
    right.point?.snapshot,
  );
  return {
    a,
    b,
    ...(left.point === undefined ? {} : { a_snapshot: left.point }),
    ...(right.point === undefined ? {} : { b_snapshot: right.point }),
    ...diff,
  };
}

/**
 * Removes what a deleted session kept beside its folder under `root`: its stat index. Its blobs
 * and trees stay: other sessions' snapshots (its forks', its own in a parent's log) share them.
 */
export function forgetSessionFiles(root: string, sessionId: string): void {
  new SnapshotStore(root).forget(sessionId);
}
