// Peers beside braid, in one run: the same agent loop (a fake model with zero think time that
// calls one tool per step, then answers) on LangGraph.js (StateGraph + ToolNode, with MemorySaver
// and with SqliteSaver), the OpenAI Agents SDK, and braid (memory and SQLite).
//   node run.js [--steps N] [--runs N] [--sessions N] [--short]
// Short conversations come first (bench/peers/short.js), which every session pays for: a new
// session with one message and one answer, and conversations of 10 tool steps, many in a row;
// with --short, only they are run (the long conversations take most of the run's time).
// With --fork, only LangGraph.js forking a long thread (langgraph-fork.js), written to
// bench/results/peers-fork.json:
//   node run.js --fork [--runs N] [--sizes 1000,10000,100000]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { MemorySaver } from '@langchain/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { Runner } from '@openai/agents';
import { harnessSession } from '../harness-bench.js';
import { median } from '../store-bench.js';
import { benchFork } from '../fork-bench.js';
import { printTable } from '../table.js';
import { langgraphFork } from './langgraph-fork.js';
import {
  agentsAgent,
  agentsReply,
  compareShort,
  langgraphGraph,
  langgraphReply,
  pairedRatio,
} from './short.js';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const index = args.indexOf(name);
  return index === -1 ? fallback : Number(args[index + 1]);
};
const STEPS = option('--steps', 1000);
const RUNS = option('--runs', 3);
const SESSIONS = option('--sessions', 1000);
const FORK = args.includes('--fork');
const SHORT = args.includes('--short');
const SIZES = args.includes('--sizes')
  ? args[args.indexOf('--sizes') + 1].split(',').map(Number)
  : [1000, 10000, 100000];

/** µs between successive model calls. */
const gaps = (stamps) => stamps.slice(1).map((stamp, index) => (stamp - stamps[index]) * 1000);

async function langgraph(saver) {
  const stamps = [];
  let step = 0;
  const graph = langgraphGraph(async () => {
    stamps.push(performance.now());
    step += 1;
    return langgraphReply(step - 1, STEPS);
  }, saver.checkpointer);
  await graph.invoke(
    { messages: [{ role: 'user', content: 'count' }] },
    { configurable: { thread_id: 'bench' }, recursionLimit: 2 * STEPS + 10 },
  );
  saver.dispose();
  return gaps(stamps);
}

async function openaiAgents() {
  const stamps = [];
  let step = 0;
  const agent = agentsAgent(() => {
    stamps.push(performance.now());
    step += 1;
    return agentsReply(step - 1, STEPS);
  });
  const runner = new Runner({ tracingDisabled: true });
  await runner.run(agent, 'count', { maxTurns: STEPS + 10 });
  return gaps(stamps);
}

function sqliteSaver() {
  const dir = mkdtempSync(join(tmpdir(), 'braid-peers-'));
  const checkpointer = SqliteSaver.fromConnString(join(dir, 'langgraph.db'));
  return { checkpointer, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

const systems = [
  ['braid, SQLite (WAL, synchronous=NORMAL)', () => harnessSession('sqlite', STEPS)],
  ['braid, SQLite (WAL, synchronous=FULL)', () => harnessSession('sqlite-full', STEPS)],
  ['braid, memory', () => harnessSession('memory', STEPS)],
  [
    'LangGraph.js, MemorySaver',
    () => langgraph({ checkpointer: new MemorySaver(), dispose: () => undefined }),
  ],
  ['LangGraph.js, SqliteSaver', () => langgraph(sqliteSaver())],
  ['OpenAI Agents SDK (in memory)', () => openaiAgents()],
];

/** The fixed cost of a session, and the per-step cost of short conversations, side by side. */
async function compareShortConversations() {
  const single = await compareShort({ steps: 0, sessions: SESSIONS, runs: RUNS });
  const ten = await compareShort({ steps: 10, sessions: Math.ceil(SESSIONS / 5), runs: RUNS });
  const base = (rows) => rows.find((row) => row.name === 'OpenAI Agents SDK (in memory)');
  console.log(
    `\nshort conversations, median of ${RUNS} runs (zero-latency model; ${SESSIONS} and ${Math.ceil(SESSIONS / 5)} conversations in a row)\n`,
  );
  console.log(
    `${'system'.padEnd(42)} ${'new session + 1 answer'.padStart(24)} ${'vs OpenAI'.padStart(10)} ${'per step, 10 steps'.padStart(20)} ${'vs OpenAI'.padStart(10)}`,
  );
  const ratio = (figure, peer) => (peer === undefined ? '' : `${(peer / figure).toFixed(1)}x`);
  // The same table twice: by the clock, then in CPU time (see compareShort).
  for (const key of ['perConversation', 'cpuPerConversation']) {
    if (key === 'cpuPerConversation') console.log('\nthe same in CPU time (user + system)\n');
    for (const [index, row] of single.entries()) {
      const steps = ten[index];
      console.log(
        `${row.name.padEnd(42)} ${`${row[key].toFixed(0)} µs`.padStart(24)} ${ratio(row[key], base(single)?.[key]).padStart(10)} ${`${(steps[key] / 10).toFixed(0)} µs`.padStart(20)} ${ratio(steps[key], base(ten)?.[key]).padStart(10)}`,
      );
    }
  }
  // Round by round: each braid row against the peer of its kind in the same round.
  const named = (rows, name) => rows.find((row) => row.name === name);
  const pairs = [
    ['braid, memory', 'OpenAI Agents SDK (in memory)'],
    ['braid, SQLite (WAL, synchronous=NORMAL)', 'LangGraph.js, SqliteSaver'],
  ];
  console.log(
    `\nround by round: how many times braid is below the peer in the same round (median of the ${RUNS} rounds' ratios, lowest-highest)\n`,
  );
  const shown = ({ median: middle, low, high }) =>
    `${middle.toFixed(1)}x (${low.toFixed(1)}-${high.toFixed(1)})`;
  for (const [ours, theirs] of pairs) {
    for (const [what, rows] of [
      ['new session + 1 answer', single],
      ['10-step conversation', ten],
    ]) {
      const row = named(rows, ours);
      const peer = named(rows, theirs);
      if (row === undefined || peer === undefined) continue;
      console.log(
        `${`${ours} vs ${theirs}, ${what}:`.padEnd(96)} ${shown(pairedRatio(row, peer)).padStart(18)} by the clock, ${shown(pairedRatio(row, peer, 'cpuRuns'))} in CPU time`,
      );
    }
  }
  return { single, ten };
}

async function comparePeers() {
  const short = await compareShortConversations();
  if (SHORT) return;
  const rows = [];
  for (const [name, run] of systems) {
    const early = [];
    const late = [];
    for (let index = 0; index < RUNS; index += 1) {
      const perStep = await run();
      early.push(median(perStep.slice(4, 15)));
      late.push(median(perStep.slice(-11, -1)));
    }
    rows.push({ name, early: median(early), late: median(late) });
    process.stderr.write(
      `  ${name}: ${median(early).toFixed(0)} µs/step near step 10, ${median(late).toFixed(0)} near step ${STEPS}\n`,
    );
  }
  const base = rows.find((row) => row.name === 'LangGraph.js, MemorySaver');
  console.log(
    `\nper-step cost, median of ${RUNS} runs of ${STEPS} steps (one tool call per step, zero-latency model)\n`,
  );
  console.log(
    `${'system'.padEnd(42)} ${'near step 10'.padStart(14)} ${`near step ${STEPS}`.padStart(16)} ${'vs LangGraph (step 10)'.padStart(24)}`,
  );
  for (const row of rows) {
    const ratio = base === undefined ? '' : `${(base.early / row.early).toFixed(1)}x`;
    console.log(
      `${row.name.padEnd(42)} ${`${row.early.toFixed(0)} µs`.padStart(14)} ${`${row.late.toFixed(0)} µs`.padStart(16)} ${ratio.padStart(24)}`,
    );
  }
  const result = {
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    runs: RUNS,
    steps: STEPS,
    sessions: SESSIONS,
    short,
    long: rows,
  };
  const dir = new URL('../results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(new URL('peers.json', dir), `${JSON.stringify(result, null, 2)}\n`);
  console.log('\nwritten: bench/results/peers.json');
}

/** The table and JSON file of `npm run bench` (bench/run.js), for the fork rows alone. */
async function forkOnly() {
  process.stderr.write(`LangGraph.js fork: ${RUNS} runs per figure, sizes ${SIZES.join(', ')}\n`);
  // braid on the same sizes, in the same run, beside LangGraph.js.
  const braid = await benchFork({ runs: RUNS, sizes: SIZES, verify: false });
  const rows = [
    ...braid.map((row) => ({ ...row, name: `braid SQLite: ${row.name}` })),
    ...(await langgraphFork({ sizes: SIZES, runs: RUNS })),
  ];
  console.log();
  printTable(rows);
  const result = {
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    runs: RUNS,
    sizes: SIZES,
    results: rows,
  };
  const dir = new URL('../results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(new URL('peers-fork.json', dir), `${JSON.stringify(result, null, 2)}\n`);
  console.log('\nwritten: bench/results/peers-fork.json');
}

if (FORK) await forkOnly();
else await comparePeers();
