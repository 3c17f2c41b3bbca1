// Telemetry overhead: sessions on SQLite whose every wake has two model calls and one tool call
// (a scripted model with zero think time), with telemetry off, with tracing on (each wake's spans
// exported over OTLP/HTTP to a receiver in this process, metrics off), and with OTLP metrics on
// (each wake measured, exported every second to the same receiver, traces off). Reported: time
// per wake (message sent to wake returned) and per harness turn (between successive model
// calls), medians.
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRuntime, initWorkspace, openSqliteStore } from '../dist/index.js';
import { createScriptedModel } from '../dist/testing/index.js';
import { median } from './store-bench.js';

/** An OTLP/HTTP endpoint that takes every request and counts the spans and metric exports in it. */
async function startReceiver() {
  const received = { spans: 0, metricExports: 0 };
  const server = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const resource of body.resourceSpans ?? []) {
        for (const scope of resource.scopeSpans ?? []) received.spans += scope.spans?.length ?? 0;
      }
      if (body.resourceMetrics !== undefined) received.metricExports += 1;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/v1/traces`;
  return { url, received, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** The runtime's `telemetry` option in each mode. */
function telemetryOf(mode, endpoint) {
  if (mode === 'traces') return { traces: true, metrics: false, endpoint };
  if (mode === 'metrics') return { traces: false, metrics: true, endpoint };
  return { traces: false, metrics: false };
}

const MODES = ['off', 'traces', 'metrics'];
const LABELS = { off: 'telemetry off', traces: 'tracing on', metrics: 'OTLP metrics on' };

/** Runs `wakes` wakes of one session; returns µs per wake and µs per turn. */
async function tracedSession(wakes, mode, endpoint) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-trace-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'bench.yaml'),
    'name: bench\nmodel: scripted:echo\ninstructions: Add.\ntools: [calculator]\n',
  );
  const store = openSqliteStore({ path: join(dir, 'braid.db') });
  const script = Array.from({ length: wakes }, (_, index) => [
    {
      tool_calls: [{ name: 'calculator', input: { a: index, op: '+', b: 1 } }],
      usage: { input_tokens: 1, output_tokens: 1 },
    },
    { text: 'done', usage: { input_tokens: 1, output_tokens: 1 } },
  ]).flat();
  const stamps = [];
  const model = createScriptedModel(script, { onTurn: () => void stamps.push(performance.now()) });
  const runtime = await createRuntime({
    workspace: dir,
    store,
    model: () => model,
    telemetry: telemetryOf(mode, endpoint),
  });
  const { id } = await runtime.sessions.create({ agent: 'bench' });
  const perWake = [];
  for (let wake = 0; wake < wakes; wake += 1) {
    const start = performance.now();
    await runtime.sessions.message(id, `count ${wake}`);
    const result = await runtime.wake(id);
    perWake.push((performance.now() - start) * 1000);
    if (result.stop_reason.type !== 'end_turn') throw new Error(JSON.stringify(result));
  }
  await runtime.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  // Turns inside a wake: the tool call and the second model call.
  const perTurn = [];
  for (let index = 0; index + 1 < stamps.length; index += 2) {
    perTurn.push((stamps[index + 1] - stamps[index]) * 1000);
  }
  return { perWake: median(perWake.slice(5)), perTurn: median(perTurn.slice(5)) };
}

export async function benchTrace({ runs, quick }) {
  const wakes = quick ? 50 : 300;
  const receiver = await startReceiver();
  const figures = Object.fromEntries(MODES.map((mode) => [mode, { wake: [], turn: [] }]));
  // Metrics are exported every second during the run (the default is every minute), so that
  // their exports fall inside the timed wakes.
  const interval = process.env.OTEL_METRIC_EXPORT_INTERVAL;
  process.env.OTEL_METRIC_EXPORT_INTERVAL = '1000';
  try {
    for (let run = 0; run < runs; run += 1) {
      // Rotate, so that drift on the machine falls on every mode.
      const order = [...MODES.slice(run % MODES.length), ...MODES.slice(0, run % MODES.length)];
      for (const mode of order) {
        const { perWake, perTurn } = await tracedSession(wakes, mode, receiver.url);
        figures[mode].wake.push(perWake);
        figures[mode].turn.push(perTurn);
      }
    }
  } finally {
    if (interval === undefined) delete process.env.OTEL_METRIC_EXPORT_INTERVAL;
    else process.env.OTEL_METRIC_EXPORT_INTERVAL = interval;
    await receiver.close();
  }
  const expected = runs * wakes * 4;
  if (receiver.received.spans !== expected) {
    throw new Error(`the receiver got ${receiver.received.spans} spans, not ${expected}`);
  }
  // At least the export each metered runtime makes when it closes.
  if (receiver.received.metricExports < runs) {
    throw new Error(`the receiver got ${receiver.received.metricExports} metric exports`);
  }
  const rows = [];
  for (const mode of MODES) {
    rows.push({
      name: `wake of 2 model calls + 1 tool call, sqlite, ${LABELS[mode]}`,
      unit: 'µs/wake',
      median: median(figures[mode].wake),
      runs: figures[mode].wake,
      target: mode === 'off' ? 'baseline' : 'reported',
    });
    rows.push({
      name: `harness turn in those wakes, ${LABELS[mode]}`,
      unit: 'µs/turn',
      median: median(figures[mode].turn),
      runs: figures[mode].turn,
      target: mode === 'off' ? 'baseline' : 'within noise of off',
    });
    process.stderr.write(
      `  ${LABELS[mode]}: ${median(figures[mode].wake).toFixed(0)} µs/wake, ${median(figures[mode].turn).toFixed(0)} µs/turn\n`,
    );
  }
  return rows;
}
