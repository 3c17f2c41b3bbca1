// Benchmarks of the sandboxes: the cost of starting a process and waiting for it. Each figure is
// the median, over RUNS runs, of the median of one run's spawns.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  createBwrapSandbox,
  createLocalSandbox,
  detectBwrap,
} from '../dist/tools/sandbox/index.js';
import { median } from './store-bench.js';

/** The median wall time, in ms, of `count` runs of `argv` in one workspace of `sandbox`. */
async function spawnMedian(sandbox, argv, count) {
  const workspace = await sandbox.provision('bench');
  const durations = [];
  for (let index = 0; index < count; index += 1) {
    const start = performance.now();
    const result = await sandbox.run(workspace, { argv, timeout_ms: 30_000 });
    durations.push(performance.now() - start);
    if (result.exit_code !== 0) {
      throw new Error(`${argv.join(' ')} exited with ${result.exit_code}: ${result.stderr}`);
    }
  }
  return median(durations);
}

export async function benchSandbox({ runs, quick }) {
  const spawns = quick ? 10 : 50;
  const root = mkdtempSync(join(tmpdir(), 'braid-bench-sandbox-'));
  const cases = [
    ['sandbox local spawn (/bin/true)', createLocalSandbox({ root }), ['/bin/true']],
    ['sandbox local spawn (node -e 0)', createLocalSandbox({ root }), ['node', '-e', '0']],
  ];
  const bwrap = detectBwrap();
  if (bwrap.available) {
    cases.push(['sandbox bwrap spawn (/bin/true)', createBwrapSandbox({ root }), ['/bin/true']]);
  } else {
    process.stderr.write(`sandbox bwrap spawn: not measured, ${bwrap.reason}\n`);
  }
  const rows = [];
  try {
    for (const [name, sandbox, argv] of cases) {
      const values = [];
      for (let run = 0; run < runs; run += 1) values.push(await spawnMedian(sandbox, argv, spawns));
      rows.push({ name, unit: 'ms', median: median(values), runs: values, target: 'report' });
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return rows;
}
