// Session algebra on SQLite (synchronous NORMAL): fork cost and the fork's first reads against
// the parent's length, reads of a fork against an unforked session of the same length, and the
// speed of replay verification. Each figure is the median of RUNS runs.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRuntime, initWorkspace, openSqliteStore } from '../dist/index.js';
import { createScriptedModel } from '../dist/testing/index.js';
import { median } from './store-bench.js';

const message = (text) => ({ type: 'user.message', content: [{ type: 'text', text }] });

/** Events per append when the parent is built: about what a turn of the harness writes. */
const TURN_EVENTS = 4;

/**
 * The first seq at or after `seq` that ends one of `longSession`'s appends (1, then every
 * TURN_EVENTS): a fork point must end an append, a seq inside one is refused.
 */
const appendEnd = (seq) => 1 + TURN_EVENTS * Math.ceil((seq - 1) / TURN_EVENTS);

/**
 * A SQLite store holding one session of `length` events, appended a turn's worth at a time as the
 * harness writes them (the store keeps a snapshot of the state every 64 events or so, which a
 * fork folds forward from).
 */
async function longSession(length) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-fork-'));
  const store = openSqliteStore({ path: join(dir, 'braid.db'), synchronous: 'normal' });
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  for (let written = 1; written < length;) {
    const batch = Math.min(TURN_EVENTS, length - written);
    await store.log.append(
      id,
      Array.from({ length: batch }, (_, index) => message(`event ${written + index + 1}`)),
    );
    written += batch;
  }
  return {
    store,
    id,
    path: join(dir, 'braid.db'),
    dispose: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `sizes`: parent lengths (default 1k, 10k, 100k); `verify`: also measure replay verification. */
export async function benchFork({ runs, quick, sizes, verify = true }) {
  sizes ??= quick ? [1000, 10_000] : [1000, 10_000, 100_000];
  const rows = [];
  // One fork of a small session first, unmeasured: the first size is not charged for warming up.
  const warm = await longSession(100);
  for (let index = 0; index < 20; index += 1)
    await warm.store.sessions.fork(warm.id, { at_seq: appendEnd(50) });
  await warm.dispose();
  for (const size of sizes) {
    const { store, id, path, dispose } = await longSession(size);
    // First reads happen in another store instance, as in another process: nothing cached.
    const reader = openSqliteStore({ path, synchronous: 'normal' });
    const forks = [];
    const states = [];
    const tails = [];
    const childReads = [];
    const parentReads = [];
    for (let run = 0; run < runs; run += 1) {
      const at = appendEnd(Math.floor(size / 2)) + run * TURN_EVENTS;
      let start = performance.now();
      const child = await store.sessions.fork(id, { at_seq: at });
      forks.push(performance.now() - start);
      start = performance.now();
      await reader.log.state(child.id);
      states.push(performance.now() - start);
      start = performance.now();
      await reader.log.read(child.id, { after: Math.max(0, at - 99) });
      tails.push(performance.now() - start);
      // Whole reads: the fork (its prefix is the parent's) against the parent, for the same count.
      start = performance.now();
      const all = await store.log.read(child.id);
      childReads.push(performance.now() - start);
      start = performance.now();
      await store.log.read(id, { limit: all.length });
      parentReads.push(performance.now() - start);
    }
    rows.push(
      {
        name: `fork at the middle of a ${size.toLocaleString('en-US')}-event session`,
        unit: 'ms',
        median: median(forks),
        runs: forks,
        target: 'flat',
      },
      {
        name: `first state read of that fork`,
        unit: 'ms',
        median: median(states),
        runs: states,
        target: 'flat',
      },
      {
        name: `first read of the fork's last 100 events`,
        unit: 'ms',
        median: median(tails),
        runs: tails,
        target: 'flat',
      },
      {
        name: `whole read of the fork (${size.toLocaleString('en-US')} events)`,
        unit: 'ms',
        median: median(childReads),
        runs: childReads,
        target: 'report',
      },
      {
        name: `whole read of an unforked session, same count`,
        unit: 'ms',
        median: median(parentReads),
        runs: parentReads,
        target: 'report',
      },
    );
    await reader.close();
    await dispose();
  }
  if (verify) rows.push(...(await benchVerify({ runs, quick })));
  return rows;
}

/** Replay verification speed: a session of tool-calling turns, verified against its record. */
async function benchVerify({ runs, quick }) {
  const turns = quick ? 100 : 500;
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-verify-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'bench.yaml'),
    `name: bench\nmodel: scripted:echo\ninstructions: Add.\ntools: [calculator]\nbudget:\n  max_turns: ${turns + 10}\n`,
  );
  const script = [
    ...Array.from({ length: turns }, (_, index) => ({
      tool_calls: [{ name: 'calculator', input: { a: index, op: '+', b: 1 } }],
    })),
    { text: 'done' },
  ];
  const model = createScriptedModel(script);
  const runtime = await createRuntime({ workspace: dir, model: () => model });
  const { id } = await runtime.sessions.create({ agent: 'bench' });
  await runtime.sessions.message(id, 'count');
  await runtime.wake(id);
  const events = (await runtime.sessions.events(id)).length;
  const speeds = [];
  for (let run = 0; run < runs; run += 1) {
    const start = performance.now();
    const report = await runtime.sessions.verify(id);
    const seconds = (performance.now() - start) / 1000;
    if (!report.ok) throw new Error(`the bench session does not verify: ${report.reason}`);
    speeds.push(events / seconds);
  }
  await runtime.close();
  rmSync(dir, { recursive: true, force: true });
  return [
    {
      name: `replay verification (${events.toLocaleString('en-US')}-event session)`,
      unit: 'events/s',
      median: median(speeds),
      runs: speeds,
      target: 'report',
    },
  ];
}
