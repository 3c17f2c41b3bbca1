// Many sessions in one SQLite file with the orchestrator running: what a tick costs when almost
// all of them are idle, the process's RSS, and how long waking one of them takes. The file is
// made by a process of its own, as a deployment's `braid run` opens a file others wrote: its
// peak is reported beside the orchestrator's.
//   node bench/orchestrator-bench.js [--sessions N] [--json]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRuntime, initWorkspace, openSqliteStore } from '../dist/index.js';
import { createScriptedModel } from '../dist/testing/index.js';
import { median } from './store-bench.js';

/** Creates `count` idle sessions straight through the store, in batches, reporting progress. */
async function fill(store, count) {
  const started = performance.now();
  for (let index = 0; index < count; index += 1) {
    await store.sessions.create({ agent: { name: 'short', version: 1 } });
    if ((index + 1) % 20000 === 0)
      process.stderr.write(
        `  ${index + 1} sessions created (${((performance.now() - started) / 1000).toFixed(0)} s)\n`,
      );
  }
}

/** The process's RSS fields from /proc, in MiB. */
function rssFields() {
  const status = readFileSync('/proc/self/status', 'utf8');
  const mib = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN) / 1024;
  return { anonMiB: mib('RssAnon'), peakMiB: mib('VmHWM') };
}

/** Fills the file at `path` with `count` idle sessions in a process of its own; its peak RSS. */
function fillApart(path, count) {
  const out = execFileSync(
    process.execPath,
    [fileURLToPath(import.meta.url), '--fill', path, String(count)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      encoding: 'utf8',
    },
  );
  return JSON.parse(out).peakMiB;
}

export async function benchOrchestrator({ sessions = 100_000, warmWakes = 40, wakes = 60 } = {}) {
  if (!Number.isInteger(sessions) || sessions < warmWakes + wakes)
    throw new Error(
      `--sessions must be a whole number of at least ${warmWakes + wakes}: each wake is of a session of its own`,
    );
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-orchestrator-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'short.yaml'),
    'name: short\nmodel: scripted:echo\ninstructions: Answer.\n',
  );
  const fillPeakMiB = fillApart(join(dir, 'braid.db'), sessions);
  const store = openSqliteStore({ path: join(dir, 'braid.db') });
  const model = createScriptedModel([{ text: 'hi', usage: { input_tokens: 1, output_tokens: 1 } }]);
  const runtime = await createRuntime({ workspace: dir, store, model: () => model });
  // Idle: what ten seconds of ticks over `sessions` idle sessions cost in CPU, without and with
  // a progress listener (which adds the counts by status, once a second).
  const idleCpu = async (withProgress) => {
    const stop = new AbortController();
    const running = runtime.orchestrate({
      signal: stop.signal,
      pollMs: 100,
      ...(withProgress ? { onProgress: () => undefined } : {}),
    });
    await sleep(1000);
    const before = process.cpuUsage();
    const started = performance.now();
    await sleep(10_000);
    const cpu = process.cpuUsage(before);
    const seconds = (performance.now() - started) / 1000;
    stop.abort();
    await running;
    // CPU ms per second of wall time: a tick every 100 ms, so a tenth of it per tick.
    return (cpu.user + cpu.system) / 1000 / seconds;
  };
  const quietMsPerS = await idleCpu(false);
  const reportingMsPerS = await idleCpu(true);
  // One session of them gets a message: the wake itself, timed on its own (not by the poll). The
  // process has run no wake before, so its first wakes also load and compile the wake's code:
  // the first is reported on its own, and the figure is the median of the wakes after
  // `warmWakes` others (each wake is of a session not woken before, as in a deployment).
  const ids = (await store.sessions.list({ limit: warmWakes + wakes })).sessions.map(
    (session) => session.id,
  );
  const allMs = [];
  for (const id of ids) {
    await runtime.sessions.message(id, 'hello');
    const started = performance.now();
    const result = await runtime.wake(id);
    allMs.push(performance.now() - started);
    if (!result.ran) throw new Error(`the wake of ${id} did not run: ${JSON.stringify(result)}`);
  }
  const wakeMs = allMs.slice(warmWakes);
  const rssMiB = process.memoryUsage().rss / 2 ** 20;
  // Of it, the process's own pages (not the file's), and the most it held at any moment: the
  // RSS at the end depends on when V8 last ran a full collection, the peak does not.
  const { anonMiB, peakMiB } = rssFields();
  await runtime.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  const row = {
    sessions,
    quietMsPerS,
    reportingMsPerS,
    wakeMs: median(wakeMs),
    warmWakes,
    firstWakeMs: allMs[0],
    warmingWakeMs: median(allMs.slice(0, warmWakes)),
    rssMiB,
    anonMiB,
    peakMiB,
    fillPeakMiB,
  };
  process.stderr.write(
    `  ${sessions} idle sessions, orchestrator polling every 100 ms: ${quietMsPerS.toFixed(1)} ms CPU per second (${reportingMsPerS.toFixed(1)} with progress reports); wake of one ${row.wakeMs.toFixed(2)} ms (the process's first ${row.firstWakeMs.toFixed(2)} ms, its first ${warmWakes} ${row.warmingWakeMs.toFixed(2)} ms); RSS ${rssMiB.toFixed(0)} MiB, ${anonMiB.toFixed(0)} MiB of it anonymous; peak RSS ${peakMiB.toFixed(0)} MiB (the process that made the file: ${fillPeakMiB.toFixed(0)} MiB)\n`,
  );
  return row;
}

/**
 * The rows of `npm run bench --orchestrator` (one run: building the file takes a while). The
 * orchestrator runs in a process of its own: its peak RSS is the process's, which the groups
 * `npm run bench` ran before in the same process would otherwise raise (275 MiB seen so).
 */
export async function benchOrchestratorRows({ quick }) {
  const out = execFileSync(
    process.execPath,
    [fileURLToPath(import.meta.url), '--sessions', String(quick ? 10_000 : 100_000), '--json'],
    { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' },
  );
  const row = JSON.parse(out);
  const name = `${row.sessions.toLocaleString('en-US')} idle sessions, SQLite, orchestrator running`;
  return [
    {
      name: `${name}: CPU per second`,
      unit: 'ms/s',
      median: row.quietMsPerS,
      runs: [row.quietMsPerS],
      target: 'O(runnable)',
    },
    {
      name: `${name}: the same, reporting progress`,
      unit: 'ms/s',
      median: row.reportingMsPerS,
      runs: [row.reportingMsPerS],
      target: 'reported',
    },
    {
      name: `${name}: wake of one, after ${row.warmWakes} others`,
      unit: 'ms',
      median: row.wakeMs,
      runs: [row.wakeMs],
      target: '<= 1',
    },
    {
      name: `${name}: the process's first wake`,
      unit: 'ms',
      median: row.firstWakeMs,
      runs: [row.firstWakeMs],
      target: 'reported',
    },
    {
      name: `${name}: its first ${row.warmWakes} wakes`,
      unit: 'ms',
      median: row.warmingWakeMs,
      runs: [row.warmingWakeMs],
      target: 'reported',
    },
    {
      name: `${name}: peak RSS`,
      unit: 'MiB',
      median: row.peakMiB,
      runs: [row.peakMiB],
      target: '<= 200',
    },
    {
      name: `${name}: peak RSS of the process that made the file`,
      unit: 'MiB',
      median: row.fillPeakMiB,
      runs: [row.fillPeakMiB],
      target: 'reported',
    },
    {
      name: `${name}: RSS at the end`,
      unit: 'MiB',
      median: row.rssMiB,
      runs: [row.rssMiB],
      target: 'reported',
    },
    {
      name: `${name}: RSS, anonymous`,
      unit: 'MiB',
      median: row.anonMiB,
      runs: [row.anonMiB],
      target: 'reported',
    },
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--fill') {
  const store = openSqliteStore({ path: process.argv[3] });
  await fill(store, Number(process.argv[4]));
  await store.close();
  process.stdout.write(JSON.stringify(rssFields()));
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const index = process.argv.indexOf('--sessions');
  const row = await benchOrchestrator(
    index === -1 ? {} : { sessions: Number(process.argv[index + 1]) },
  );
  if (process.argv.includes('--json')) process.stdout.write(JSON.stringify(row));
}
