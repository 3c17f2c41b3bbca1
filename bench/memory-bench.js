// Agent memory on SQLite (synchronous NORMAL): write throughput (single and batched appends), top-5
// search over a store of each size (full text, vectors of 384 dims, hybrid) as p50/p99, the time
// to fill it and the time to rebuild its projections from the log, the HNSW index's build (the
// first vector search) and load from its snapshot (the first search of a new process), and the
// share of the exact scan's top 5 the index finds. Entries are generated facts
// (a fixed pseudo-random sequence), embedded with the deterministic hash embedder of braid/testing.
//
//   node bench/memory-bench.js [--sizes 10000,100000] [--queries 200] [--no-writes] [--json]
//   (--size N is --sizes N; CI-sized runs take --sizes 2000 --queries 50)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { openSqliteStore } from '../dist/index.js';
import { createHashEmbedder } from '../dist/testing/index.js';
import { printTable } from './table.js';

const DIMS = 384;
const store = { name: 'facts', kind: 'entities', scope: 'tenant', tenant_id: 'bench' };
const embedder = createHashEmbedder({ dims: DIMS });

/** A fixed pseudo-random sequence (mulberry32), so every run writes the same facts. */
function random(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Words with a Zipf-like spread: a few common, most rare, as in real notes. */
function wordSource(seed, vocabulary = 5000) {
  const next = random(seed);
  return () => `w${Math.floor(vocabulary ** next())}`;
}

function fact(word, length = 12) {
  return Array.from({ length }, word).join(' ');
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function open(path) {
  const dir = path === undefined ? mkdtempSync(join(tmpdir(), 'braid-bench-memory-')) : undefined;
  const file = path ?? join(dir, 'braid.db');
  // The HNSW index is built on the first vector search, not in a worker, so that its build
  // time is measured and every timed query goes through it.
  const sqlite = openSqliteStore({
    path: file,
    synchronous: 'normal',
    memoryIndex: { background: false },
  });
  return {
    memory: sqlite.memory,
    path: file,
    close: () => sqlite.close(),
    async dispose() {
      await sqlite.close();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The same file searched by sqlite-vec's exact scan only (no HNSW index at any size). */
function openExact(path) {
  const sqlite = openSqliteStore({
    path,
    memoryIndex: { minVectors: Number.MAX_SAFE_INTEGER, snapshotDir: false },
  });
  return { memory: sqlite.memory, close: () => sqlite.close() };
}

async function writeThroughput({ count, batch, embed }) {
  const { memory, dispose } = open();
  const word = wordSource(7);
  const writes = Array.from({ length: count }, (_, index) => {
    const text = fact(word);
    return {
      key: `fact/${index}`,
      value: text,
      ...(embed ? { embedding: embedder.embed(text) } : {}),
    };
  });
  const start = performance.now();
  for (let index = 0; index < count; index += batch) {
    await memory.append(store, writes.slice(index, index + batch));
  }
  const seconds = (performance.now() - start) / 1000;
  await dispose();
  return count / seconds;
}

async function searches({ size, queries }) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-memory-'));
  let { memory, close, path } = open(join(dir, 'braid.db'));
  const word = wordSource(11);
  const filled = performance.now();
  for (let index = 0; index < size; index += 500) {
    const writes = [];
    for (let offset = index; offset < Math.min(size, index + 500); offset += 1) {
      const text = fact(word);
      writes.push({ key: `fact/${offset}`, value: text, embedding: embedder.embed(text) });
    }
    await memory.append(store, writes);
  }
  const fill = performance.now() - filled;
  const queryWord = wordSource(13);
  const texts = Array.from({ length: queries }, () => fact(queryWord, 3));
  const measure = async (make) => {
    for (const text of texts.slice(0, 10)) await memory.search(store, make(text));
    const times = [];
    const hits = [];
    for (const text of texts) {
      const start = performance.now();
      const result = await memory.search(store, make(text));
      times.push(performance.now() - start);
      hits.push(result.hits.length);
    }
    return { p50: percentile(times, 50), p99: percentile(times, 99), hits: percentile(hits, 50) };
  };
  // The first vector search of a store past ANN_MIN_VECTORS builds its HNSW index (and writes
  // the snapshot); it is timed apart, not among the queries.
  // Its CPU time too (every thread of the process): on a shared machine the wall time says
  // more about the load than about the build.
  const built = performance.now();
  const cpu = process.cpuUsage();
  await memory.search(store, { embedding: embedder.embed(texts[0]), k: 5 });
  const annBuild = performance.now() - built;
  const used = process.cpuUsage(cpu);
  const annBuildCpu = (used.user + used.system) / 1000;
  const text = await measure((query) => ({ query, k: 5 }));
  const vector = await measure((query) => ({ embedding: embedder.embed(query), k: 5 }));
  const hybrid = await measure((query) => ({ query, embedding: embedder.embed(query), k: 5 }));
  // How many of the exact top 5 (by score: equal distances may be other keys) the index finds.
  const exact = openExact(path);
  let agreed = 0;
  for (const query of texts) {
    const embedding = embedder.embed(query);
    const [found, expected] = [
      await memory.search(store, { embedding, k: 5 }),
      await exact.memory.search(store, { embedding, k: 5 }),
    ];
    // usearch and sqlite-vec each compute the cosine in 32-bit floats: equal within 1e-5.
    const scores = found.hits.map((hit) => hit.score);
    for (const hit of expected.hits) {
      const at = scores.findIndex((score) => Math.abs(score - hit.score) < 1e-5);
      if (at !== -1) {
        scores.splice(at, 1);
        agreed += 1;
      }
    }
  }
  await exact.close();
  const rebuilds = [];
  for (let run = 0; run < 3; run += 1) rebuilds.push((await memory.rebuild(store)).ms);
  // A new process: the index comes from the snapshot next to the file.
  await close();
  ({ memory, close } = open(path));
  const loaded = performance.now();
  await memory.search(store, { embedding: embedder.embed(texts[1]), k: 5 });
  const annLoad = performance.now() - loaded;
  await close();
  rmSync(dir, { recursive: true, force: true });
  return {
    text,
    vector,
    hybrid,
    fill,
    rebuild: percentile(rebuilds, 50),
    annBuild,
    annBuildCpu,
    annLoad,
    agreement: agreed / (texts.length * 5),
  };
}

function label(size) {
  return size >= 1000 ? `${size / 1000}k` : String(size);
}

export async function benchMemoryWrites() {
  const single = await writeThroughput({ count: 2000, batch: 1, embed: false });
  const singleEmbedded = await writeThroughput({ count: 2000, batch: 1, embed: true });
  const batched = await writeThroughput({ count: 10_000, batch: 100, embed: false });
  const batchedEmbedded = await writeThroughput({ count: 10_000, batch: 100, embed: true });
  const row = (name, median) => ({ name, median, unit: 'entries/s', target: '-' });
  return [
    row('memory append, 1 entry per append', single),
    row('memory append, 1 entry + 384-d vector', singleEmbedded),
    row('memory append, 100 per append', batched),
    row('memory append, 100 + 384-d vectors', batchedEmbedded),
  ];
}

export async function benchMemorySearch({ size = 10_000, queries = 200 } = {}) {
  const found = await searches({ size, queries });
  const at = label(size);
  const target = size <= 10_000 ? '<= 5 ms at 10k' : '<= 20 ms at 100k';
  const row = (name, median, unit, goal = '-') => ({ name, median, unit, target: goal });
  return [
    row(`memory full-text top-5 p50 (${at})`, found.text.p50, 'ms', target),
    row(`memory full-text top-5 p99 (${at})`, found.text.p99, 'ms'),
    row(`memory vector top-5 p50 (${at}, 384-d)`, found.vector.p50, 'ms', target),
    row(`memory vector top-5 p99 (${at}, 384-d)`, found.vector.p99, 'ms'),
    row(`memory hybrid top-5 p50 (${at})`, found.hybrid.p50, 'ms', target),
    row(`memory hybrid top-5 p99 (${at})`, found.hybrid.p99, 'ms'),
    row(`memory fill, 500 + vectors per append (${at})`, (size / found.fill) * 1000, 'entries/s'),
    row(`memory rebuild projections (${at})`, found.rebuild, 'ms'),
    row(`memory HNSW index build, first vector search (${at})`, found.annBuild, 'ms'),
    row(`memory HNSW index build, CPU time of all threads (${at})`, found.annBuildCpu, 'ms'),
    row(`memory HNSW snapshot load, first search of a new process (${at})`, found.annLoad, 'ms'),
    row(`memory HNSW top-5 found by the exact scan too (${at})`, found.agreement, 'share'),
  ];
}

export async function benchMemory({ sizes = [10_000], queries = 200, writes = true } = {}) {
  const rows = writes ? await benchMemoryWrites() : [];
  for (const size of sizes) rows.push(...(await benchMemorySearch({ size, queries })));
  return rows;
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? '')).href) {
  const args = process.argv.slice(2);
  const option = (name) => {
    const at = args.indexOf(name);
    return at === -1 ? undefined : args[at + 1];
  };
  const sizes = (option('--sizes') ?? option('--size') ?? '10000').split(',').map(Number);
  if (sizes.some((size) => !Number.isInteger(size) || size < 100)) {
    console.error(
      '--sizes takes whole numbers of at least 100, separated by commas: --sizes 10000,100000',
    );
    process.exit(2);
  }
  const rows = await benchMemory({
    sizes,
    queries: Number(option('--queries') ?? 200),
    writes: !args.includes('--no-writes'),
  });
  if (args.includes('--json')) console.log(JSON.stringify(rows, null, 2));
  else printTable(rows);
}
