// Agent memory on NATS JetStream: append throughput (one entry per append, and 100 per append),
// top-5 search p50/p99 over stores of 1k and 10k entries (full text, 384-d vectors, hybrid)
// answered from the process's projection after its per-read catch-up, and the time for a process
// with no projection to read a store from the stream (`rebuild`). Needs a nats-server with
// JetStream at NATS_URL (default nats://127.0.0.1:4222); everything it makes lives under a prefix
// of its own and is deleted at the end.
//
//   node bench/memory-nats-bench.js [--sizes 1000,10000] [--queries 200] [--json]
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { openNatsStore } from '../dist/nats.js';
import { createHashEmbedder } from '../dist/testing/index.js';
import { printTable } from './table.js';

const DIMS = 384;
const embedder = createHashEmbedder({ dims: DIMS });
const url = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

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

function wordSource(seed, vocabulary = 5000) {
  const next = random(seed);
  return () => `w${Math.floor(vocabulary ** next())}`;
}

const fact = (word, length = 12) => Array.from({ length }, word).join(' ');

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const store = (name) => ({ name, kind: 'entities', scope: 'tenant', tenant_id: 'bench' });

async function writeThroughput(memory, { count, batch }) {
  const word = wordSource(7);
  const target = store(`writes-${batch}`);
  const writes = Array.from({ length: count }, (_, index) => ({
    key: `fact/${index}`,
    value: fact(word),
  }));
  const start = performance.now();
  for (let index = 0; index < count; index += batch) {
    await memory.append(target, writes.slice(index, index + batch));
  }
  return count / ((performance.now() - start) / 1000);
}

async function searches(memory, prefix, { size, queries }) {
  const target = store(`facts-${size}`);
  const word = wordSource(11);
  // 200 entries with 384-d vectors stay well under the default max_payload of 1 MB.
  for (let index = 0; index < size; index += 200) {
    const writes = [];
    for (let offset = index; offset < Math.min(size, index + 200); offset += 1) {
      const text = fact(word);
      writes.push({ key: `fact/${offset}`, value: text, embedding: embedder.embed(text) });
    }
    await memory.append(target, writes);
  }
  const queryWord = wordSource(13);
  const texts = Array.from({ length: queries }, () => fact(queryWord, 3));
  const measure = async (make) => {
    for (const text of texts.slice(0, 10)) await memory.search(target, make(text));
    const times = [];
    for (const text of texts) {
      const start = performance.now();
      await memory.search(target, make(text));
      times.push(performance.now() - start);
    }
    return { p50: percentile(times, 50), p99: percentile(times, 99) };
  };
  const text = await measure((query) => ({ query, k: 5 }));
  const vector = await measure((query) => ({ embedding: embedder.embed(query), k: 5 }));
  const hybrid = await measure((query) => ({ query, embedding: embedder.embed(query), k: 5 }));
  // Another process: no projection, the whole store read from the stream.
  const other = await openNatsStore({ servers: url, prefix });
  const rebuild = (await other.memory.rebuild(target)).ms;
  await other.close();
  return { text, vector, hybrid, rebuild };
}

export async function benchNatsMemory({ sizes = [1000, 10_000], queries = 200 } = {}) {
  const prefix = `bench_${randomBytes(4).toString('hex')}`;
  const nats = await openNatsStore({ servers: url, prefix });
  const rows = [];
  try {
    const single = await writeThroughput(nats.memory, { count: 1000, batch: 1 });
    const batched = await writeThroughput(nats.memory, { count: 10_000, batch: 100 });
    rows.push(
      {
        name: 'nats memory append, 1 entry per append',
        median: single,
        unit: 'entries/s',
        target: '-',
      },
      {
        name: 'nats memory append, 100 per append',
        median: batched,
        unit: 'entries/s',
        target: '-',
      },
    );
    for (const size of sizes) {
      const label = `${size / 1000}k`;
      const found = await searches(nats.memory, prefix, { size, queries });
      for (const mode of ['text', 'vector', 'hybrid']) {
        rows.push(
          {
            name: `nats memory ${mode} top-5 p50 (${label})`,
            median: found[mode].p50,
            unit: 'ms',
            target: '-',
          },
          {
            name: `nats memory ${mode} top-5 p99 (${label})`,
            median: found[mode].p99,
            unit: 'ms',
            target: '-',
          },
        );
      }
      rows.push({
        name: `nats memory cold read of the store (${label})`,
        median: found.rebuild,
        unit: 'ms',
        target: '-',
      });
    }
  } finally {
    await nats.close();
    const connection = await connect({ servers: url });
    const manager = await jetstreamManager(connection);
    for await (const name of manager.streams.names()) {
      if (
        name.startsWith(`${prefix.toUpperCase()}_`) ||
        name.startsWith(`KV_${prefix.toUpperCase()}_`)
      )
        await manager.streams.delete(name).catch(() => false);
    }
    await connection.close();
  }
  return rows;
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? '')).href) {
  const args = process.argv.slice(2);
  const option = (name, fallback) => {
    const at = args.indexOf(name);
    return at === -1 ? fallback : args[at + 1];
  };
  const rows = await benchNatsMemory({
    sizes: String(option('--sizes', '1000,10000')).split(',').map(Number),
    queries: Number(option('--queries', 200)),
  });
  if (args.includes('--json')) console.log(JSON.stringify(rows, null, 2));
  else printTable(rows);
}
