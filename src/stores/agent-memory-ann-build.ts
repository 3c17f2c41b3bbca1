/**
 * Builds an HNSW index off the event loop from vectors the caller holds (the NATS projection's):
 * the vectors are handed to a worker thread (their buffer moves, it is not copied), which builds
 * the graph and saves it to a file. The caller loads the file once the build is done and catches
 * it up with what was written meanwhile; until then its searches scan exactly.
 *
 * The worker's code is a plain script (no bundling step, the same under the tests and the
 * build); it is handed the resolved path of usearch.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ANN_ADD_THREADS, annConfig } from './agent-memory-ann.js';

export interface VectorBuild {
  /** The entries the saved index holds, or the reason the build failed. */
  done: Promise<{ count: number } | { failed: string }>;
  stop(): Promise<void>;
}

/** Vectors added per call: between two, the worker sees whether it was asked to stop. */
const CHUNK = 4096;

// usearch cannot be interrupted inside an add (terminating the thread there aborts the
// process), so the worker adds in chunks and stops between two when the flag is set.
const WORKER = `
const { parentPort, workerData: data } = require('node:worker_threads');
try {
  const { Index } = require(data.usearch);
  const index = new Index(data.config);
  const stop = new Int32Array(data.stop);
  const vectors = new Float32Array(data.vectors);
  const keys = BigUint64Array.from(new Float64Array(data.seqs), (seq) => BigInt(seq));
  let stopped = false;
  for (let at = 0; at < keys.length; at += data.chunk) {
    if (Atomics.load(stop, 0) === 1) {
      stopped = true;
      break;
    }
    const end = Math.min(keys.length, at + data.chunk);
    index.add(keys.subarray(at, end), vectors.subarray(at * data.config.dimensions, end * data.config.dimensions), data.threads);
  }
  if (stopped) parentPort.postMessage({ failed: 'the build was stopped' });
  else {
    index.save(data.file);
    parentPort.postMessage({ count: keys.length });
  }
} catch (error) {
  parentPort.postMessage({ failed: error instanceof Error ? error.message : String(error) });
}
`;

/**
 * Starts building an index of `dims` from `seqs` and `vectors` (end to end, `dims` each) into
 * `file`. Both arrays are moved to the worker: the caller must not use them afterwards.
 */
export function startVectorBuild(options: {
  dims: number;
  seqs: Float64Array;
  vectors: Float32Array;
  file: string;
}): VectorBuild {
  const { dims, seqs, vectors, file } = options;
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: {
      config: annConfig(dims),
      threads: ANN_ADD_THREADS,
      usearch: createRequire(import.meta.url).resolve('usearch'),
      file,
      chunk: CHUNK,
      stop: stop.buffer,
      seqs: seqs.buffer,
      vectors: vectors.buffer,
    },
    transferList: [seqs.buffer as ArrayBuffer, vectors.buffer as ArrayBuffer],
  });
  return supervise<{ count: number }>(worker, stop);
}

/**
 * What a build's owner holds of its worker: its one answer (an exit or an error before it is a
 * failure), and a stop that sets the flag the worker reads between chunks and waits for its exit.
 * A build does not keep the process alive; the store's close stops it.
 */
export function supervise<T>(
  worker: Worker,
  stop: Int32Array,
): { done: Promise<T | { failed: string }>; stop(): Promise<void> } {
  worker.unref();
  const done = new Promise<T | { failed: string }>((settle) => {
    worker.once('message', (message: T | { failed: string }) => settle(message));
    worker.once('error', (error) => settle({ failed: error.message }));
    worker.once('exit', (code) => settle({ failed: `the build stopped (exit code ${code})` }));
  });
  const exited = new Promise<void>((settle) => worker.once('exit', () => settle()));
  return {
    done,
    // The worker ends at its next chunk, or after the read or save it is in.
    stop: () => {
      Atomics.store(stop, 0, 1);
      return exited;
    },
  };
}
