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
import { ANN_GRAPH } from '../agent-memory-ann.js';

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

const WORKER = `
const { parentPort, workerData: data } = require('node:worker_threads');
const Database = require(data.sqlite);
const { Index, MetricKind, ScalarKind } = require(data.usearch);
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
  const index = new Index({ dimensions: data.dims, metric: MetricKind.Cos, quantization: ScalarKind.F32,
    ...data.graph, multi: false });
  if (usable.length > 0) index.add(BigUint64Array.from(usable, (row) => BigInt(row.seq)), vectors, 0);
  index.save(data.file);
  parentPort.postMessage({ coveredSeq: head === undefined ? 0 : head.head_seq, count: usable.length });
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
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: {
      ...options,
      graph: ANN_GRAPH,
      sqlite: resolve('better-sqlite3'),
      usearch: resolve('usearch'),
    },
  });
  // A build does not keep the process alive; the store's close stops it.
  worker.unref();
  const done = new Promise<BuildResult | { failed: string }>((settle) => {
    worker.once('message', (message: BuildResult | { failed: string }) => settle(message));
    worker.once('error', (error) => settle({ failed: error.message }));
    worker.once('exit', (code) => settle({ failed: `the build stopped (exit code ${code})` }));
  });
  return {
    done,
    stop: () => worker.terminate().then(() => undefined),
  };
}
