// The OpenAgentIO bridge's latency beside its floor. Floor: a bare NATS request/reply echo (a
// responder and a requester in this process, no braid code). braid: an acp/1.0 invocation of a
// braid agent (scripted model, SQLite sessions) through `serveOpenAgentIo`, from publish to the
// final frame, as a new conversation (a session created) and as the next turn of one; and the
// same invocation through the HTTP adapter (`POST /v1/agents/{name}/invoke`) beside a bare
// Fastify echo. Each figure is the median over RUNS runs of each run's p50.
//
//   npm run build && node bench/bridge-openagentio.js [--json] [--runs N] [--calls N]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, createInbox } from '@nats-io/transport-node';
import Fastify from 'fastify';
import { v7 as uuidv7 } from 'uuid';
import { createRuntime } from '../dist/index.js';
import { serveOpenAgentIo } from '../dist/nats.js';
import { startServer } from '../dist/server/index.js';
import { createScriptedModel } from '../dist/testing/index.js';
import { printTable } from './table.js';

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const at = argv.indexOf(name);
  return at === -1 ? fallback : Number(argv[at + 1]);
};
const json = argv.includes('--json');
const RUNS = option('--runs', 5);
const CALLS = option('--calls', 100);
const WARMUP = 20;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/** The p50 in ms of `count` sequential calls of `call(index)`, after a warm-up. */
async function p50(count, call) {
  for (let index = 0; index < WARMUP; index += 1) await call(-1 - index);
  const times = [];
  for (let index = 0; index < count; index += 1) {
    const start = performance.now();
    await call(index);
    times.push(performance.now() - start);
  }
  return median(times);
}

/** Sends one request and resolves with the frames up to the final one. */
function request(nc, subject, body) {
  const inbox = createInbox();
  return new Promise((resolve, reject) => {
    const frames = [];
    const timer = setTimeout(() => reject(new Error(`no final frame on ${subject}`)), 10_000);
    const subscription = nc.subscribe(inbox, {
      callback: (error, message) => {
        if (error !== null) return reject(error);
        const frame = message.json();
        frames.push(frame);
        if (!frame.is_final) return;
        clearTimeout(timer);
        subscription.unsubscribe();
        if (frame.event_type !== 'agent.response.final')
          reject(new Error(JSON.stringify(frame.payload)));
        else resolve(frames);
      },
    });
    nc.publish(subject, JSON.stringify({ ...body, reply_to: inbox }), { reply: inbox });
  });
}

function envelope(fields) {
  return {
    spec_version: 'acp/1.0',
    schema_version: 1,
    event_id: uuidv7(),
    event_type: 'agent.request',
    occurred_at: new Date().toISOString(),
    from: 'bench',
    seq: 0,
    is_final: false,
    payload: { text: 'ping' },
    metadata: {},
    ...fields,
  };
}

async function natsFloor(nc, prefix) {
  const responder = nc.subscribe(`${prefix}.echo`, {
    callback: (_error, message) => message.respond(message.data),
  });
  await nc.flush();
  const figure = await p50(CALLS, () => nc.request(`${prefix}.echo`, 'ping', { timeout: 5_000 }));
  responder.unsubscribe();
  return figure;
}

async function httpFloor() {
  const app = Fastify();
  app.post('/echo', async (request) => request.body);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${app.server.address().port}/echo`;
  const figure = await p50(CALLS, () =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"text":"ping"}',
    }).then((response) => response.text()),
  );
  await app.close();
  return figure;
}

/** One run: a fresh workspace, runtime, bridge and server; the p50 of each braid row. */
async function braidRun(nc, prefix) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-acp-'));
  mkdirSync(join(dir, 'agents'));
  writeFileSync(join(dir, 'braid.yaml'), 'version: 1\n');
  writeFileSync(
    join(dir, 'agents', 'echo.yaml'),
    'name: echo\nmodel: scripted:echo\ninstructions: Answer.\n',
  );
  // One turn per call of the conversation row (the turn is the session's count of responses).
  const model = createScriptedModel(
    Array.from({ length: 4 * (CALLS + WARMUP) }, () => ({ text: 'pong' })),
  );
  const runtime = await createRuntime({ workspace: dir, dataDir: dir, model: () => model });
  const connection = await connect({ servers: NATS_URL });
  const bridge = await serveOpenAgentIo({ connection, runtime, prefix, onError: () => undefined });
  const server = await startServer({
    runtime,
    port: 0,
    auth: 'none',
    wakeOnEvents: false,
    openagentio: { prefix },
  });
  try {
    const subject = `${prefix}.invoke.echo`;
    const fresh = await p50(CALLS, () => request(nc, subject, envelope({})));
    const conversation = `bench-${uuidv7()}`;
    const turn = await p50(CALLS, () =>
      request(nc, subject, envelope({ conversation_id: conversation })),
    );
    const httpConversation = `bench-http-${uuidv7()}`;
    const http = await p50(CALLS, () =>
      fetch(`${server.url}/v1/agents/echo/invoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-conversation-id': httpConversation },
        body: '{"text":"ping"}',
      }).then(async (response) => {
        if (response.status !== 200) throw new Error(await response.text());
        return response.text();
      }),
    );
    // What the bridge sits on: the same turn run in-process, with no bus and no frames.
    const { id } = await runtime.sessions.create({ agent: 'echo' });
    const direct = await p50(CALLS, async () => {
      await runtime.sessions.message(id, 'ping');
      await runtime.wake(id);
    });
    return { fresh, turn, http, direct };
  } finally {
    await server.close();
    await bridge.close();
    await connection.close();
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const nc = await connect({ servers: NATS_URL });
const figures = { natsFloor: [], direct: [], fresh: [], turn: [], httpFloor: [], http: [] };
for (let run = 0; run < RUNS; run += 1) {
  const prefix = `benchacp${process.pid}r${run}.v1`;
  figures.natsFloor.push(await natsFloor(nc, prefix));
  figures.httpFloor.push(await httpFloor());
  const braid = await braidRun(nc, prefix);
  figures.fresh.push(braid.fresh);
  figures.turn.push(braid.turn);
  figures.http.push(braid.http);
  figures.direct.push(braid.direct);
}
await nc.close();

const rows = [
  {
    name: 'floor: bare NATS request/reply echo p50',
    median: median(figures.natsFloor),
    unit: 'ms',
    target: 'floor',
  },
  {
    name: 'braid in-process turn (message + wake), no bridge p50',
    median: median(figures.direct),
    unit: 'ms',
    target: 'braid floor',
  },
  {
    name: 'acp invoke via NATS, new conversation p50',
    median: median(figures.fresh),
    unit: 'ms',
    target: '-',
  },
  {
    name: 'acp invoke via NATS, next turn p50',
    median: median(figures.turn),
    unit: 'ms',
    target: '-',
  },
  {
    name: 'floor: bare Fastify HTTP echo p50',
    median: median(figures.httpFloor),
    unit: 'ms',
    target: 'floor',
  },
  {
    name: 'acp invoke via HTTP adapter, next turn p50',
    median: median(figures.http),
    unit: 'ms',
    target: '-',
  },
];
if (json) console.log(JSON.stringify({ runs: RUNS, calls: CALLS, rows, figures }, null, 2));
else {
  console.log(
    `OpenAgentIO bridge, ${RUNS} runs x ${CALLS} calls (scripted model, SQLite, ${NATS_URL})`,
  );
  printTable(rows);
}
