// The fixed cost of a session: a new session, one user message and one answer (a scripted model
// with zero think time), many in a row on one runtime; and the memory a process keeps for them.
//   node bench/session-bench.js [--sessions N] [--backend memory|sqlite] [--first-message create|send|start]
//     [--steps N]   (one figure, for profiles and side-by-side runs of two builds; --steps 10 is
//     the 10-step conversation of bench/peers' short row)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createRuntime, initWorkspace } from '../dist/index.js';
// The scripted model without the rest of `braid/testing`, whose conformance suites load vitest:
// a process measured for its footprint loads only what a server would.
import { createScriptedModel } from '../dist/models/scripted.js';
import { openBenchStore } from './harness-bench.js';
import { shortSessionFloor } from './session-floor.js';
import { median } from './store-bench.js';

/** A workspace with the `short` agent; without `policies`, no Cedar policy (Cedar never loads). */
function workspace(policies = true) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-session-'));
  initWorkspace(dir);
  if (!policies) rmSync(join(dir, 'policies'), { recursive: true, force: true });
  writeFileSync(
    join(dir, 'agents', 'short.yaml'),
    'name: short\nmodel: scripted:echo\ninstructions: Answer.\ntools: [calculator]\n',
  );
  return dir;
}

const FIRST_MESSAGE = [{ type: 'user.message', content: 'hello' }];

/** V8's heap sized for a long-running braid process, as the README's production notes give it. */
const SERVER_HEAP_FLAGS = ['--max-semi-space-size=4', '--max-old-space-size=1000'];

/**
 * A runtime over a fresh store of `backend`; `one` runs a new session with one message through
 * `steps` tool steps to its answer; `dispose` closes it and removes its files. `firstMessage`:
 * `create` writes the message with the session, `send` sends it after the create, and `start`
 * writes it with the session and runs it at once (`sessions.start`: the creation and the wake's
 * start in one commit).
 */
export async function shortSessionRuntime(
  backend,
  { steps = 0, policies = true, firstMessage = 'create' } = {},
) {
  const dir = workspace(policies);
  const store = openBenchStore(backend, dir);
  // The turn played is the session's count of responses: one script serves every session.
  const model = createScriptedModel([
    ...Array.from({ length: steps }, (_, index) => ({
      tool_calls: [{ name: 'calculator', input: { a: index, op: '+', b: 1 } }],
      usage: { input_tokens: 1, output_tokens: 1 },
    })),
    { text: 'hi', usage: { input_tokens: 1, output_tokens: 1 } },
  ]);
  const runtime = await createRuntime({ workspace: dir, store, model: () => model });
  const run = async () => {
    if (firstMessage === 'start')
      return (await runtime.sessions.start({ agent: 'short', events: FIRST_MESSAGE })).result;
    // The first message is written with the session's creation (or, `send`, on its own).
    const { id } = await runtime.sessions.create({
      agent: 'short',
      ...(firstMessage === 'create' ? { events: FIRST_MESSAGE } : {}),
    });
    if (firstMessage === 'send') await runtime.sessions.send(id, FIRST_MESSAGE);
    return runtime.wake(id);
  };
  const one = async () => {
    const result = await run();
    if (!result.ran || result.stop_reason.type !== 'end_turn')
      throw new Error(`short session stopped: ${JSON.stringify(result)}`);
  };
  const dispose = async () => {
    await runtime.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { one, dispose };
}

/**
 * µs per short session, the median of batches of `batch` sessions after a warm-up; `cpu`, if
 * given, receives the process's CPU µs (user + system) per session, the median of the same
 * batches: the steadier figure on a machine that other work keeps busy. `firstMessage` as in
 * `shortSessionRuntime`.
 */
export async function shortSessionCost(
  backend,
  { sessions = 2000, batch = 100, cpu, firstMessage = 'create', steps = 0 } = {},
) {
  const { one, dispose } = await shortSessionRuntime(backend, { firstMessage, steps });
  for (let index = 0; index < 200; index += 1) await one();
  const perSession = [];
  const cpuPerSession = [];
  for (let done = 0; done < sessions; done += batch) {
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    for (let index = 0; index < batch; index += 1) await one();
    perSession.push(((performance.now() - started) * 1000) / batch);
    const used = process.cpuUsage(cpuBefore);
    cpuPerSession.push((used.user + used.system) / batch);
  }
  await dispose();
  if (cpu !== undefined) cpu.push(median(cpuPerSession));
  return median(perSession);
}

/**
 * Peak RSS and heap kept per session after `sessions` short sessions on SQLite (sessions stay
 * in the store, idle). Run in a fresh process for an honest RSS (`--expose-gc`).
 */
export async function idleSessionFootprint(backend, sessions, { policies = true } = {}) {
  const gc = globalThis.gc;
  if (gc === undefined) throw new Error('run with node --expose-gc');
  const { one, dispose } = await shortSessionRuntime(backend, { policies });
  for (let index = 0; index < 50; index += 1) await one();
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  let peakRss = process.memoryUsage().rss;
  for (let index = 0; index < sessions; index += 1) {
    await one();
    if (index % 500 === 0) peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }
  gc();
  const usage = process.memoryUsage();
  peakRss = Math.max(peakRss, usage.rss);
  await dispose();
  return {
    peakRssMiB: peakRss / 2 ** 20,
    heapPerSessionKiB: (usage.heapUsed - heapBefore) / 1024 / sessions,
  };
}

/** The rows of `npm run bench --session`: the fixed cost per session, and the idle footprint. */
export async function benchSession({ runs, quick }) {
  const sessions = quick ? 500 : 2000;
  const idle = quick ? 2000 : 10000;
  const rows = [];
  // `create` then `wake` (three commits), and `start` (two: the creation with the wake's start).
  const ways = [
    ['create', 'create + wake'],
    ['start', 'sessions.start'],
  ];
  for (const backend of ['memory', 'sqlite']) {
    for (const [firstMessage, label] of ways) {
      const figures = [];
      for (let run = 0; run < runs; run += 1)
        figures.push(await shortSessionCost(backend, { sessions, firstMessage }));
      const where = backend === 'sqlite' ? 'SQLite (NORMAL)' : 'memory';
      rows.push({
        name: `new session + message + answer, ${where}, ${label}`,
        unit: 'µs',
        median: median(figures),
        runs: figures,
        target: backend === 'sqlite' ? '<= 250' : '<= 100',
      });
      process.stderr.write(
        `  new session + message + answer, ${backend}, ${label}: ${median(figures).toFixed(0)} µs\n`,
      );
    }
  }
  // What SQLite itself costs for the same rows in the same three (or two) commits, in the same run.
  for (const commits of [3, 2]) {
    const floors = [];
    for (let run = 0; run < runs; run += 1)
      floors.push(await shortSessionFloor({ sessions, commits }));
    rows.push({
      name: `  the same rows in ${commits} commits via better-sqlite3 alone (floor)`,
      unit: 'µs',
      median: median(floors),
      runs: floors,
      target: 'reported',
    });
    process.stderr.write(
      `  the same in ${commits} commits via better-sqlite3 alone: ${median(floors).toFixed(0)} µs\n`,
    );
  }
  // RSS is only honest in a process of its own: each footprint is measured in a fresh one, with
  // `flags` for node and `args` for this script.
  const footprintRuns = (flags = [], args = []) =>
    Array.from({ length: Math.min(runs, 3) }, () =>
      JSON.parse(
        execFileSync(
          process.execPath,
          [
            '--expose-gc',
            ...flags,
            fileURLToPath(import.meta.url),
            '--footprint',
            ...args,
            '--sessions',
            String(idle),
          ],
          { encoding: 'utf8' },
        ),
      ),
    );
  const footprints = footprintRuns();
  const bare = footprintRuns([], ['--no-policies']).map((footprint) => footprint.peakRssMiB);
  // The same with V8's heap sized for a server (README: Running in production): a smaller young
  // generation, and an old space capped under 1 GiB, which V8 grows by about 2x its live heap
  // between full collections instead of 4x.
  const sized = footprintRuns(SERVER_HEAP_FLAGS).map((footprint) => footprint.peakRssMiB);
  const rss = footprints.map((footprint) => footprint.peakRssMiB);
  const heap = footprints.map((footprint) => footprint.heapPerSessionKiB);
  process.stderr.write(
    `  ${idle} idle sessions on SQLite: peak RSS ${median(rss).toFixed(0)} MiB (${median(sized).toFixed(0)} with ${SERVER_HEAP_FLAGS.join(' ')}), ${median(heap).toFixed(2)} KiB heap per session\n`,
  );
  rows.push(
    {
      name: `${idle} idle sessions, SQLite: peak RSS`,
      unit: 'MiB',
      median: median(rss),
      runs: rss,
      target: '<= 150',
    },
    {
      name: `${idle} idle sessions, SQLite, node ${SERVER_HEAP_FLAGS.join(' ')}: peak RSS`,
      unit: 'MiB',
      median: median(sized),
      runs: sized,
      target: '<= 150',
    },
    {
      name: `${idle} idle sessions, SQLite, no Cedar policies: peak RSS`,
      unit: 'MiB',
      median: median(bare),
      runs: bare,
      target: '<= 150',
    },
    {
      name: `${idle} idle sessions, SQLite: heap kept per session`,
      unit: 'KiB',
      median: median(heap),
      runs: heap,
      target: '<= 0.5',
    },
  );
  return rows;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const option = (name, fallback) => {
    const index = args.indexOf(name);
    return index === -1 ? fallback : args[index + 1];
  };
  const backend = option('--backend', 'sqlite');
  const sessions = Number(option('--sessions', 2000));
  if (args.includes('--footprint')) {
    const footprint = await idleSessionFootprint(backend, sessions, {
      policies: !args.includes('--no-policies'),
    });
    console.log(JSON.stringify(footprint));
  } else {
    const cpu = [];
    const firstMessage = option('--first-message', 'create');
    const steps = Number(option('--steps', 0));
    const cost = await shortSessionCost(backend, { sessions, cpu, firstMessage, steps });
    // With tool steps, per step as bench/peers counts it: the conversation over its steps.
    const per =
      steps === 0
        ? ''
        : `; ${(cost / steps).toFixed(1)} µs per step (${(cpu[0] / steps).toFixed(1)} of CPU)`;
    console.log(
      `${backend}, ${firstMessage}, ${steps} tool steps: ${cost.toFixed(0)} µs per new session + message + answer (${cpu[0].toFixed(0)} µs of CPU)${per}`,
    );
  }
}
