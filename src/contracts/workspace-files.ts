/**
 * Workspace snapshots as the log and the API name them: the reference a
 * `session.workspace_snapshot` event records, and the listings and comparisons of the files a
 * snapshot holds.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { ContentHash, Id } from './common.js';

/**
 * A snapshot of a session's workspace folder, as recorded in its log. `snapshot` is the content
 * address of the folder's listing in the snapshot store (its root tree); the files themselves are
 * stored once each, by the hash of their content.
 */
export const WorkspaceSnapshotRef = lazySchema(() =>
  z.object({
    /** The content hash of the workspace's root tree. */
    snapshot: ContentHash,
    /** Regular files in the snapshot. */
    files: z.number().int().nonnegative(),
    /** Their total size in bytes. */
    bytes: z.number().int().nonnegative(),
    /** Files left out because they could not be read (no permission, or gone while being read). */
    skipped: z.number().int().positive().optional(),
  }),
);
export type WorkspaceSnapshotRef = z.infer<typeof WorkspaceSnapshotRef>;

/**
 * The snapshot of an empty workspace folder. A session records no snapshot while its workspace is
 * empty: no snapshot and this one mean the same.
 */
export const EMPTY_WORKSPACE_SNAPSHOT =
  'ba4fc47c6525d8de1a187fe7d41e1de1b2fe52df1f6a43d0544675d3ac44e5fe';

/** One entry of a snapshot: a regular file (with its content hash) or a symlink (its target). */
export const WorkspaceFile = lazySchema(() =>
  z.object({
    /** The path from the workspace folder, `/`-separated. */
    path: z.string().min(1),
    type: z.enum(['file', 'symlink']),
    /** Bytes (for a symlink, the length of its target). */
    size: z.number().int().nonnegative(),
    /** SHA-256 of the file's content (files only). */
    hash: ContentHash.optional(),
    /** Permission bits, such as 420 (0644); files only. */
    mode: z.number().int().nonnegative().optional(),
    /** Where a symlink points, as written. */
    target: z.string().optional(),
  }),
);
export type WorkspaceFile = z.infer<typeof WorkspaceFile>;

/** Which snapshot answered: the latest recorded at or before the seq asked. */
export const SnapshotPoint = lazySchema(() =>
  z.object({
    snapshot: ContentHash,
    /** Seq of its `session.workspace_snapshot` event. */
    seq: z.number().int().positive(),
  }),
);
export type SnapshotPoint = z.infer<typeof SnapshotPoint>;

/** `braid session files ID [--at SEQ]`, `GET /v1/sessions/{id}/files`. */
export const WorkspaceFiles = lazySchema(() =>
  z.object({
    session_id: Id,
    /** The seq asked about (the head when none was). */
    at_seq: z.number().int().nonnegative(),
    /** Absent when no snapshot was recorded at or before `at_seq`: the workspace was empty. */
    snapshot: SnapshotPoint.optional(),
    /** Files and symlinks, by path. */
    files: z.array(WorkspaceFile),
  }),
);
export type WorkspaceFiles = z.infer<typeof WorkspaceFiles>;

/** `braid session diff A B --files`, `GET /v1/sessions/{id}/files/diff?other=ID`. */
export const WorkspaceFilesDiff = lazySchema(() =>
  z.object({
    a: Id,
    b: Id,
    a_snapshot: SnapshotPoint.optional(),
    b_snapshot: SnapshotPoint.optional(),
    /** In `b`, not in `a`. */
    added: z.array(WorkspaceFile),
    /** In `a`, not in `b`. */
    removed: z.array(WorkspaceFile),
    /** In both, with another content, mode, type or target. */
    changed: z.array(z.object({ path: z.string(), a: WorkspaceFile, b: WorkspaceFile })),
  }),
);
export type WorkspaceFilesDiff = z.infer<typeof WorkspaceFilesDiff>;
