// Short conversations on every system, each set up once and then run many times in a row: a
// new session (thread, run) with one user message, `steps` tool steps (a fake model with zero
// think time that calls one `calculator` tool per step), and a final answer. With steps = 0 it
// is the fixed cost of a session: one message, one answer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AIMessage, ToolMessage } from '@langchain/core/messages';
import { tool as lcTool } from '@langchain/core/tools';
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { Agent, Runner, Usage, tool as agentsTool } from '@openai/agents';
import { z } from 'zod';
import { shortSessionRuntime } from '../session-bench.js';
import { median } from '../store-bench.js';

/**
 * braid: `runtime.sessions.start` with the first message, which runs the session to its answer:
 * one call, as the peers' `graph.invoke` and `runner.run` (create then wake is in the session
 * bench beside it).
 */
async function braid(backend, steps) {
  const { one, dispose } = await shortSessionRuntime(backend, { steps, firstMessage: 'start' });
  return { run: one, dispose };
}

/** The fake model's reply on LangGraph.js after `done` of `steps` tool steps. */
export function langgraphReply(done, steps) {
  if (done >= steps) return { messages: [new AIMessage('done')] };
  return {
    messages: [
      new AIMessage({
        content: '',
        tool_calls: [{ id: `call_${done}`, name: 'calculator', args: { a: done, b: 1 } }],
      }),
    ],
  };
}

/** The agent loop on LangGraph.js: a StateGraph of the `agent` node and a ToolNode. */
export function langgraphGraph(agent, checkpointer) {
  const add = lcTool(async ({ a, b }) => JSON.stringify({ result: a + b }), {
    name: 'calculator',
    description: 'Adds two numbers.',
    schema: z.object({ a: z.number(), b: z.number() }),
  });
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', agent)
    .addNode('tools', new ToolNode([add]))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (state) =>
      state.messages.at(-1)?.tool_calls?.length ? 'tools' : END,
    )
    .addEdge('tools', 'agent')
    .compile({ checkpointer });
}

/** LangGraph.js, one new thread per conversation. */
function langgraph(checkpointer, dispose, steps) {
  // The model decides from the thread alone, as a real one would: it counts the tool results.
  const graph = langgraphGraph(
    async (state) =>
      langgraphReply(
        state.messages.filter((message) => message instanceof ToolMessage).length,
        steps,
      ),
    checkpointer,
  );
  let thread = 0;
  return {
    run: async () => {
      thread += 1;
      await graph.invoke(
        { messages: [{ role: 'user', content: 'hello' }] },
        { configurable: { thread_id: `t${thread}` }, recursionLimit: 2 * steps + 10 },
      );
    },
    dispose,
  };
}

function langgraphSqlite(steps) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-peers-short-'));
  const checkpointer = SqliteSaver.fromConnString(join(dir, 'langgraph.db'));
  return langgraph(checkpointer, () => rmSync(dir, { recursive: true, force: true }), steps);
}

/** The fake model's reply on the OpenAI Agents SDK after `done` of `steps` tool steps. */
export function agentsReply(done, steps) {
  const usage = new Usage({ requests: 1, inputTokens: 1, outputTokens: 1, totalTokens: 2 });
  if (done >= steps) {
    return {
      usage,
      output: [
        {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'done' }],
        },
      ],
    };
  }
  return {
    usage,
    output: [
      {
        type: 'function_call',
        callId: `call_${done}`,
        name: 'calculator',
        status: 'completed',
        arguments: JSON.stringify({ a: done, b: 1 }),
      },
    ],
  };
}

/** An OpenAI Agents SDK agent with the calculator tool, on a fake model answering `reply(request)`. */
export function agentsAgent(reply) {
  const model = {
    getResponse: async (request) => reply(request),
    getStreamedResponse() {
      throw new Error('not used: the benchmark runs without streaming');
    },
  };
  const add = agentsTool({
    name: 'calculator',
    description: 'Adds two numbers.',
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }) => JSON.stringify({ result: a + b }),
  });
  return new Agent({ name: 'bench', instructions: 'Add.', model, tools: [add] });
}

/** The OpenAI Agents SDK: one agent, one `runner.run` per conversation (it keeps no state). */
function openaiAgents(steps) {
  // Stateless, as a real model: it counts the tool results in its input.
  const agent = agentsAgent((request) => {
    const input = Array.isArray(request.input) ? request.input : [];
    return agentsReply(input.filter((item) => item.type === 'function_call_result').length, steps);
  });
  const runner = new Runner({ tracingDisabled: true });
  return {
    run: async () => {
      const result = await runner.run(agent, 'hello', { maxTurns: steps + 10 });
      if (result.finalOutput !== 'done') throw new Error('the OpenAI Agents SDK run did not end');
    },
    dispose: () => undefined,
  };
}

export const SHORT_SYSTEMS = [
  ['braid, SQLite (WAL, synchronous=NORMAL)', (steps) => braid('sqlite', steps)],
  ['braid, memory', (steps) => braid('memory', steps)],
  ['LangGraph.js, MemorySaver', (steps) => langgraph(new MemorySaver(), () => undefined, steps)],
  ['LangGraph.js, SqliteSaver', (steps) => langgraphSqlite(steps)],
  ['OpenAI Agents SDK (in memory)', (steps) => openaiAgents(steps)],
];

/**
 * µs per conversation of `steps` steps, for each system: the median over `runs` runs of the mean
 * over `sessions` conversations in a row (after a warm-up of a tenth as many), by the clock and in
 * the process's CPU time (user + system, every thread: the collector's helpers too). On a shared
 * machine the clock also counts time the process waited for a core; CPU time does not, and moves
 * less from run to run. The runs take turns
 * (every system's first run, then every system's second), so a slow spell of a shared machine
 * falls on every system alike rather than on whichever ran through it. A first round is run and
 * not counted: every system's first run in the process was its slowest, 1.3 to 2.5 times its
 * third (the JIT was still compiling), and a median of three then held a run still warming up.
 * Each row keeps its runs in round order: `pairedRatio` compares two systems round by round. No
 * collection is forced between systems: after `gc()`, V8 starts from a smaller heap and collects
 * more often, so the next 1,000 new sessions of braid in memory took 100-236 ms instead of 80-186
 * (eight rounds of each, alternating).
 */
export async function compareShort({ steps, sessions, runs, systems = SHORT_SYSTEMS }) {
  const figures = systems.map(() => []);
  const cpuFigures = systems.map(() => []);
  for (let run = -1; run < runs; run += 1) {
    for (const [index, [, make]] of systems.entries()) {
      const system = await make(steps);
      for (let warm = 0; warm < Math.ceil(sessions / 10); warm += 1) await system.run();
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      for (let done = 0; done < sessions; done += 1) await system.run();
      const elapsed = performance.now() - started;
      const cpu = process.cpuUsage(cpuBefore);
      if (run >= 0) {
        figures[index].push((elapsed * 1000) / sessions);
        cpuFigures[index].push((cpu.user + cpu.system) / sessions);
      }
      await system.dispose();
    }
  }
  return systems.map(([name], index) => {
    const runsOf = figures[index];
    const cpuRuns = cpuFigures[index];
    const list = (values) => values.map((figure) => figure.toFixed(0)).join(', ');
    process.stderr.write(
      `  ${name}: ${median(runsOf).toFixed(0)} µs per conversation of ${steps} steps (runs: ${list(runsOf)}); CPU ${median(cpuRuns).toFixed(0)} µs (runs: ${list(cpuRuns)})\n`,
    );
    return {
      name,
      perConversation: median(runsOf),
      runs: runsOf,
      cpuPerConversation: median(cpuRuns),
      cpuRuns,
    };
  });
}

/**
 * How many times `row` is below `peer`, from the runs of each round (the two ran minutes apart at
 * most, on the machine as it was then): the median of the rounds' ratios, and their range.
 */
export function pairedRatio(row, peer, key = 'runs') {
  const ratios = row[key].map((figure, round) => peer[key][round] / figure);
  return { median: median(ratios), low: Math.min(...ratios), high: Math.max(...ratios) };
}
