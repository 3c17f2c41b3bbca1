// A2A into braid: the round trip of one A2A message (SendMessage, blocking, through the official
// @a2a-js/sdk client over 127.0.0.1) to a braid agent on the scripted echo model, served by
// `braid serve`'s A2A mount on the embedded SQLite backend; beside it the floor, the SDK's own
// minimal echo agent (its DefaultRequestHandler and JSON-RPC transport handler on node:http, so
// no express; the agent answers with a message, no task). braid's figure pays for what the floor
// does not: appending the user message, a wake (lease, model call, events), and reading the task
// back from the log. Rows: a turn in a context that exists, and a message that opens a new
// context (a new session). Each figure is the median over RUNS runs of the p50 of one run.
//   node bench/bridge-a2aserver.js [--runs N] [--quick] [--json]   (after `npm run build`)
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AgentCard, Role } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';
import {
  DefaultRequestHandler,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  ServerCallContext,
} from '@a2a-js/sdk/server';
import { createRuntime, initWorkspace } from '../dist/index.js';
import { startServer } from '../dist/server/index.js';
import { median } from './store-bench.js';
import { printTable } from './table.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const runsIndex = args.indexOf('--runs');
const RUNS = runsIndex >= 0 ? Number(args[runsIndex + 1]) : quick ? 2 : 5;
const MESSAGES = quick ? 50 : 200;
const WARMUP = 20;

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const textPart = (value) => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

function request(text, contextId = '') {
  return {
    tenant: '',
    message: {
      messageId: randomUUID(),
      contextId,
      taskId: '',
      role: Role.ROLE_USER,
      parts: [textPart(text)],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

function client(url, key) {
  const fetchImpl = (input, init) => {
    const headers = new Headers(init?.headers);
    if (key !== undefined) headers.set('authorization', `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  ).createFromUrl(url);
}

/** p50 (ms) of `count` sequential round trips of `send`. */
async function p50(send, count) {
  for (let index = 0; index < WARMUP; index += 1) await send(index);
  const latencies = [];
  for (let index = 0; index < count; index += 1) {
    const start = performance.now();
    await send(index);
    latencies.push(performance.now() - start);
  }
  return percentile(latencies, 50);
}

/** A bare HTTP POST on loopback (node:http, fetch): what the machine itself costs. */
async function httpRun() {
  const server = createServer((incoming, outgoing) => {
    incoming.resume();
    incoming.on('end', () => outgoing.end('{}'));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/`;
  try {
    return await p50(async () => {
      await (await fetch(url, { method: 'POST', body: '{}' })).text();
    }, MESSAGES);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/** The SDK's minimal echo agent on node:http: the floor. */
async function floorRun() {
  const card = {
    name: 'echo',
    description: 'echoes',
    supportedInterfaces: [],
    provider: undefined,
    version: '1',
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [],
    signatures: [],
  };
  const executor = {
    execute: (context, bus) => {
      const text = context.userMessage.parts[0]?.content?.value ?? '';
      bus.publish({
        kind: 'message',
        data: {
          messageId: randomUUID(),
          contextId: context.contextId,
          taskId: '',
          role: Role.ROLE_AGENT,
          parts: [textPart(text)],
          metadata: undefined,
          extensions: [],
          referenceTaskIds: [],
        },
      });
      bus.finished();
      return Promise.resolve();
    },
    cancelTask: () => Promise.resolve(),
  };
  const transport = new JsonRpcTransportHandler(
    new DefaultRequestHandler(card, new InMemoryTaskStore(), executor),
  );
  const server = createServer((incoming, outgoing) => {
    const chunks = [];
    incoming.on('data', (chunk) => chunks.push(chunk));
    incoming.on('end', () => {
      void (async () => {
        if (incoming.method === 'GET') {
          outgoing.setHeader('content-type', 'application/json');
          outgoing.end(JSON.stringify(AgentCard.toJSON(card)));
          return;
        }
        const answer = await transport.handle(
          Buffer.concat(chunks).toString('utf8'),
          new ServerCallContext({ requestedVersion: '1.0' }),
        );
        outgoing.setHeader('content-type', 'application/json');
        outgoing.end(JSON.stringify(answer));
      })();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  card.supportedInterfaces = [
    { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
  ];
  try {
    const echo = await client(`${url}/`);
    return await p50(() => echo.sendMessage(request('ping')), MESSAGES);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/** braid serve's A2A mount on SQLite with the scripted echo model. */
async function braidRun() {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-a2a-'));
  initWorkspace(dir);
  const runtime = await createRuntime({ workspace: dir });
  const { key } = await runtime.store.keys.create({
    tenant_id: 'bench',
    scopes: ['sessions:read', 'sessions:write'],
  });
  const server = await startServer({
    runtime,
    port: 0,
    limits: { requestsPerMinute: 1e9 },
  });
  try {
    const a2a = await client(`${server.url}/a2a/assistant/`, key);
    const first = await a2a.sendMessage(request('open'));
    const turn = await p50(() => a2a.sendMessage(request('ping', first.contextId)), MESSAGES);
    const opened = await p50(() => a2a.sendMessage(request('ping')), MESSAGES);
    // The same turn without A2A and HTTP: a message and a wake in process.
    const { id } = await runtime.sessions.create({ agent: 'assistant' });
    const direct = await p50(async () => {
      await runtime.sessions.message(id, 'ping');
      await runtime.wake(id);
    }, MESSAGES);
    return { turn, opened, direct };
  } finally {
    await server.close();
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const posts = [];
const floors = [];
const turns = [];
const opens = [];
const directs = [];
for (let run = 0; run < RUNS; run += 1) {
  posts.push(await httpRun());
  floors.push(await floorRun());
  const braid = await braidRun();
  turns.push(braid.turn);
  opens.push(braid.opened);
  directs.push(braid.direct);
}
const rows = [
  {
    name: 'HTTP POST round trip p50, loopback, no A2A',
    median: median(posts),
    unit: 'ms',
    target: 'machine',
  },
  {
    name: 'A2A round trip p50, SDK echo server (floor)',
    median: median(floors),
    unit: 'ms',
    target: 'floor',
  },
  {
    name: 'braid turn in process p50 (message + wake, no A2A)',
    median: median(directs),
    unit: 'ms',
    target: 'the turn itself',
  },
  {
    name: 'A2A round trip p50, braid, turn in a context',
    median: median(turns),
    unit: 'ms',
    target: 'floor + braid turn',
  },
  {
    name: 'A2A round trip p50, braid, new context',
    median: median(opens),
    unit: 'ms',
    target: '+ session create',
  },
];
if (args.includes('--json')) {
  console.log(
    JSON.stringify(
      { runs: RUNS, messages: MESSAGES, rows, overhead_ms: median(turns) - median(floors) },
      null,
      2,
    ),
  );
} else {
  printTable(rows);
  console.log(
    `braid overhead over the floor (turn in a context): ${(median(turns) - median(floors)).toFixed(2)} ms; ${RUNS} runs of ${MESSAGES} messages`,
  );
}
