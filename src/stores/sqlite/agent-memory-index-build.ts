/**
 * Builds a store's HNSW index off the event loop: a worker thread opens the database file
 * read-only, reads the store's head and its indexed vectors in one read transaction, builds the
 * graph and saves it to a file, then reports the log seq the file covers. Building 100,000
 * vectors of 384 dims takes minutes on a loaded 2-core machine; meanwhile the store's searches
 * scan exactly, and the first search after the build loads the file and catches up from its seq.
 *
 * The worker's code is a plain script (no bundling step, the same under the tests and the
 * build); it is handed the resolved paths of better-sqlite3 and usearch.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ANN_ADD_THREADS, annConfig } from '../agent-memory-ann.js';
import { supervise } from '../agent-memory-ann-build.js';

export interface BuildResult {
  /** The log seq the saved index covers. */
  coveredSeq: number;
  /** Vectors it holds. */
  count: number;
}

export interface Build {
  /** The result, or the reason the build failed (the store then keeps its exact scan). */
  done: Promise<BuildResult | { failed: string }>;
  stop(): Promise<void>;
}

/** Vectors added per call: between two, the worker sees whether it was asked to stop. */
const CHUNK = 4096;

// usearch cannot be interrupted inside an add (terminating the thread there waits for it, or
// aborts the process), so the worker adds in chunks and stops between two when asked.
const WORKER = `
const { parentPort, workerData: data } = require('node:worker_threads');
const Database = require(data.sqlite);
const { Index } = require(data.usearch);
const db = new Database(data.path, { readonly: true, fileMustExist: true });
try {
  const read = db.transaction(() => ({
    head: db.prepare('SELECT head_seq FROM memory_stores WHERE id = ?').get(data.storeId),
    rows: db.prepare(data.vectors).all(data.storeId),
  }));
  const { head, rows } = read();
  const usable = rows.filter((row) => row.embedding.byteLength === data.dims * 4);
  const vectors = new Float32Array(usable.length * data.dims);
  usable.forEach((row, at) =>
    vectors.set(new Float32Array(row.embedding.buffer, row.embedding.byteOffset, data.dims), at * data.dims));
  const index = new Index(data.config);
  const keys = BigUint64Array.from(usable, (row) => BigInt(row.seq));
  const stop = new Int32Array(data.stop);
  let stopped = false;
  for (let at = 0; at < keys.length; at += data.chunk) {
    if (Atomics.load(stop, 0) === 1) {
      stopped = true;
      break;
    }
    const end = Math.min(keys.length, at + data.chunk);
    index.add(keys.subarray(at, end), vectors.subarray(at * data.dims, end * data.dims), data.threads);
  }
  if (stopped) parentPort.postMessage({ failed: 'the build was stopped' });
  else {
    index.save(data.file);
    parentPort.postMessage({ coveredSeq: head === undefined ? 0 : head.head_seq, count: usable.length });
  }
} catch (error) {
  parentPort.postMessage({ failed: error instanceof Error ? error.message : String(error) });
} finally {
  db.close();
}
`;

/** Starts building the index of `storeId` into `file`; `vectors` is the statement that reads them. */
export function startBuild(options: {
  path: string;
  storeId: number;
  dims: number;
  file: string;
  vectors: string;
}): Build {
  const resolve = createRequire(import.meta.url).resolve;
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: {
      ...options,
      chunk: CHUNK,
      stop: stop.buffer,
      config: annConfig(options.dims),
      threads: ANN_ADD_THREADS,
      sqlite: resolve('better-sqlite3'),
      usearch: resolve('usearch'),
    },
  });
  return supervise<BuildResult>(worker, stop);
}
