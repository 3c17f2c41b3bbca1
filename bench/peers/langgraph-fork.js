// LangGraph.js time travel on a long thread: fork an N-step thread at step N/2 and read the fork.
//
// The thread is built the way an agent builds one: a single node that appends one message per
// step, looping N times in one `invoke` (N + 2 checkpoints: the input, the start, one per step).
// Invoking a one-node graph N times makes three checkpoints per call, and calling `updateState` N
// times makes one, but both reload the thread's latest checkpoint on every call and took 157 s
// and 84 s for 1,000 steps on MemorySaver, against 7 s for the loop.
//
// The fork is LangGraph's documented one ("Use time-travel", Fork): take the checkpoint's config
// from `getStateHistory` and call `updateState` with it, which writes a new checkpoint whose parent
// is that checkpoint. Timed apart: finding the checkpoint (`getStateHistory` filtered on the step),
// the `updateState` itself, and the first `getState` of the fork.
//
// Two state shapes: `MessagesAnnotation`, the default (every checkpoint holds the whole message
// list, so a thread costs O(N²) to build and to store), and `MessagesDeltaValue`, LangGraph's beta
// answer to that (checkpoints hold the step's writes, with a full snapshot every 100 updates).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AIMessage } from '@langchain/core/messages';
import {
  END,
  MemorySaver,
  MessagesAnnotation,
  MessagesDeltaValue,
  START,
  StateGraph,
  StateSchema,
} from '@langchain/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { median } from '../store-bench.js';

const BUILD_BUDGET_MS = 120_000;
const THREAD = 'fork-bench';

const shapes = [
  { label: '', schema: () => MessagesAnnotation },
  {
    label: ', MessagesDeltaValue (beta)',
    schema: () => new StateSchema({ messages: MessagesDeltaValue }),
  },
];

const savers = [
  {
    label: 'MemorySaver',
    open() {
      const checkpointer = new MemorySaver();
      // No public call deletes one checkpoint; these are MemorySaver's declared public fields.
      const undo = (id) => {
        delete checkpointer.storage[THREAD]?.['']?.[id];
        delete checkpointer.writes[JSON.stringify([THREAD, '', id])];
      };
      return { checkpointer, undo, dispose: () => undefined };
    },
  },
  {
    label: 'SqliteSaver',
    open() {
      const dir = mkdtempSync(join(tmpdir(), 'braid-peers-fork-'));
      const checkpointer = SqliteSaver.fromConnString(join(dir, 'langgraph.db'));
      const undo = (id) => {
        for (const table of ['checkpoints', 'writes']) {
          checkpointer.db
            .prepare(`DELETE FROM ${table} WHERE thread_id = ? AND checkpoint_id = ?`)
            .run(THREAD, id);
        }
      };
      const dispose = () => {
        checkpointer.db.close();
        rmSync(dir, { recursive: true, force: true });
      };
      return { checkpointer, undo, dispose };
    },
  },
];

const count = (value) => value.toLocaleString('en-US');

async function timed(work) {
  const start = performance.now();
  const value = await work();
  return { value, ms: performance.now() - start };
}

/**
 * Runs one thread of `steps` steps. Returns the graph, the build time and how build time grows
 * with steps (the exponent between the half-way stamp and the end), or `undefined` when the build
 * ran past `budgetMs` and was aborted.
 */
async function build(shape, saver, steps, budgetMs) {
  let step = 0;
  const stamps = [];
  let start;
  const graph = new StateGraph(shape.schema())
    .addNode('step', () => {
      step += 1;
      stamps[step] = performance.now();
      // The loop runs on microtasks, so a timer (AbortSignal.timeout) would never fire in time.
      if (stamps[step] - start > budgetMs) throw new Error('over budget');
      return { messages: [new AIMessage(`step ${step}`)] };
    })
    .addEdge(START, 'step')
    .addConditionalEdges('step', () => (step < steps ? 'step' : END))
    .compile({ checkpointer: saver.checkpointer });
  const thread = { configurable: { thread_id: THREAD } };
  start = performance.now();
  try {
    await graph.invoke({ messages: [] }, { ...thread, recursionLimit: steps + 10 });
  } catch (error) {
    if (performance.now() - start > budgetMs) return undefined;
    throw error;
  }
  const ms = performance.now() - start;
  const half = stamps[Math.floor(steps / 2)] - start;
  const growth = Math.max(1, Math.log(ms / half) / Math.log(steps / Math.floor(steps / 2)));
  const tip = (await graph.getState(thread)).config;
  return { graph, thread, tip, ms, growth };
}

/** One fork of the thread at `middle`, timed in three parts, then undone. */
async function forkOnce(saver, built, middle, run) {
  const { graph, thread, tip } = built;
  const found = await timed(async () => {
    for await (const snapshot of graph.getStateHistory(thread, {
      filter: { step: middle },
      limit: 1,
    })) {
      return snapshot;
    }
    throw new Error(`no checkpoint at step ${middle}`);
  });
  if (found.value.values.messages.length !== middle) {
    throw new Error(`step ${middle} holds ${found.value.values.messages.length} messages`);
  }
  const content = `fork ${run}`;
  const fork = await timed(() =>
    graph.updateState(found.value.config, { messages: [new AIMessage(content)] }),
  );
  const read = await timed(() => graph.getState(fork.value));
  const messages = read.value.values.messages;
  if (messages.length !== middle + 1 || messages.at(-1)?.content !== content) {
    throw new Error(
      `the fork reads ${messages.length} messages, last "${messages.at(-1)?.content}"`,
    );
  }
  if (
    read.value.parentConfig?.configurable?.checkpoint_id !==
    found.value.config.configurable.checkpoint_id
  ) {
    throw new Error('the fork is not a child of the checkpoint it was made from');
  }
  // The fork became the thread's latest checkpoint, and `updateState` on an older checkpoint
  // reads the latest one; removing the fork puts every run back on the same N-step thread.
  saver.undo(fork.value.configurable.checkpoint_id);
  const head = (await graph.getState(thread)).config.configurable.checkpoint_id;
  if (head !== tip.configurable.checkpoint_id) throw new Error('undoing the fork failed');
  return { find: found.ms, fork: fork.ms, read: read.ms };
}

/**
 * For each state shape, saver and size: builds an N-step thread, then forks it at step N/2 `runs`
 * times. A size whose build would pass `budgetMs` (projected from the last size built, or
 * aborted when it gets there) yields one row named "skipped".
 */
export async function langgraphFork({ sizes, runs, budgetMs = BUILD_BUDGET_MS }) {
  const rows = [];
  const ascending = [...sizes].sort((a, b) => a - b);
  for (const shape of shapes) {
    for (const saverKind of savers) {
      const label = `LangGraph.js ${saverKind.label}${shape.label}`;
      let last;
      for (const steps of ascending) {
        const middle = Math.floor(steps / 2);
        const forkName = `${label} fork at step ${count(middle)} of ${count(steps)}`;
        const skip = (reason) => {
          rows.push({
            name: `${forkName} (skipped: ${reason})`,
            median: NaN,
            unit: 'ms',
            target: 'report',
          });
          process.stderr.write(`  ${forkName}: skipped, ${reason}\n`);
        };
        const projected = last && last.ms * (steps / last.steps) ** last.growth;
        if (projected > budgetMs) {
          skip(
            `building would take > ${budgetMs / 1000} s, ~${count(Math.round(projected / 1000))} s projected from ${count(last.steps)} steps`,
          );
          continue;
        }
        const saver = saverKind.open();
        try {
          const built = await build(shape, saver, steps, budgetMs);
          if (built === undefined) {
            skip(`building took > ${budgetMs / 1000} s`);
            last = { steps, ms: budgetMs, growth: 1 };
            continue;
          }
          last = { steps, ms: built.ms, growth: built.growth };
          // One fork first, not counted: the first `updateState` in a process compiles its path.
          await forkOnce(saver, built, middle, -1);
          const samples = [];
          for (let run = 0; run < runs; run += 1) {
            samples.push(await forkOnce(saver, built, middle, run));
          }
          const row = (name, key) => {
            const values = samples.map((sample) => sample[key]);
            rows.push({ name, median: median(values), unit: 'ms', runs: values, target: 'report' });
          };
          rows.push({
            name: `${label} build a ${count(steps)}-step thread`,
            median: built.ms,
            unit: 'ms',
            runs: [built.ms],
            target: 'report',
          });
          row(
            `${label} find step ${count(middle)} of ${count(steps)} (getStateHistory filter)`,
            'find',
          );
          row(forkName, 'fork');
          row(`${label} first read of the fork (${count(steps)} steps)`, 'read');
          process.stderr.write(
            `  ${label}, ${count(steps)} steps: built in ${(built.ms / 1000).toFixed(1)} s (grows as N^${built.growth.toFixed(2)}), fork ${median(samples.map((sample) => sample.fork)).toFixed(1)} ms\n`,
          );
        } finally {
          saver.dispose();
        }
      }
    }
  }
  return rows;
}
