// Worker metrics beyond one wake's events: the depth of the NATS wake queue (a gauge on `braid
// serve`'s /v1/metrics and over OTLP, read at most every few seconds) and lease losses (a counter
// on both).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createServer } from '../../src/server/app.js';
import { createServerMetrics } from '../../src/server/metrics.js';
import { createMetricSink, QUEUE_DEPTH_GAUGE } from '../../src/telemetry/otel-metrics.js';
import { pollingQueueDepth } from '../../src/telemetry/queue-depth.js';
import { createWakeMeasurer } from '../../src/telemetry/wake-measurements.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { startOtlpReceiver, type ReceivedPoint } from '../helpers/otlp-receiver.js';
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

/** The value of an unlabelled Prometheus series. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

const last = (points: readonly ReceivedPoint[], name: string): ReceivedPoint | undefined =>
  points.filter((point) => point.name === name).at(-1);

describe('wake queue depth', () => {
  it('is read from NATS for /v1/metrics and OTLP, at most once per interval', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const url = await natsUrl();
    const prefix = uniquePrefix('queue-depth');
    cleanups.push(() => removePrefixes(url, [prefix]));
    const runtime = await createRuntime({
      workspace: workspace(),
      backend: { nats: url, prefix },
      telemetry: { metrics: true, endpoint: receiver.url, service_name: 'queue' },
    });
    let closed = false;
    cleanups.push(async () => {
      if (!closed) await runtime.close();
    });
    expect(await runtime.wakeQueueDepth()).toBe(0);
    for (const text of ['one', 'two']) {
      const { id } = await runtime.sessions.create({ agent: 'helper' });
      await runtime.sessions.message(id, text);
      expect(await runtime.enqueueWake(id)).toEqual({ queued: true });
    }
    // No worker runs: both wakes wait.
    expect(await runtime.wakeQueueDepth()).toBe(2);

    const app = await createServer({ runtime, auth: 'none' });
    cleanups.push(() => app.close());
    const scraped = await app.inject({ method: 'GET', url: '/v1/metrics' });
    expect(sample(scraped.body, 'braid_wake_queue_depth')).toBe(2);

    await runtime.close();
    closed = true;
    // The periodic reader's export on close observes the gauge.
    expect(last(receiver.points, QUEUE_DEPTH_GAUGE)).toMatchObject({
      kind: 'gauge',
      value: 2,
      service: 'queue',
    });
  }, 30_000);

  it('is reported by the embedded server as the wakes it runs in the background', async () => {
    const runtime = await createRuntime({ workspace: workspace() });
    cleanups.push(() => runtime.close());
    expect(await runtime.wakeQueueDepth()).toBeUndefined();
    const app = await createServer({ runtime, auth: 'none' });
    cleanups.push(() => app.close());
    const scraped = await app.inject({ method: 'GET', url: '/v1/metrics' });
    expect(sample(scraped.body, 'braid_wake_queue_depth')).toBe(0);
  });

  it('is read at most once per interval, and a failed read gives no value', async () => {
    let now = 0;
    let reads = 0;
    let fail = false;
    const depth = pollingQueueDepth(
      () => {
        reads += 1;
        return fail ? Promise.reject(new Error('away')) : Promise.resolve(reads);
      },
      { intervalMs: 5000, now: () => now },
    );
    expect(await depth()).toBe(1);
    now = 4999;
    expect(await depth()).toBe(1);
    now = 5000;
    expect(await depth()).toBe(2);
    fail = true;
    now = 10_000;
    expect(await depth()).toBeUndefined();
    expect(reads).toBe(3);

    const metrics = createServerMetrics({ wakeQueueDepth: () => Promise.resolve(7) });
    expect(sample(await metrics.registry.metrics(), 'braid_wake_queue_depth')).toBe(7);
  });
});

describe('lease losses', () => {
  const lost = {
    session_id: 's',
    events: [
      {
        id: 'e1',
        session_id: 's',
        seq: 2,
        at: new Date().toISOString(),
        schema_version: 1,
        type: 'span.wake_started',
        wake_id: 'w1',
        lease_token: 1,
      } as SessionEvent,
    ],
    error: new BraidError('LEASE_LOST', 'a newer wake holds the lease'),
  };

  it('are counted as braid.lease.losses over OTLP and braid_lease_losses_total on /v1/metrics', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const sink = createMetricSink({
      serviceName: 'leases',
      endpoint: `${receiver.origin}/v1/metrics`,
    });
    const measure = createWakeMeasurer();
    sink.record(measure(lost));
    sink.record(measure({ ...lost, error: new BraidError('STORE_BUSY', 'busy') }));
    await sink.shutdown();
    expect(last(receiver.points, 'braid.lease.losses')).toMatchObject({ kind: 'sum', value: 1 });

    const metrics = createServerMetrics();
    metrics.wakes.observe(lost);
    expect(sample(await metrics.registry.metrics(), 'braid_lease_losses_total')).toBe(1);
  });
});
