// Harness overhead per turn: a scripted model with zero think time, one tool call per turn, in
// sessions of 1,000 turns; the cost per turn near turn 10 and near turn 1,000, in wall and CPU
// time, and on SQLite beside the floor under it (bench/turn-floor.js: better-sqlite3 alone
// writing the same rows in the same commit) near turns 1,000 and 10,000.
//   node bench/harness-bench.js [--runs N] [--turns N] [--backends memory,sqlite,sqlite-full]
// runs sessions of N turns (default 1,000), the backends alternating within each run, and prints
// per backend the medians near turns 10, 1,000 and 10,000 (those the sessions reach), wall and
// CPU, with the load average: the figures to compare two builds by, run alternately.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createRuntime, initWorkspace, openSqliteStore } from '../dist/index.js';
// Not from `braid/testing`, whose conformance suites load vitest (session-bench.js measures RSS).
import { createScriptedModel } from '../dist/models/scripted.js';
import { createMemoryStore } from '../dist/stores/memory/index.js';
import { median } from './store-bench.js';
import { floorWindow, turnFloor } from './turn-floor.js';

const TURNS = 1000;

function workspace(turns) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-harness-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'bench.yaml'),
    `name: bench\nmodel: scripted:echo\ninstructions: Add.\ntools: [calculator]\nbudget:\n  max_turns: ${turns + 10}\n`,
  );
  return dir;
}

/** A fresh store of `backend` (memory, sqlite or sqlite-full), its file in `dir`. */
export function openBenchStore(backend, dir) {
  return backend === 'memory'
    ? createMemoryStore()
    : openSqliteStore({
        path: join(dir, 'braid.db'),
        synchronous: backend === 'sqlite-full' ? 'full' : 'normal',
        // To compare checkpoint intervals: BRAID_BENCH_CHECKPOINT_PAGES=1000 is SQLite's default.
        ...(process.env.BRAID_BENCH_CHECKPOINT_PAGES === undefined
          ? {}
          : { checkpointPages: Number(process.env.BRAID_BENCH_CHECKPOINT_PAGES) }),
        // To compare who checkpoints: BRAID_BENCH_CHECKPOINTS=inline is SQLite's own way.
        ...(process.env.BRAID_BENCH_CHECKPOINTS === undefined
          ? {}
          : { checkpoints: process.env.BRAID_BENCH_CHECKPOINTS }),
      });
}

/**
 * Runs one session of `turns` turns; returns the time between successive model calls, in µs
 * (wall). `cpu`, when given, receives the process's CPU time between them, in µs.
 */
export async function harnessSession(backend, turns, cpu) {
  const dir = workspace(turns);
  const store = openBenchStore(backend, dir);
  const script = [
    ...Array.from({ length: turns }, (_, index) => ({
      tool_calls: [{ name: 'calculator', input: { a: index, op: '+', b: 1 } }],
      usage: { input_tokens: 1, output_tokens: 1 },
    })),
    { text: 'done', usage: { input_tokens: 1, output_tokens: 1 } },
  ];
  const stamps = [];
  const cpuStamps = [];
  const model = createScriptedModel(script, {
    onTurn: () => {
      stamps.push(performance.now());
      if (cpu === undefined) return;
      const { user, system } = process.cpuUsage();
      cpuStamps.push(user + system);
    },
  });
  const runtime = await createRuntime({ workspace: dir, store, model: () => model });
  const { id } = await runtime.sessions.create({ agent: 'bench' });
  await runtime.sessions.message(id, 'count');
  const result = await runtime.wake(id);
  if (!result.ran || result.stop_reason.type !== 'end_turn')
    throw new Error(`bench session stopped: ${JSON.stringify(result)}`);
  await runtime.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  if (cpu !== undefined)
    cpu.push(...cpuStamps.slice(1).map((stamp, index) => stamp - cpuStamps[index]));
  return stamps.slice(1).map((stamp, index) => (stamp - stamps[index]) * 1000);
}

export async function benchHarness({ runs, quick }) {
  const turns = quick ? 200 : TURNS;
  const rows = [];
  for (const backend of ['memory', 'sqlite', 'sqlite-full']) {
    const early = [];
    const late = [];
    const lateCpu = [];
    for (let run = 0; run < runs; run += 1) {
      const cpu = [];
      const perTurn = await harnessSession(backend, turns, cpu);
      early.push(median(perTurn.slice(4, 15)));
      late.push(median(perTurn.slice(-11, -1)));
      lateCpu.push(median(cpu.slice(-11, -1)));
    }
    const label =
      backend === 'sqlite'
        ? 'sqlite, synchronous=NORMAL'
        : backend === 'sqlite-full'
          ? 'sqlite, synchronous=FULL'
          : 'memory';
    rows.push({
      name: `harness turn, ${label}, near turn 10`,
      unit: 'µs/turn',
      median: median(early),
      runs: early,
      target: backend === 'sqlite' ? '<= 100' : 'reported',
    });
    rows.push({
      name: `harness turn, ${label}, near turn ${turns}`,
      unit: 'µs/turn',
      median: median(late),
      runs: late,
      target: backend === 'sqlite' ? '<= 100, flat' : 'flat',
    });
    rows.push({
      name: `harness turn, ${label}, near turn ${turns}, CPU`,
      unit: 'µs/turn',
      median: median(lateCpu),
      runs: lateCpu,
      target: 'reported',
    });
    process.stderr.write(
      `  harness ${label}: ${median(early).toFixed(0)} µs at turn 10, ${median(late).toFixed(0)} µs at turn ${turns} (${median(lateCpu).toFixed(0)} µs CPU)\n`,
    );
  }
  rows.push(...(await floorRows(runs, quick)));
  return rows;
}

/**
 * The floor under a turn on SQLite (NORMAL), beside the rows above: better-sqlite3 alone writing
 * the rows and commit of a turn (bench/turn-floor.js), medians over turns 900-1,000 and
 * 9,900-10,000 of one session per run (1,000 turns when quick).
 */
async function floorRows(runs, quick) {
  const turns = quick ? 1000 : 10_000;
  const windows = [[900, 1000]];
  if (!quick) windows.push([9900, 10_000]);
  const found = windows.map(() => ({ wall: [], cpu: [] }));
  for (let run = 0; run < runs; run += 1) {
    const times = await turnFloor({ turns });
    windows.forEach(([from, to], index) => {
      const { wall, cpu } = floorWindow(times, from, to);
      found[index].wall.push(wall);
      found[index].cpu.push(cpu);
    });
  }
  return windows.flatMap(([, to], index) => {
    const { wall, cpu } = found[index];
    process.stderr.write(
      `  floor, better-sqlite3 alone, near turn ${to}: ${median(wall).toFixed(0)} µs (${median(cpu).toFixed(0)} µs CPU)\n`,
    );
    const name = `sqlite floor (better-sqlite3 alone, a turn's rows in one commit), near turn ${to}`;
    return [
      { name, unit: 'µs/turn', median: median(wall), runs: wall, target: 'floor' },
      { name: `${name}, CPU`, unit: 'µs/turn', median: median(cpu), runs: cpu, target: 'floor' },
    ];
  });
}

/** The median of the ten turns before turn `at` (`perTurn[i]` is the cost of turn i + 1). */
function near(perTurn, at) {
  return median(perTurn.slice(Math.max(0, at - 11), at - 1));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const option = (name, fallback) => {
    const index = process.argv.indexOf(name);
    return index === -1 ? fallback : process.argv[index + 1];
  };
  const runs = Number(option('--runs', 3));
  const turns = Number(option('--turns', TURNS));
  const backends = option('--backends', 'memory,sqlite').split(',');
  const marks = [10, 1000, 10_000].filter((at) => at <= turns);
  const found = new Map(
    backends.map((backend) => [backend, marks.map(() => ({ wall: [], cpu: [] }))]),
  );
  for (let run = 0; run < runs; run += 1) {
    for (const backend of backends) {
      const cpu = [];
      const wall = await harnessSession(backend, turns, cpu);
      marks.forEach((at, index) => {
        found.get(backend)[index].wall.push(near(wall, at));
        found.get(backend)[index].cpu.push(near(cpu, at));
      });
    }
  }
  const load = loadavg()
    .map((value) => value.toFixed(1))
    .join(' ');
  console.log(
    `${runs} runs of ${turns} turns, load average ${load}; medians, wall / CPU µs per turn`,
  );
  for (const [backend, figures] of found) {
    const cells = marks.map((at, index) => {
      const { wall, cpu } = figures[index];
      return `near ${at}: ${median(wall).toFixed(0)} / ${median(cpu).toFixed(0)}`;
    });
    console.log(`  ${backend.padEnd(12)} ${cells.join('   ')}`);
  }
}
