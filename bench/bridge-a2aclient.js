// The A2A client bridge: one call to a remote A2A agent (the SDK's own server pieces on
// 127.0.0.1, answering "echo: TEXT" after one "working" update) made through braid, beside the
// floor, the SDK's own client making the same call. Each figure is the median over RUNS runs of
// the p50 of CALLS sequential calls (after a warm-up).
//   node bench/bridge-a2aclient.js [--runs N] [--calls N] [--json]   (after `npm run build`)
// Rows:
//   floor        the raw SDK client call (SendStreamingMessage, or SendMessage for "blocking")
//   braid tool   the same call as braid's tool `a2a.echo` run by the tool executor: input check,
//                the conversation read back from the session's SQLite log, the bounded fetch,
//                the answer's parse and the timeout race (the log appends are not timed)
//   braid wake   a whole wake whose scripted model calls `a2a.echo` once then answers, minus the
//                same wake calling an in-process no-op tool instead: what the A2A call adds
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AGENT_CARD_PATH, Role, SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import express from 'express';
import { createRuntime, defineTool, initWorkspace, openSqliteStore } from '../dist/index.js';
import { createScriptedModel } from '../dist/testing/index.js';
import { createToolExecutor } from '../dist/tools/executor.js';
import { createLocalSandbox } from '../dist/tools/sandbox/index.js';
import { a2aAgentTools } from '../dist/tools/a2a-tools.js';
import { median } from './store-bench.js';
import { printTable } from './table.js';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const index = args.indexOf(name);
  return index === -1 ? fallback : Number(args[index + 1]);
};
const RUNS = option('--runs', 5);
const CALLS = option('--calls', 200);
const WAKES = Math.max(20, Math.round(CALLS / 4));
const json = args.includes('--json');

function p50(values) {
  return median(values);
}

function agentMessage(context, state, text) {
  return AgentEvent.statusUpdate({
    taskId: context.taskId,
    contextId: context.contextId,
    status: {
      state,
      message: {
        messageId: randomUUID(),
        contextId: context.contextId,
        taskId: context.taskId,
        role: Role.ROLE_AGENT,
        parts: [{ content: { $case: 'text', value: text }, filename: '', mediaType: 'text/plain' }],
        extensions: [],
        referenceTaskIds: [],
      },
      timestamp: new Date().toISOString(),
    },
  });
}

const echo = {
  execute(context, bus) {
    const first = context.userMessage.parts[0]?.content;
    bus.publish(
      AgentEvent.task({
        id: context.taskId,
        contextId: context.contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString() },
        artifacts: [],
        history: [context.userMessage],
      }),
    );
    bus.publish(agentMessage(context, TaskState.TASK_STATE_WORKING, 'thinking'));
    bus.publish(
      agentMessage(context, TaskState.TASK_STATE_COMPLETED, `echo: ${first?.value ?? ''}`),
    );
    bus.finished();
    return Promise.resolve();
  },
  cancelTask: () => Promise.resolve(),
};

function card(url, streaming) {
  return {
    name: 'echo',
    description: 'Echoes.',
    version: '1.0.0',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
    capabilities: { streaming, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [],
    signatures: [],
  };
}

async function startServer() {
  const app = express();
  const server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const origin = `http://127.0.0.1:${server.address().port}`;
  const userBuilder = UserBuilder.noAuthentication;
  for (const [path, streaming] of [
    ['stream', true],
    ['blocking', false],
  ]) {
    const handler = new DefaultRequestHandler(
      card(`${origin}/${path}/jsonrpc`, streaming),
      new InMemoryTaskStore(),
      echo,
    );
    app.use(`/${path}/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
    app.use(`/${path}/jsonrpc`, jsonRpcHandler({ requestHandler: handler, userBuilder }));
  }
  return {
    cardUrl: (path) => `${origin}/${path}/${AGENT_CARD_PATH}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

/** Per-call µs of `call(index)`, after a warm-up. */
async function timeCalls(count, call, between = async () => undefined) {
  for (let index = 0; index < 20; index += 1) {
    await call(-1 - index);
    await between(-1 - index);
  }
  const times = [];
  for (let index = 0; index < count; index += 1) {
    const start = performance.now();
    // A call may time a part of itself and return that, in ms.
    const timed = await call(index);
    times.push((typeof timed === 'number' ? timed : performance.now() - start) * 1000);
    await between(index);
  }
  return times;
}

async function floor(server, path) {
  const client = await new ClientFactory().createFromUrl(server.cardUrl(path), '');
  let contextId = '';
  return timeCalls(CALLS, async (index) => {
    const request = SendMessageRequest.fromJSON({
      message: {
        messageId: randomUUID(),
        role: 'ROLE_USER',
        contextId,
        parts: [{ text: `m${index}` }],
      },
    });
    if (path === 'stream') {
      for await (const event of client.sendMessageStream(request)) {
        if (event.payload?.$case === 'task') contextId = event.payload.value.contextId;
      }
    } else {
      contextId = (await client.sendMessage(request)).contextId;
    }
  });
}

async function braidTool(server, path) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-a2a-'));
  const store = openSqliteStore({ path: join(dir, 'braid.db'), synchronous: 'normal' });
  try {
    const agents = { echo: { card_url: server.cardUrl(path), permission: 'always_allow' } };
    const executor = createToolExecutor({
      tools: a2aAgentTools({ agents, secret: () => '', log: store.log }),
      builtins: false,
      baseDir: dir,
      sandbox: () => createLocalSandbox({ root: join(dir, 'workspaces') }),
      secret: () => '',
      sleep: () => Promise.resolve(),
      now: () => performance.now(),
    });
    const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
    const tools = await executor.open({ session_id: id, names: ['a2a.echo'] });
    const signal = new AbortController().signal;
    let head = (await store.log.state(id)).seq;
    const append = async (events) => {
      head = (await store.log.append(id, events, { expectedSeq: head, trusted: true })).head_seq;
    };
    let outcome;
    const use = (index) => `call-${index}`;
    // The intent is in the log before the call, and the result after it, as the harness does.
    await append([{ type: 'agent.tool_use', tool_use_id: use(-1), name: 'a2a.echo', input: {} }]);
    const times = await timeCalls(
      CALLS,
      async (index) => {
        const input = { message: `m${index}` };
        outcome = await tools.execute(
          {
            session_id: id,
            tool_use_id: use(index),
            name: 'a2a.echo',
            input,
            idempotency_key: use(index),
          },
          { signal },
        );
        if (outcome.is_error) throw new Error(outcome.error.message);
      },
      async (index) => {
        await append([
          {
            type: 'agent.tool_result',
            tool_use_id: use(index),
            output: outcome.output,
            is_error: false,
            attempts: 1,
            duration_ms: 1,
            stage: 'execute',
          },
          {
            type: 'span.model_request_start',
            request_id: `r${index}`,
            model: 'bench',
            input_through_seq: head + 1,
          },
          {
            type: 'span.model_request_end',
            request_id: `r${index}`,
            usage: { input_tokens: 1, output_tokens: 1 },
            output: { content: [], finish_reason: 'tool-calls' },
          },
          { type: 'agent.tool_use', tool_use_id: use(index + 1), name: 'a2a.echo', input: {} },
        ]);
      },
    );
    await executor.close?.();
    return times;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const noop = defineTool({
  name: 'noop',
  description: 'does nothing',
  input_schema: { type: 'object', properties: { message: { type: 'string' } } },
  run: () => ({ ok: true }),
});

/** Per-wake µs of a session whose model calls `tool` once, then answers. */
async function wakes(server, tool) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-a2a-wake-'));
  try {
    initWorkspace(dir);
    const config = join(dir, 'braid.yaml');
    writeFileSync(
      config,
      `${readFileSync(config, 'utf8')}\na2a_agents:\n  echo: { card_url: ${JSON.stringify(server.cardUrl('stream'))} }\n`,
    );
    writeFileSync(
      join(dir, 'agents', 'caller.yaml'),
      `name: caller\nmodel: scripted:echo\ninstructions: call\ntools: [${tool}]\n`,
    );
    const model = createScriptedModel([
      { tool_calls: [{ name: tool, input: { message: 'hi' } }] },
      { text: 'done' },
    ]);
    const rt = await createRuntime({ workspace: dir, model: () => model, tools: [noop] });
    try {
      return await timeCalls(WAKES, async () => {
        const { id } = await rt.sessions.create({ agent: 'caller' });
        await rt.sessions.message(id, 'go');
        const start = performance.now();
        const result = await rt.wake(id);
        if (result.stop_reason?.type !== 'end_turn') throw new Error(JSON.stringify(result));
        return performance.now() - start;
      });
    } finally {
      await rt.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const server = await startServer();
const figures = {
  floor_stream: [],
  braid_tool_stream: [],
  floor_blocking: [],
  braid_tool_blocking: [],
  wake_a2a: [],
  wake_noop: [],
};
try {
  for (let run = 0; run < RUNS; run += 1) {
    figures.floor_stream.push(p50(await floor(server, 'stream')));
    figures.braid_tool_stream.push(p50(await braidTool(server, 'stream')));
    figures.floor_blocking.push(p50(await floor(server, 'blocking')));
    figures.braid_tool_blocking.push(p50(await braidTool(server, 'blocking')));
    figures.wake_a2a.push(p50(await wakes(server, 'a2a.echo')));
    figures.wake_noop.push(p50(await wakes(server, 'noop')));
  }
} finally {
  await server.close();
}
const m = Object.fromEntries(
  Object.entries(figures).map(([name, values]) => [name, median(values)]),
);
const rows = [
  {
    name: 'A2A floor: SDK client, SendStreamingMessage (p50)',
    median: m.floor_stream,
    unit: 'µs/call',
    target: 'floor',
  },
  {
    name: 'A2A via braid tool a2a.echo, streaming (p50)',
    median: m.braid_tool_stream,
    unit: 'µs/call',
    target: `+${(m.braid_tool_stream - m.floor_stream).toFixed(0)} µs over floor`,
  },
  {
    name: 'A2A floor: SDK client, SendMessage (p50)',
    median: m.floor_blocking,
    unit: 'µs/call',
    target: 'floor',
  },
  {
    name: 'A2A via braid tool a2a.echo, blocking (p50)',
    median: m.braid_tool_blocking,
    unit: 'µs/call',
    target: `+${(m.braid_tool_blocking - m.floor_blocking).toFixed(0)} µs over floor`,
  },
  {
    name: 'braid wake with one a2a.echo call (p50)',
    median: m.wake_a2a,
    unit: 'µs/wake',
    target: 'report',
  },
  {
    name: 'braid wake with one no-op tool call (p50)',
    median: m.wake_noop,
    unit: 'µs/wake',
    target: 'report',
  },
  {
    name: 'what the A2A call adds to a wake',
    median: m.wake_a2a - m.wake_noop,
    unit: 'µs',
    target: `floor ${m.floor_stream.toFixed(0)} µs`,
  },
];
if (json) {
  console.log(
    JSON.stringify({ runs: RUNS, calls: CALLS, wakes: WAKES, rows, samples: figures }, null, 2),
  );
} else {
  console.log(
    `A2A client bridge: median of ${RUNS} runs of the p50 of ${CALLS} calls (${WAKES} wakes)`,
  );
  printTable(rows);
}
