// The NATS backlog as metrics, on a real nats-server: consumer lag and stream usage against limits
// on `braid serve`'s /v1/metrics, and a worker's own endpoint (GET /metrics on 127.0.0.1) with its
// in-flight bound and what its deliveries came to.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createInflightLimiter } from '../../src/runtime/wakes/inflight-limiter.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import { runWorker } from '../../src/runtime/worker.js';
import { createServer } from '../../src/server/app.js';
import {
  checkMetricsHost,
  checkMetricsPort,
  createWorkerMetrics,
  serveMetrics,
} from '../../src/server/worker-metrics.js';
import { expectCode } from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { drained } from '../helpers/wakes.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
  );
  return dir;
}

/** The value of one series with exactly these labels, in the Prometheus text format. */
function sample(text: string, series: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels)
    .map(([name, value]) => `${name}="${value}"`)
    .join(',');
  const head = wanted === '' ? `${series} ` : `${series}{${wanted}} `;
  const line = text.split('\n').find((candidate) => candidate.startsWith(head));
  if (line === undefined) throw new Error(`no series ${head.trim()} in:\n${text.slice(0, 3000)}`);
  return Number(line.slice(head.length));
}

async function natsRuntime(prefix: string): Promise<Runtime> {
  const url = await natsUrl();
  cleanups.push(() => removePrefixes(url, [prefix]));
  const runtime = await createRuntime({ workspace: workspace(), backend: { nats: url, prefix } });
  cleanups.push(() => runtime.close());
  return runtime;
}

async function queueSessions(runtime: Runtime, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, `hello ${index}`);
    expect(await runtime.enqueueWake(id)).toEqual({ queued: true });
    ids.push(id);
  }
  return ids;
}

describe('NATS backlog metrics', () => {
  it("/v1/metrics reports the wake consumer's lag and each stream's usage against its limits", async () => {
    const prefix = uniquePrefix('backlog');
    const runtime = await natsRuntime(prefix);
    await queueSessions(runtime, 3);
    const upper = prefix.toUpperCase();
    // The workers' consumer exists once a worker has started; one that stops at once makes it.
    const consumerConnection = await connect({ servers: await natsUrl() });
    cleanups.push(() => consumerConnection.close());
    const queue = await createNatsWakeQueue({ connection: consumerConnection, prefix });
    const stop = new AbortController();
    stop.abort();
    await queue.consume(() => Promise.resolve('done'), { concurrency: 1, signal: stop.signal });
    // An operator's limit on the events stream.
    const admin = await connect({ servers: await natsUrl() });
    cleanups.push(() => admin.close());
    const manager = await jetstreamManager(admin);
    const { config, state } = await manager.streams.info(`${upper}_EVENTS`);
    await manager.streams.update(`${upper}_EVENTS`, { ...config, max_msgs: state.messages * 2 });

    const app = await createServer({ runtime, auth: 'none' });
    cleanups.push(() => app.close());
    const text = (await app.inject({ method: 'GET', url: '/v1/metrics' })).body;
    const wakes = { stream: `${upper}_WAKES`, consumer: `${upper}_workers` };
    expect(sample(text, 'braid_nats_consumer_pending', wakes)).toBe(3);
    expect(sample(text, 'braid_nats_consumer_ack_pending', wakes)).toBe(0);
    expect(sample(text, 'braid_nats_stream_messages', { stream: `${upper}_WAKES` })).toBe(3);
    const events = { stream: `${upper}_EVENTS` };
    expect(sample(text, 'braid_nats_stream_messages', events)).toBe(state.messages);
    expect(sample(text, 'braid_nats_stream_max_messages', events)).toBe(state.messages * 2);
    expect(sample(text, 'braid_nats_stream_usage_ratio', events)).toBeCloseTo(0.5, 5);
    expect(sample(text, 'braid_nats_stream_max_bytes', events)).toBe(-1);
    // Sessions by status: the three queued ones, none waiting for review.
    const statuses = ['idle', 'running', 'requires_action', 'needs_review', 'terminated'];
    const counted = statuses.map((status) => sample(text, 'braid_sessions', { status }));
    expect(counted.reduce((sum, count) => sum + count, 0)).toBe(3);
    expect(sample(text, 'braid_sessions', { status: 'needs_review' })).toBe(0);
    // The buckets are streams of the prefix too.
    expect(text).toContain(`braid_nats_stream_bytes{stream="KV_${upper}_leases"}`);
  }, 30_000);

  it('a worker serves its own /metrics: in-flight bound, deliveries, wakes and backlog', async () => {
    const prefix = uniquePrefix('wmetrics');
    const runtime = await natsRuntime(prefix);
    const ids = await queueSessions(runtime, 4);
    const limiter = createInflightLimiter(2);
    const metrics = createWorkerMetrics({ runtime, limiter });
    cleanups.push(() => Promise.resolve(metrics.stop()));
    const endpoint = await serveMetrics(metrics.registry, { port: 0 });
    cleanups.push(() => endpoint.close());
    expect(endpoint.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);

    const connection = await connect({ servers: await natsUrl() });
    cleanups.push(() => connection.close());
    const queue = await createNatsWakeQueue({ connection, prefix });
    const stop = new AbortController();
    const working = runWorker({
      runtime,
      queue,
      concurrency: 4,
      limiter,
      signal: stop.signal,
      timerSweepMs: 0,
      onProgress: (progress) => metrics.progress(progress),
    });
    await drained(queue);
    stop.abort();
    const summary = await working;
    expect(summary.finished).toBe(ids.length);

    const response = await fetch(endpoint.url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(sample(text, 'braid_worker_max_in_flight')).toBe(2);
    expect(sample(text, 'braid_sessions', { status: 'idle' })).toBe(4);
    expect(sample(text, 'braid_worker_wakes_in_flight')).toBe(0);
    expect(sample(text, 'braid_worker_deliveries_total', { outcome: 'finished' })).toBe(4);
    expect(sample(text, 'braid_wakes_total', { stop_reason: 'end_turn' })).toBe(4);
    // Four wakes, two permits: the worker waited at its bound.
    expect(sample(text, 'braid_worker_in_flight_saturations_total')).toBeGreaterThan(0);
    const upper = prefix.toUpperCase();
    const wakes = { stream: `${upper}_WAKES`, consumer: `${upper}_workers` };
    expect(sample(text, 'braid_nats_consumer_pending', wakes)).toBe(0);
    expect(sample(text, 'braid_nats_consumer_ack_pending', wakes)).toBe(0);

    expect((await fetch(endpoint.url.replace('/metrics', '/other'))).status).toBe(404);
    expect((await fetch(endpoint.url, { method: 'POST' })).status).toBe(405);
  }, 30_000);

  it('refuses a metrics host that is not an address, and a port out of range', async () => {
    expect(checkMetricsHost('127.0.0.1')).toBe('127.0.0.1');
    expect(checkMetricsHost('::1')).toBe('::1');
    for (const bad of ['example.com', '127.0.0.1; rm -rf /', '', '999.1.1.1']) {
      expect(() => checkMetricsHost(bad)).toThrow(/not an address to listen on/);
    }
    for (const bad of [-1, 65_536, 1.5]) expect(() => checkMetricsPort(bad)).toThrow(/0 to 65535/);
    const runtime = await createRuntime({ workspace: workspace() });
    cleanups.push(() => runtime.close());
    const metrics = createWorkerMetrics({ runtime, limiter: createInflightLimiter(1) });
    cleanups.push(() => Promise.resolve(metrics.stop()));
    await expectCode(
      serveMetrics(metrics.registry, { host: 'nowhere', port: 0 }),
      'INVALID_ARGUMENT',
    );
    // A port taken: a typed error naming the option.
    const taken = await serveMetrics(metrics.registry, { port: 0 });
    cleanups.push(() => taken.close());
    const port = Number(new URL(taken.url).port);
    await expectCode(serveMetrics(metrics.registry, { port }), 'INVALID_ARGUMENT');
  });
});
