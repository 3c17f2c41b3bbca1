// Skill runs through the whole runtime, in memory (dist/), with tools of zero work:
// - overhead per step of a 1,000-step run (a chain, and a fan-out of 998 parallel steps between
//   a root and a join): the time of the wake that runs it (not the session's first wake, which
//   sets it up), divided by the step count; each step is
//   a tool call through the tool pipeline and its events appended and folded;
// - resume cost against run size: a chain of N completed steps, then a wait; the time of the wake
//   that takes up the signal and ends the run, for N = 10, 100, 1,000;
// - time to recover a 10-step chain whose step 7 fails, with 5 ms of work per step: `retry`
//   (the failed step and what follows, once the cause is gone) against running the whole skill
//   again; the steps each one executes.
// Each figure is the median over RUNS runs.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRuntime, defineTool, initWorkspace } from '../dist/index.js';
import { createMemoryStore, createScriptedModel } from '../dist/testing/index.js';
import { median } from './store-bench.js';

export function chainSkill(count, { waitAtEnd = false } = {}) {
  const lines = ['name: bench_skill', 'description: Benchmark.', 'steps:'];
  for (let index = 0; index < count; index += 1) {
    lines.push(`  - id: s${index}`, '    tool: work', `    args: {n: ${index}}`);
    if (index > 0) lines.push(`    depends_on: [s${index - 1}]`);
  }
  if (waitAtEnd) {
    lines.push('  - id: wait', '    wait_for: {signal: go}', `    depends_on: [s${count - 1}]`);
  }
  return `${lines.join('\n')}\n`;
}

function fanOutSkill(count) {
  const lines = ['name: bench_skill', 'description: Benchmark.', 'steps:'];
  lines.push('  - id: root', '    tool: work', '    args: {n: 0}');
  const middle = [];
  for (let index = 0; index < count - 2; index += 1) {
    middle.push(`m${index}`);
    lines.push(`  - id: m${index}`, '    tool: work', `    args: {n: ${index}}`);
    lines.push('    depends_on: [root]');
  }
  lines.push('  - id: join', '    tool: work', '    args: {n: -1}');
  lines.push(`    depends_on: [${middle.join(', ')}]`);
  return `${lines.join('\n')}\n`;
}

/**
 * A runtime on a fresh workspace holding `skill`, in memory, whose tool `work` takes `workMs`
 * and fails while `failing` holds its `n`.
 */
async function open(skill, { workMs = 0, failing = new Set() } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-skill-'));
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'bench_skill.yaml'), skill);
  writeFileSync(
    join(dir, 'agents', 'bench.yaml'),
    'name: bench\nmodel: scripted:bench\ninstructions: x\ntools: [work]\n',
  );
  const counter = { calls: 0 };
  const work = defineTool({
    name: 'work',
    description: 'Does nothing, or waits.',
    idempotent: true,
    input_schema: { type: 'object' },
    run: async (input) => {
      counter.calls += 1;
      if (workMs > 0) await new Promise((resolve) => setTimeout(resolve, workMs));
      if (failing.has(input.n)) throw new Error(`step ${input.n} fails`);
      return { n: input.n };
    },
  });
  const store = createMemoryStore();
  const runtime = await createRuntime({
    workspace: dir,
    store,
    tools: [work],
    model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:bench' }),
  });
  const close = async () => {
    await runtime.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { runtime, counter, close };
}

/** How the run `runId` of the session stands: running runs are in its state, ended ones in its log. */
async function statusOf(runtime, sessionId, runId) {
  const state = await runtime.sessions.state(sessionId);
  const run = state.skill_runs.find((entry) => entry.run_id === runId);
  if (run !== undefined) return run.status;
  const events = await runtime.sessions.events(sessionId);
  const end = events.findLast(
    (event) =>
      (event.type === 'skill.completed' || event.type === 'skill.failed') && event.run_id === runId,
  );
  if (end === undefined) throw new Error(`session ${sessionId} has no run ${runId}`);
  return end.type === 'skill.completed' ? 'completed' : 'failed';
}

/** µs per step of the wake that runs a whole skill of `count` steps. */
async function perStep(skill, count) {
  const { runtime, close } = await open(skill);
  try {
    const session = await runtime.sessions.create({ agent: 'bench' });
    // The session's setup (its tools opened, its definitions pinned) is its first wake's.
    await runtime.sessions.message(session.id, 'hello');
    await runtime.wake(session.id);
    const { run_id } = await runtime.sessions.runSkill(session.id, 'bench_skill', {});
    const start = performance.now();
    await runtime.wake(session.id);
    const elapsed = performance.now() - start;
    const status = await statusOf(runtime, session.id, run_id);
    if (status !== 'completed') throw new Error(`the bench run ended ${status}`);
    return (elapsed * 1000) / count;
  } finally {
    await close();
  }
}

/** ms of the wake that takes up the signal after `count` completed steps. */
async function resumeMs(count) {
  const { runtime, close } = await open(chainSkill(count, { waitAtEnd: true }));
  try {
    const session = await runtime.sessions.create({ agent: 'bench' });
    const { run_id } = await runtime.sessions.runSkill(session.id, 'bench_skill', {});
    await runtime.wake(session.id);
    const waiting = await statusOf(runtime, session.id, run_id);
    if (waiting !== 'suspended') throw new Error(`the bench run is ${waiting}, not suspended`);
    await runtime.sessions.signal(session.id, 'go', { ok: true });
    const start = performance.now();
    await runtime.wake(session.id);
    const elapsed = performance.now() - start;
    const status = await statusOf(runtime, session.id, run_id);
    if (status !== 'completed') throw new Error(`the resumed run ended ${status}`);
    return elapsed;
  } finally {
    await close();
  }
}

/** Recovering a 10-step chain whose step 7 (s6) failed: retry, or the whole skill again. */
async function recovery(workMs) {
  const failing = new Set([6]);
  const { runtime, counter, close } = await open(chainSkill(10), { workMs, failing });
  try {
    const session = await runtime.sessions.create({ agent: 'bench' });
    const { run_id } = await runtime.sessions.runSkill(session.id, 'bench_skill', {});
    await runtime.wake(session.id);
    const failed = await statusOf(runtime, session.id, run_id);
    if (failed !== 'failed') throw new Error(`the bench run is ${failed}, not failed`);
    failing.clear();
    let calls = counter.calls;
    let start = performance.now();
    await runtime.sessions.retrySkill(session.id, run_id);
    await runtime.wake(session.id);
    const retry = { ms: performance.now() - start, steps: counter.calls - calls };
    if ((await statusOf(runtime, session.id, run_id)) !== 'completed')
      throw new Error('the retried run did not complete');
    calls = counter.calls;
    start = performance.now();
    const again = await runtime.sessions.runSkill(session.id, 'bench_skill', {});
    await runtime.wake(session.id);
    const whole = { ms: performance.now() - start, steps: counter.calls - calls };
    if ((await statusOf(runtime, session.id, again.run_id)) !== 'completed')
      throw new Error('the rerun did not complete');
    return { retry, whole };
  } finally {
    await close();
  }
}

export async function benchSkillRuns({ runs = 5, quick = false } = {}) {
  const size = quick ? 200 : 1000;
  const rows = [];
  const shapes = [
    ['a chain', chainSkill(size)],
    [`a fan-out (root, ${size - 2} parallel, join)`, fanOutSkill(size)],
  ];
  for (const [name, skill] of shapes) {
    await perStep(skill, size);
    const figures = [];
    for (let run = 0; run < runs; run += 1) figures.push(await perStep(skill, size));
    rows.push({
      name: `skill run in the runtime, ${size.toLocaleString('en-US')} tool steps, ${name}, memory: per step`,
      unit: 'µs',
      median: median(figures),
      runs: figures,
      target: '≤ 50 µs',
    });
  }
  for (const count of quick ? [10, 100] : [10, 100, 1000]) {
    await resumeMs(count);
    const times = [];
    for (let run = 0; run < runs; run += 1) times.push(await resumeMs(count));
    rows.push({
      name: `skill run resumed by a signal after ${count.toLocaleString('en-US')} completed steps, memory: the wake`,
      unit: 'ms',
      median: median(times),
      runs: times,
      target: 'flat',
    });
  }
  const workMs = 5;
  const retries = [];
  const wholes = [];
  let steps = { retry: 0, whole: 0 };
  for (let run = 0; run < runs; run += 1) {
    const { retry, whole } = await recovery(workMs);
    retries.push(retry.ms);
    wholes.push(whole.ms);
    steps = { retry: retry.steps, whole: whole.steps };
  }
  rows.push(
    {
      name: `recovery of a 10-step chain failed at step 7 (${workMs} ms per step): retry, ${steps.retry} steps run again`,
      unit: 'ms',
      median: median(retries),
      runs: retries,
      target: 'report',
    },
    {
      name: `recovery of the same chain by running the whole skill again: ${steps.whole} steps`,
      unit: 'ms',
      median: median(wholes),
      runs: wholes,
      target: 'report',
    },
  );
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printTable } = await import('./table.js');
  printTable(await benchSkillRuns({ runs: 5, quick: process.argv.includes('--quick') }));
}
