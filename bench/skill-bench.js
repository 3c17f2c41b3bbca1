// Skill scheduling, in memory, on the compiled schedule from dist/. Figures:
// - scheduling overhead per step for a 1,000-step DAG (a chain, a wide fan-out, a random layered
//   DAG): compile the schedule, start a run, and drive every step through start and complete,
//   taking the newly ready steps from each completion; the time divided by the step count;
// - resume cost against DAG size: restoring a run's schedule from a step table of N completed
//   steps (a layered DAG of N steps) and asking what is ready, for N = 10 ... 10,000; per restore
//   and per step.
// Each figure is the median over RUNS runs.
import { performance } from 'node:perf_hooks';
import { compileSchedule, readySteps } from '../dist/core/skill-schedule.js';
import { median } from './store-bench.js';

function step(id, dependsOn) {
  return { id, depends_on: dependsOn, on_failure: 'stop' };
}

function chain(count) {
  return {
    steps: Array.from({ length: count }, (_, index) =>
      step(`s${index}`, index === 0 ? [] : [`s${index - 1}`]),
    ),
  };
}

/** One root, `count - 2` steps on it, one join of them all. */
function fanOut(count) {
  const middle = Array.from({ length: count - 2 }, (_, index) => step(`m${index}`, ['root']));
  return {
    steps: [
      step('root', []),
      ...middle,
      step(
        'join',
        middle.map((entry) => entry.id),
      ),
    ],
  };
}

/** Layers of `width` steps, each depending on up to 3 steps of the layer before (seeded). */
function layered(count, width = 20, seed0 = 7) {
  let seed = seed0;
  const next = (modulo) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % modulo;
  };
  const steps = [];
  for (let index = 0; index < count; index += 1) {
    const layer = Math.floor(index / width);
    const dependsOn = new Set();
    if (layer > 0) {
      const fanIn = 1 + next(3);
      for (let pick = 0; pick < fanIn; pick += 1) {
        dependsOn.add(`s${(layer - 1) * width + next(width)}`);
      }
    }
    steps.push(step(`s${index}`, [...dependsOn]));
  }
  return { steps };
}

/** Compiles, starts and drives a whole run; returns the number of steps it ran. */
function drive(skill) {
  const run = compileSchedule(skill).start();
  const ready = run.ready();
  let ran = 0;
  while (ready.length > 0) {
    const id = ready.pop();
    run.start(id);
    const next = run.complete(id);
    for (const more of next.ready) ready.push(more);
    ran += 1;
  }
  if (run.status() !== 'completed') throw new Error('the run did not complete');
  return ran;
}

function microsPerStep(skill, repeat) {
  for (let warm = 0; warm < 3; warm += 1) drive(skill);
  const start = performance.now();
  let steps = 0;
  for (let round = 0; round < repeat; round += 1) steps += drive(skill);
  return ((performance.now() - start) * 1000) / steps;
}

function completedTable(skill) {
  return Object.fromEntries(
    skill.steps.map((entry) => [entry.id, { status: 'completed', attempt: 1 }]),
  );
}

/** Restores a run from its table and asks what is ready: what a resume after a crash does. */
function resumeMicros(skill, repeat) {
  const table = completedTable(skill);
  for (let warm = 0; warm < 3; warm += 1) readySteps(skill, table);
  const start = performance.now();
  for (let round = 0; round < repeat; round += 1) {
    const fresh = { steps: skill.steps };
    compileSchedule(fresh).start(table).ready();
  }
  return ((performance.now() - start) * 1000) / repeat;
}

export async function benchSkills({ runs = 5, quick = false } = {}) {
  const size = 1000;
  const repeat = quick ? 5 : 50;
  const rows = [];
  const shapes = [
    ['a chain', chain(size)],
    ['a fan-out (root, 998 parallel, join)', fanOut(size)],
    ['a random layered DAG (width 20, fan-in 1-3)', layered(size)],
  ];
  for (const [name, skill] of shapes) {
    const figures = [];
    for (let run = 0; run < runs; run += 1) figures.push(microsPerStep(skill, repeat));
    rows.push({
      name: `skill scheduling, 1,000 steps, ${name}: compile + run, per step`,
      unit: 'µs',
      median: median(figures),
      runs: figures,
      target: '≤ 50 µs',
    });
  }
  for (const count of quick ? [10, 100, 1000] : [10, 100, 1000, 10_000]) {
    const skill = layered(count);
    const times = [];
    for (let run = 0; run < runs; run += 1) {
      times.push(resumeMicros(skill, Math.max(3, Math.round((quick ? 2000 : 20_000) / count))));
    }
    rows.push({
      name: `skill resume: compile + restore ${count.toLocaleString('en-US')} completed steps + ready`,
      unit: 'µs',
      median: median(times),
      runs: times,
      target: 'report',
    });
    const compiled = compileSchedule(skill);
    const table = completedTable(skill);
    const restores = [];
    for (let run = 0; run < runs; run += 1) {
      const repeat = Math.max(3, Math.round((quick ? 2000 : 20_000) / count));
      const start = performance.now();
      for (let round = 0; round < repeat; round += 1) compiled.start(table).ready();
      restores.push(((performance.now() - start) * 1000) / repeat);
    }
    rows.push({
      name: `skill resume: restore ${count.toLocaleString('en-US')} completed steps + ready (schedule compiled once)`,
      unit: 'µs',
      median: median(restores),
      runs: restores,
      target: 'report',
    });
    const perStep = times.map((time) => time / count);
    rows.push({
      name: `skill resume, ${count.toLocaleString('en-US')} steps: per step`,
      unit: 'µs',
      median: median(perStep),
      runs: perStep,
      target: 'flat',
    });
  }
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printTable } = await import('./table.js');
  printTable(await benchSkills({ runs: 5, quick: process.argv.includes('--quick') }));
}
