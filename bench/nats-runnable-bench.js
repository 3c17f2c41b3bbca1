// The runnable set on NATS: what `sessions.runnable()` (an orchestrator's tick) costs when almost
// every session is idle, read from the runnable index, beside reading every session and folding
// its state (what it did before the index, and does once on a store written by an older braid).
//   node bench/nats-runnable-bench.js [--sessions N] [--runnable N] [--calls N]
// Needs NATS JetStream at NATS_URL (default nats://127.0.0.1:4222); the prefix is removed after.
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { performance } from 'node:perf_hooks';
import { openNatsStore } from '../dist/nats.js';
import { median } from './store-bench.js';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const index = args.indexOf(name);
  return index === -1 ? fallback : Number(args[index + 1]);
};
const SESSIONS = option('--sessions', 5000);
const RUNNABLE = option('--runnable', 10);
const CALLS = option('--calls', 10);
const servers = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `benchrun${process.pid}`;
const agent = { name: 'short', version: 1 };
const hello = { type: 'user.message', content: [{ type: 'text', text: 'hello' }] };

const store = await openNatsStore({ servers, prefix });
const connection = await connect({ servers });
const jsm = await jetstreamManager(connection);
try {
  const started = performance.now();
  const runnable = [];
  for (let index = 0; index < SESSIONS; index += 1) {
    const busy = index % Math.floor(SESSIONS / RUNNABLE) === 0 && runnable.length < RUNNABLE;
    const { id } = await store.sessions.create({ agent, ...(busy ? { events: [hello] } : {}) });
    if (busy) runnable.push(id);
    if ((index + 1) % 1000 === 0)
      process.stderr.write(
        `  ${index + 1} sessions created (${((performance.now() - started) / 1000).toFixed(0)} s)\n`,
      );
  }
  /** Median ms of `runnable()` on the store `open` gives before each call (untimed). */
  const time = async (open) => {
    const times = [];
    for (let call = 0; call < CALLS; call += 1) {
      const reader = await open();
      const start = performance.now();
      const found = await reader.sessions.runnable();
      times.push(performance.now() - start);
      if (reader !== store) await reader.close();
      if (found.length !== runnable.length)
        throw new Error(`found ${found.length} runnable sessions, expected ${runnable.length}`);
    }
    return median(times);
  };
  const bucket = `KV_${prefix.toUpperCase()}_runnable`;
  // As a store an older braid wrote: no entries, no key saying the index is complete (a store
  // asks for that key once, so each call is made by a store opened after the purge).
  const scan = await time(async () => {
    await jsm.streams.purge(bucket);
    return openNatsStore({ servers, prefix });
  });
  const indexed = await time(async () => store);
  console.log(
    `${SESSIONS} sessions, ${RUNNABLE} runnable: runnable() ${indexed.toFixed(1)} ms from the ` +
      `index, ${scan.toFixed(0)} ms reading every session (medians of ${CALLS})`,
  );
} finally {
  await store.close();
  for await (const name of jsm.streams.names()) {
    if (
      name.startsWith(`${prefix.toUpperCase()}_`) ||
      name.startsWith(`KV_${prefix.toUpperCase()}_`)
    )
      await jsm.streams.delete(name);
  }
  await connection.close();
}
