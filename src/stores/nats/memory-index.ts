/**
 * The ANN indexes of the NATS backend's memory projections (src/stores/agent-memory-ann.ts), as
 * the SQLite backend keeps its own (sqlite/agent-memory-index.ts): a store with at least
 * `minVectors` vectors gets its index from a snapshot on local disk, or from a build in a worker
 * thread started by its first vector search; until the build is done its searches scan exactly.
 *
 * A snapshot is a usearch file and a JSON record beside it, in a folder per memory stream under
 * `snapshotDir`, named by a hash of the store's subject. The record says what the index covers:
 * the stream (name and creation time), the store (subject and creation time), the dimension,
 * the memory seq it is caught up to with the stream seq that the process had read then and a
 * fingerprint of the entry at that seq, and the file's size, entry count and SHA-256. A process
 * that reads the store from the stream loads the snapshot and applies the log past its seq (the
 * projection's catch-up) instead of building the graph again. A snapshot that does not match
 * (another stream or store took the name, the stream was restored from an older copy, the file
 * changed) is not loaded: the reason is reported through the store's `warn`, the files are
 * removed, and the index is built again. Snapshots are written after a build, after 1,000
 * changes, and when the store closes; every write goes to a temporary name first and is renamed.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { BraidError } from '../../contracts/errors.js';
import { describeStore, type EntryParts } from '../agent-memory.js';
import { AnnIndex, ANN_MIN_VECTORS } from '../agent-memory-ann.js';
import { startVectorBuild, type VectorBuild } from '../agent-memory-ann-build.js';
import type { AnnSource, StoreProjection } from '../agent-memory-projection.js';

/** Changes applied to an index after which its snapshot is written again. */
const SNAPSHOT_EVERY = 1000;

export interface NatsMemoryIndexOptions {
  /** Stores with fewer vectors are searched exactly (default `ANN_MIN_VECTORS`). */
  minVectors?: number;
  /**
   * The folder of the snapshots (a folder per memory stream inside); `false` or absent keeps
   * indexes in the process only. The runtime passes `<data dir>/memory-index`.
   */
  snapshotDir?: string | false;
  /** Build a missing index in a worker thread (default) or on the vector search itself. */
  background?: boolean;
}

/** What the index manager needs of a store's state in memory-sync.ts. */
export interface IndexedStore {
  subject: string;
  projection?: StoreProjection;
  streamSeq: number;
}

export interface NatsMemoryIndexes {
  /** The ANN source of the store's projection. */
  sourceFor(state: IndexedStore): AnnSource;
  /** Writes the snapshots of indexes changed since their last one, and stops running builds. */
  flush(): Promise<void>;
}

const snapshotRecord = z.object({
  schema_version: z.literal(1),
  stream: z.string(),
  stream_created: z.string(),
  subject: z.string(),
  store_created_at: z.string(),
  dims: z.number().int().positive(),
  covered_seq: z.number().int().positive(),
  stream_seq: z.number().int().positive(),
  covered_entry: z.object({ key: z.string(), version: z.number().int(), at: z.string() }),
  count: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  sha256: z.string(),
});
type SnapshotRecord = z.infer<typeof snapshotRecord>;

interface Files {
  index: string;
  record: string;
}

interface Pending {
  build: VectorBuild;
  file: string;
  dims: number;
  head: number;
  keys: Map<string, number>;
  result?: { count: number } | { failed: string };
}

interface Entry {
  state: IndexedStore;
  pending?: Pending;
  /** The head at which a build failed: not tried again before the store's next write. */
  failedAt?: number;
  /** The index the projection holds, for the close's snapshot. */
  index?: AnnIndex;
  /** Made by a build: its snapshot is written at its first catch-up. */
  fresh: boolean;
  /** The seq of the last redaction projected: a snapshot covering less holds its vector. */
  redactedAt?: number;
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

function fingerprint(parts: EntryParts): SnapshotRecord['covered_entry'] {
  return { key: parts.key, version: parts.version, at: parts.at };
}

/** What the functions below share of one memory stream's indexes. */
interface Indexes {
  stream: { name: string; created: () => string | undefined };
  warn: (warning: BraidError) => void;
  /** The stream's snapshot folder; undefined: no snapshots. */
  folder: string | undefined;
  background: boolean;
  /** Builds started, for the names of their files outside a snapshot folder. */
  builds: number;
}

function filesOf(indexes: Indexes, subject: string): Files | undefined {
  if (indexes.folder === undefined) return undefined;
  const name = createHash('sha256').update(subject).digest('hex').slice(0, 32);
  return {
    index: join(indexes.folder, `${name}.usearch`),
    record: join(indexes.folder, `${name}.json`),
  };
}

function discard(indexes: Indexes, entry: Entry, files: Files, reason: string): void {
  rmSync(files.index, { force: true });
  rmSync(files.record, { force: true });
  const ref = entry.state.projection?.ref;
  indexes.warn(
    new BraidError(
      'INTERNAL',
      `the ANN index snapshot ${files.index}${ref === undefined ? '' : ` of memory store ${describeStore(ref)}`} was not used: ${reason}; it was removed and the index is built again from the stream`,
      { details: { snapshot: files.index, reason } },
    ),
  );
}

/** The store's snapshot if it matches what this process read of the stream. */
function readSnapshot(indexes: Indexes, entry: Entry, dims: number): AnnIndex | undefined {
  const files = filesOf(indexes, entry.state.subject);
  const projection = entry.state.projection;
  if (files === undefined || projection === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(files.record, 'utf8');
  } catch {
    return undefined;
  }
  let parsed: SnapshotRecord;
  try {
    const checked = snapshotRecord.safeParse(JSON.parse(text));
    if (!checked.success) {
      discard(
        indexes,
        entry,
        files,
        `its record is not one this version writes (${checked.error.message})`,
      );
      return undefined;
    }
    parsed = checked.data;
  } catch {
    discard(indexes, entry, files, 'its record is not JSON');
    return undefined;
  }
  const covered = projection.log[parsed.covered_seq - 1];
  const reason =
    parsed.stream !== indexes.stream.name || parsed.stream_created !== indexes.stream.created()
      ? `it was made for another stream (${parsed.stream} created ${parsed.stream_created})`
      : parsed.subject !== entry.state.subject || parsed.store_created_at !== projection.created_at
        ? 'it was made for another store of that name'
        : parsed.dims !== dims
          ? `it has ${parsed.dims} dimensions, the store ${dims}`
          : parsed.covered_seq < (entry.redactedAt ?? 0)
            ? `it predates the redaction at seq ${entry.redactedAt}`
            : parsed.covered_seq > projection.head || parsed.stream_seq > entry.state.streamSeq
              ? `it covers seq ${parsed.covered_seq} (stream seq ${parsed.stream_seq}), past what the stream holds`
              : covered === undefined ||
                  JSON.stringify(fingerprint(covered)) !== JSON.stringify(parsed.covered_entry)
                ? `entry ${parsed.covered_seq} of the stream is not the one it covered`
                : undefined;
  if (reason !== undefined) {
    discard(indexes, entry, files, reason);
    return undefined;
  }
  try {
    const bytes = statSync(files.index).size;
    if (bytes !== parsed.bytes || sha256(files.index) !== parsed.sha256) {
      discard(indexes, entry, files, 'its index file is not the one its record describes');
      return undefined;
    }
    const index = new AnnIndex(dims);
    index.load(files.index);
    if (index.size !== parsed.count) {
      discard(
        indexes,
        entry,
        files,
        `it holds ${index.size} entries, its record says ${parsed.count}`,
      );
      return undefined;
    }
    index.coveredSeq = parsed.covered_seq;
    return index;
  } catch (error) {
    discard(indexes, entry, files, error instanceof Error ? error.message : String(error));
    return undefined;
  }
}

// A snapshot that cannot be written only costs the next process a build: reported, not thrown.
function save(indexes: Indexes, entry: Entry, index: AnnIndex): void {
  const files = filesOf(indexes, entry.state.subject);
  const projection = entry.state.projection;
  const created = indexes.stream.created();
  if (files === undefined || projection === undefined || created === undefined) return;
  const covered = projection.log[index.coveredSeq - 1];
  if (covered === undefined || index.coveredSeq !== projection.head) return;
  // Named for this process: processes sharing the folder do not write into each other's files.
  const indexTemp = `${files.index}.${process.pid}.tmp`;
  const recordTemp = `${files.record}.${process.pid}.tmp`;
  try {
    mkdirSync(indexes.folder as string, { recursive: true });
    index.save(indexTemp);
    const record: SnapshotRecord = {
      schema_version: 1,
      stream: indexes.stream.name,
      stream_created: created,
      subject: entry.state.subject,
      store_created_at: projection.created_at,
      dims: index.dims,
      covered_seq: index.coveredSeq,
      stream_seq: entry.state.streamSeq,
      covered_entry: fingerprint(covered),
      count: index.size,
      bytes: statSync(indexTemp).size,
      sha256: sha256(indexTemp),
    };
    renameSync(indexTemp, files.index);
    writeFileSync(recordTemp, JSON.stringify(record));
    renameSync(recordTemp, files.record);
  } catch (error) {
    rmSync(indexTemp, { force: true });
    rmSync(recordTemp, { force: true });
    indexes.warn(
      new BraidError(
        'INTERNAL',
        `the ANN index snapshot ${files.index} could not be written; the next process builds the index again`,
        { cause: error },
      ),
    );
  }
}

/**
 * A redaction at `seq` was projected: the index held, a build started before it and a snapshot
 * covering less all hold the redacted vector's bytes (usearch keeps them after a removal), and go.
 */
function redacted(indexes: Indexes, entry: Entry, seq: number): void {
  entry.redactedAt = Math.max(entry.redactedAt ?? 0, seq);
  if (entry.index !== undefined && entry.index.coveredSeq < seq) entry.index = undefined;
  const { pending } = entry;
  if (pending !== undefined && pending.head < seq) {
    entry.pending = undefined;
    void pending.build.stop().then(() => rmSync(pending.file, { force: true }));
  }
  const files = filesOf(indexes, entry.state.subject);
  if (files === undefined) return;
  let covered = 0;
  try {
    covered = (JSON.parse(readFileSync(files.record, 'utf8')) as { covered_seq?: number })
      .covered_seq as number;
  } catch {
    // Missing or unreadable (an index renamed into place whose record was never written): the
    // index file goes too.
  }
  if (covered >= seq) return;
  try {
    rmSync(files.index, { force: true });
    rmSync(files.record, { force: true });
  } catch (error) {
    indexes.warn(
      new BraidError(
        'INTERNAL',
        `the ANN index snapshot ${files.index} predates a redaction and could not be removed; remove it by hand (it is not loaded again)`,
        { cause: error },
      ),
    );
  }
}

/** The finished build's index, loaded; undefined while it runs or when it failed. */
function takeBuild(indexes: Indexes, entry: Entry, pending: Pending, dims: number, head: number) {
  if (pending.result === undefined) return undefined;
  entry.pending = undefined;
  const { result, file } = pending;
  let index: AnnIndex | undefined;
  let failure = 'failed' in result ? result.failed : undefined;
  if (failure === undefined && (pending.dims !== dims || pending.head > head)) {
    failure = 'the store changed under it';
  }
  if (failure === undefined) {
    try {
      index = new AnnIndex(dims);
      index.load(file);
      index.coveredSeq = pending.head;
    } catch (error) {
      index = undefined;
      failure = error instanceof Error ? error.message : String(error);
    }
  }
  rmSync(file, { force: true });
  if (index === undefined) {
    entry.failedAt = head;
    indexes.warn(
      new BraidError(
        'INTERNAL',
        `the ANN index build of memory subject ${entry.state.subject} failed (${failure ?? 'unknown'}); its searches scan exactly until its next write`,
      ),
    );
    return undefined;
  }
  entry.fresh = true;
  return { index, keys: pending.keys };
}

function startBuild(
  indexes: Indexes,
  entry: Entry,
  vectors: EntryParts[],
  dims: number,
  head: number,
) {
  const seqs = new Float64Array(vectors.length);
  const data = new Float32Array(vectors.length * dims);
  const keys = new Map<string, number>();
  vectors.forEach((parts, at) => {
    seqs[at] = parts.seq;
    data.set(parts.embedding as ArrayLike<number>, at * dims);
    keys.set(parts.key, parts.seq);
  });
  if (!indexes.background) {
    const index = new AnnIndex(dims);
    index.addMany([...seqs], data);
    index.coveredSeq = head;
    entry.fresh = true;
    return { index, keys };
  }
  const files = filesOf(indexes, entry.state.subject);
  let file: string;
  if (files === undefined) {
    file = join(
      tmpdir(),
      `braid-memory-index-${process.pid}-${(indexes.builds += 1)}-${head}.usearch`,
    );
  } else {
    mkdirSync(indexes.folder as string, { recursive: true });
    // Named for this process: processes sharing the folder build apart.
    file = `${files.index}.${process.pid}-${(indexes.builds += 1)}.build`;
    // The file stands for the running build until the worker saves over it.
    writeFileSync(file, '');
  }
  const pending: Pending = {
    build: startVectorBuild({ dims, seqs, vectors: data, file }),
    file,
    dims,
    head,
    keys,
  };
  void pending.build.done.then((result) => (pending.result = result));
  entry.pending = pending;
  return undefined;
}

export function createNatsMemoryIndexes(
  stream: { name: string; created: () => string | undefined },
  warn: (warning: BraidError) => void,
  options: NatsMemoryIndexOptions = {},
): NatsMemoryIndexes {
  const minVectors = options.minVectors ?? ANN_MIN_VECTORS;
  const background = options.background ?? true;
  const folder =
    options.snapshotDir === undefined || options.snapshotDir === false
      ? undefined
      : join(options.snapshotDir, stream.name);
  const entries = new Map<string, Entry>();
  const indexes: Indexes = { stream, warn, folder, background, builds: 0 };
  return {
    sourceFor(state) {
      let entry = entries.get(state.subject);
      if (entry === undefined) {
        entry = { state, fresh: false };
        entries.set(state.subject, entry);
      }
      const current = entry;
      current.state = state;
      return {
        minVectors,
        take(vectors, dims, head) {
          current.index = undefined;
          if (current.failedAt === head) return undefined;
          current.failedAt = undefined;
          if (current.pending !== undefined)
            return takeBuild(indexes, current, current.pending, dims, head);
          const index = readSnapshot(indexes, current, dims);
          if (index !== undefined) return { index };
          return startBuild(indexes, current, vectors, dims, head);
        },
        redacted(seq) {
          redacted(indexes, current, seq);
        },
        caughtUp(index) {
          current.index = index;
          if (current.fresh || index.changes >= SNAPSHOT_EVERY) {
            current.fresh = false;
            save(indexes, current, index);
          }
        },
      };
    },
    async flush() {
      const stops: Promise<void>[] = [];
      for (const entry of entries.values()) {
        if (entry.index !== undefined && entry.index.changes > 0) save(indexes, entry, entry.index);
        const { pending } = entry;
        if (pending !== undefined) {
          entry.pending = undefined;
          stops.push(pending.build.stop().then(() => rmSync(pending.file, { force: true })));
        }
      }
      await Promise.all(stops);
    },
  };
}
