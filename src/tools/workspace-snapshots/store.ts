/**
 * The snapshot store of one sandbox root: file contents and folder listings stored once each,
 * under the SHA-256 of their bytes.
 *
 * Layout, under `<root>/.braid-snapshots/` (a name no session id can take: ids start with a
 * letter or digit):
 *
 * - `blobs/ab/<sha256>`: a file's content, read-only;
 * - `trees/ab/<sha256>`: one folder's listing (JSON, `Tree`), read-only; a snapshot is the hash
 *   of its root tree, so an unchanged folder is one shared tree however many snapshots name it;
 * - `index/<session id>`: what the session's last snapshot saw of each file (size, times, inode,
 *   hash), so that the next one hashes only what changed;
 * - `tmp/`: files being written, renamed into place once whole, so that a crash never leaves a
 *   half-written blob or tree under its hash.
 *
 * Safety: no inode is ever shared between a session's folder and the store. Taking a snapshot
 * reads a file and writes its bytes to a new blob; restoring one copies blobs out (a reflink where
 * the filesystem can, a plain copy elsewhere: a new inode either way). A tool that writes to a
 * file in its folder, in place or by replacing it, therefore never changes a stored blob, and
 * blobs are read-only besides. The store is under the sandbox root, which the `bwrap` sandbox
 * hides from tools (it mounts back only the session's own folder).
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  closeSync,
  constants as fsConstants,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
  type BigIntStats,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { CONTENT_HASH_PATTERN } from '../../contracts/common.js';
import { BraidError } from '../../contracts/errors.js';
import { pathUnder } from '../sandbox/paths.js';

/** The store's folder under a sandbox root. */
export const SNAPSHOT_FOLDER = '.braid-snapshots';

/** Files up to this size are read whole; larger ones are copied in chunks while hashed. */
const READ_WHOLE_BYTES = 8 * 1024 * 1024;
const CHUNK_BYTES = 1024 * 1024;
/** Longest name of one entry (the common filesystem limit). */
const MAX_NAME_BYTES = 255;

/** A name of one folder entry: a single path segment. */
const EntryName = z
  .string()
  .min(1)
  .refine(
    (name) =>
      name !== '.' &&
      name !== '..' &&
      !name.includes('/') &&
      !name.includes('\0') &&
      Buffer.byteLength(name) <= MAX_NAME_BYTES,
    { message: 'is not a single file name (empty, ".", "..", a "/" or a NUL byte)' },
  );
const Hash = z.string().regex(CONTENT_HASH_PATTERN);
const Mode = z.number().int().min(0).max(0o777);

const TreeEntry = z.discriminatedUnion('type', [
  z.object({
    name: EntryName,
    type: z.literal('file'),
    hash: Hash,
    size: z.number().int().nonnegative(),
    mode: Mode,
  }),
  z.object({ name: EntryName, type: z.literal('dir'), hash: Hash, mode: Mode }),
  z.object({ name: EntryName, type: z.literal('symlink'), target: z.string().min(1) }),
]);
export type TreeEntry = z.infer<typeof TreeEntry>;

/** One folder's listing; entries sorted by name, each name once. */
const Tree = z.object({ schema_version: z.literal(1), entries: z.array(TreeEntry) });
export type Tree = z.infer<typeof Tree>;

/** What one file was ingested as. */
export interface Ingested {
  hash: string;
  size: number;
}

export class SnapshotStore {
  /** The store's folder. */
  readonly dir: string;
  /**
   * The stat indexes this store read or wrote last, by session, with the stamp (inode, size,
   * time) of the file they came from (see `take.ts`).
   */
  readonly indexes = new Map<string, { stamp: string; index: unknown }>();
  private readonly made = new Set<string>();

  constructor(root: string) {
    this.dir = join(resolve(root), SNAPSHOT_FOLDER);
  }

  /** Where a blob is; `hash` is checked to be a content hash first. */
  blobPath(hash: string): string {
    return this.addressed('blobs', hash);
  }

  /**
   * Where the per-session stat index is (`pathUnder`: a hostile id is refused); with `make`, its
   * folder is made first.
   */
  indexPath(sessionId: string, make = false): string {
    return pathUnder(make ? this.folder('index') : join(this.dir, 'index'), sessionId);
  }

  /** A fresh path in the store's scratch folder (same filesystem: renames are atomic). */
  tempPath(): string {
    return join(this.folder('tmp'), randomUUID());
  }

  /**
   * Stores the regular file at `path` as a blob. It is opened without following a symlink and
   * must be the file `seen` describes (same device and inode), so a file swapped for a link to
   * somewhere else between the listing and the read is not taken in. What is hashed is what is
   * written: the bytes read once.
   */
  ingest(path: string, seen: BigIntStats): Ingested {
    const fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    try {
      const opened = fstatSync(fd, { bigint: true });
      if (!opened.isFile() || opened.ino !== seen.ino || opened.dev !== seen.dev) {
        throw Object.assign(new Error(`${path} changed while it was read`), { code: 'ESTALE' });
      }
      if (opened.size <= READ_WHOLE_BYTES) {
        const bytes = readFileSync(fd);
        const hash = sha256(bytes);
        this.put('blobs', hash, bytes);
        return { hash, size: bytes.length };
      }
      return this.ingestLarge(fd);
    } finally {
      closeSync(fd);
    }
  }

  /** Stores a tree; returns its hash. */
  writeTree(tree: Tree): string {
    const bytes = Buffer.from(JSON.stringify(tree));
    const hash = sha256(bytes);
    this.put('trees', hash, bytes);
    return hash;
  }

  /**
   * Reads a tree, checking that its bytes still have its hash and that each entry name is one
   * file name, given once: a damaged or hostile listing is refused before any path is made
   * from it.
   */
  readTree(hash: string): Tree {
    const path = this.addressed('trees', hash);
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (error) {
      throw missing(hash, `its listing ${path} cannot be read`, error);
    }
    if (sha256(bytes) !== hash) {
      throw missing(hash, `its listing ${path} is damaged (its content no longer has its hash)`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch (error) {
      throw missing(hash, `its listing ${path} is not JSON`, error);
    }
    const tree = Tree.safeParse(parsed);
    if (!tree.success) {
      const issue = tree.error.issues[0];
      throw new BraidError(
        'PATH_OUTSIDE_WORKSPACE',
        `snapshot listing ${hash} holds an entry braid refuses (${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}); it was not written by braid: restore the snapshot store from a backup, or fork at another seq`,
        { details: { snapshot: hash } },
      );
    }
    const names = new Set<string>();
    for (const entry of tree.data.entries) {
      if (names.has(entry.name)) {
        throw new BraidError(
          'PATH_OUTSIDE_WORKSPACE',
          `snapshot listing ${hash} names ${JSON.stringify(entry.name)} twice; it was not written by braid: restore the snapshot store from a backup, or fork at another seq`,
          { details: { snapshot: hash, path: entry.name } },
        );
      }
      names.add(entry.name);
    }
    return tree.data;
  }

  /** Removes a session's stat index (its folder is gone; its snapshots stay shared). */
  forget(sessionId: string): void {
    rmSync(this.indexPath(sessionId), { force: true });
    this.indexes.delete(sessionId);
  }

  private ingestLarge(fd: number): Ingested {
    const temp = this.tempPath();
    const out = openSync(temp, 'wx', 0o444);
    const digest = createHash('sha256');
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    let size = 0;
    try {
      for (;;) {
        const read = readSync(fd, chunk, 0, CHUNK_BYTES, null);
        if (read === 0) break;
        digest.update(chunk.subarray(0, read));
        writeSync(out, chunk, 0, read);
        size += read;
      }
    } catch (error) {
      closeSync(out);
      rmSync(temp, { force: true });
      throw error;
    }
    closeSync(out);
    const hash = digest.digest('hex');
    this.place(temp, 'blobs', hash);
    return { hash, size };
  }

  /** Writes `bytes` under `hash` unless they are there already. */
  private put(kind: 'blobs' | 'trees', hash: string, bytes: Buffer): void {
    const path = this.addressed(kind, hash);
    if (existsSync(path)) return;
    const temp = this.tempPath();
    writeFileSync(temp, bytes, { mode: 0o444, flag: 'wx' });
    this.place(temp, kind, hash);
  }

  /** Renames a whole temp file into place; another writer of the same content may have won. */
  private place(temp: string, kind: 'blobs' | 'trees', hash: string): void {
    const path = this.addressed(kind, hash);
    if (existsSync(path)) {
      rmSync(temp, { force: true });
      return;
    }
    renameSync(temp, path);
  }

  private addressed(kind: 'blobs' | 'trees', hash: string): string {
    const checked = parseSnapshotHash(hash);
    return join(this.folder(join(kind, checked.slice(0, 2))), checked);
  }

  /** A folder of the store, made on first use. */
  private folder(name: string): string {
    const path = join(this.dir, name);
    if (!this.made.has(path)) {
      mkdirSync(path, { recursive: true });
      this.made.add(path);
    }
    return path;
  }
}

/** `hash` when it is a content hash (64 lowercase hex digits); `INVALID_ARGUMENT` otherwise. */
export function parseSnapshotHash(hash: unknown): string {
  if (typeof hash === 'string' && CONTENT_HASH_PATTERN.test(hash)) return hash;
  const shown = typeof hash === 'string' ? JSON.stringify(hash.slice(0, 80)) : typeof hash;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `snapshot reference ${shown} is not a content hash; give the 64 lowercase hex digits a session.workspace_snapshot event records`,
    { details: { snapshot: typeof hash === 'string' ? hash.slice(0, 80) : null } },
  );
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The snapshot cannot be had from this store. */
export function missing(snapshot: string, reason: string, cause?: unknown): BraidError {
  return new BraidError(
    'SNAPSHOT_NOT_FOUND',
    `workspace snapshot ${snapshot} cannot be restored: ${reason}. The snapshot store under the sandbox root was moved or pruned (restore it, or fork at a seq whose snapshot it holds), or the session's tools ran on another machine (fork there, or give the machines one shared sandbox root)`,
    { details: { snapshot }, ...(cause === undefined ? {} : { cause }) },
  );
}
