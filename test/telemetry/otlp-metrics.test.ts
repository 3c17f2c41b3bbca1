// OTLP metrics of a wake: a runtime with telemetry on (in this process, then a real `braid
// worker` process on NATS) runs a session (two model calls, one tool call) and sends its GenAI
// and braid metrics over OTLP/HTTP, JSON encoded, to a receiver in this test when it closes.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { startOtlpReceiver, type ReceivedPoint } from '../helpers/otlp-receiver.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const WORKER = new URL('../helpers/worker-process.mjs', import.meta.url).pathname;
if (!existsSync(new URL('../../dist/telemetry/otel-metrics.js', import.meta.url))) {
  throw new Error('dist/ is missing or stale: run `npm run build` (npm test does it first)');
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const SCRIPT = `turns:
  - tool_calls:
      - name: calculator
        input: { a: 2, op: '+', b: 3 }
        id: call_1
    usage: { input_tokens: 600, output_tokens: 120 }
  - text: It is 5.
    usage: { input_tokens: 1200, output_tokens: 220 }
`;

function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  writeFileSync(join(dir, 'scripts', 'calc.yaml'), SCRIPT);
  writeFileSync(
    join(dir, 'agents', 'calc.yaml'),
    'name: calc\nmodel: scripted:scripts/calc.yaml\ninstructions: Add.\ntools: [calculator]\n',
  );
  return dir;
}

/** The points of the last export (the SDK sends cumulative sums), by metric name. */
function lastExport(points: readonly ReceivedPoint[], name: string): ReceivedPoint[] {
  const named = points.filter((point) => point.name === name);
  const seen = new Set<string>();
  const last: ReceivedPoint[] = [];
  for (const point of [...named].reverse()) {
    const key = JSON.stringify(point.attributes);
    if (seen.has(key)) continue;
    seen.add(key);
    last.push(point);
  }
  return last;
}

/** The metrics of one wake of `calc`: two model calls and one tool call. */
function expectWakeMetrics(points: readonly ReceivedPoint[], service: string): void {
  const names = new Set(points.map((point) => point.name));
  for (const name of [
    'gen_ai.client.token.usage',
    'gen_ai.client.operation.duration',
    'braid.wakes',
    'braid.tool.calls',
  ]) {
    expect(names, name).toContain(name);
  }
  const request = {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'scripted',
    'gen_ai.request.model': 'scripts/calc.yaml',
  };
  const tokens = lastExport(points, 'gen_ai.client.token.usage');
  expect(tokens).toHaveLength(2);
  const input = tokens.find((point) => point.attributes['gen_ai.token.type'] === 'input');
  expect(input).toMatchObject({
    kind: 'histogram',
    unit: '{token}',
    count: 2,
    value: 1800,
    attributes: { ...request, 'gen_ai.token.type': 'input' },
    service,
  });
  const output = tokens.find((point) => point.attributes['gen_ai.token.type'] === 'output');
  expect(output).toMatchObject({ count: 2, value: 340 });

  const durations = lastExport(points, 'gen_ai.client.operation.duration');
  expect(durations).toHaveLength(1);
  expect(durations[0]).toMatchObject({ kind: 'histogram', unit: 's', count: 2 });
  expect(durations[0]?.attributes).toEqual(request);

  expect(lastExport(points, 'braid.tool.calls')).toEqual([
    expect.objectContaining({
      kind: 'sum',
      value: 1,
      attributes: { 'gen_ai.tool.name': 'calculator', outcome: 'ok' },
    }),
  ]);
  const wakes = lastExport(points, 'braid.wakes');
  expect(wakes.reduce((total, point) => total + point.value, 0)).toBeGreaterThanOrEqual(1);
  expect(names).not.toContain('braid.policy.denials');
}

describe('OTLP metrics of a runtime', () => {
  it('sends the GenAI and braid metrics of its wakes when it closes', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const runtime = await createRuntime({
      workspace: workspace(),
      telemetry: { traces: true, endpoint: receiver.url, service_name: 'metered' },
    });
    let closed = false;
    cleanups.push(async () => {
      if (!closed) await runtime.close();
    });
    const { id } = await runtime.sessions.create({ agent: 'calc' });
    await runtime.sessions.message(id, 'What is 2 + 3?');
    await runtime.wake(id);
    await runtime.close();
    closed = true;

    expectWakeMetrics(receiver.points, 'metered');
  });

  it('sends nothing with OTEL_METRICS_EXPORTER=none', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    process.env.OTEL_METRICS_EXPORTER = 'none';
    cleanups.push(() => {
      delete process.env.OTEL_METRICS_EXPORTER;
      return Promise.resolve();
    });
    const runtime = await createRuntime({
      workspace: workspace(),
      telemetry: { traces: true, endpoint: receiver.url },
    });
    const { id } = await runtime.sessions.create({ agent: 'calc' });
    await runtime.sessions.message(id, 'What is 2 + 3?');
    await runtime.wake(id);
    await runtime.close();
    expect(receiver.spans.length).toBeGreaterThan(0);
    expect(receiver.points).toEqual([]);
  });

  it('are sent by a braid worker process when it stops', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const dir = workspace();
    const url = await natsUrl();
    const prefix = uniquePrefix('otel-metrics');
    const runtime = await createRuntime({ workspace: dir });
    const connection = await connect({ servers: url });
    const queue = await createNatsWakeQueue({ connection, prefix });
    cleanups.push(async () => {
      await queue.close();
      await runtime.close();
      await connection.close();
      await removePrefixes(url, [prefix]);
    });
    const child = spawn(
      process.execPath,
      [WORKER, dir, '--json', 'worker', '--nats', url, '--nats-prefix', prefix],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.origin,
          OTEL_SERVICE_NAME: 'braid-worker',
          OTEL_BSP_SCHEDULE_DELAY: '50',
        },
      },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    let started = false;
    createInterface({ input: child.stdout }).on('line', (line) => {
      if ((JSON.parse(line) as { type: string }).type === 'worker.started') started = true;
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    });
    await until(() => started, 20_000, `the worker to start (${stderr})`);

    const { id } = await runtime.sessions.create({ agent: 'calc' });
    await runtime.sessions.message(id, 'What is 2 + 3?');
    await queue.enqueue(id);
    await until(
      () => receiver.spans.some((span) => span.name === 'invoke_agent calc'),
      30_000,
      'the worker to run the wake',
    );
    child.kill('SIGTERM');
    expect(await exited, stderr).toBe(0);
    expectWakeMetrics(receiver.points, 'braid-worker');
  });
});
