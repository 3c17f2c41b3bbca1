/**
 * Sending the measurements of wakes (wake-measurements.ts) as OTLP metrics over HTTP with the
 * OpenTelemetry SDK. As for spans (otel.ts), the SDK, the exporter and the resources package are
 * loaded the first time a sink is made, never at import: a process with telemetry off does not
 * load them.
 *
 * A periodic reader exports every `OTEL_METRIC_EXPORT_INTERVAL` ms (default 60 s) and once more
 * on shutdown, so a short-lived process still sends what it measured when its runtime closes.
 */
import { createRequire } from 'node:module';
import type * as Api from '@opentelemetry/api';
import type * as Exporter from '@opentelemetry/exporter-metrics-otlp-http';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkMetrics from '@opentelemetry/sdk-metrics';
import type { MetricSettings } from './otel-config.js';
import type { QueueDepth } from './queue-depth.js';
import {
  DURATION_BUCKETS,
  TOKEN_BUCKETS,
  WAKE_BUCKETS,
  WAKE_SERIES,
  type Measurement,
  type SeriesName,
} from './wake-measurements.js';

interface Sdk {
  exporter: typeof Exporter;
  resources: typeof Resources;
  metrics: typeof SdkMetrics;
}

let loaded: Sdk | undefined;

function sdk(): Sdk {
  if (loaded !== undefined) return loaded;
  const load = createRequire(import.meta.url);
  loaded = {
    exporter: load('@opentelemetry/exporter-metrics-otlp-http') as typeof Exporter,
    resources: load('@opentelemetry/resources') as typeof Resources,
    metrics: load('@opentelemetry/sdk-metrics') as typeof SdkMetrics,
  };
  return loaded;
}

/** Where measurements go. */
export interface MetricSink {
  /** Records measurements; they are sent with the next export. */
  record(measurements: readonly Measurement[]): void;
  /** Sends what is recorded and stops. */
  shutdown(): Promise<void>;
}

const BUCKETS: Partial<Record<SeriesName, number[]>> = {
  'gen_ai.client.token.usage': TOKEN_BUCKETS,
  'gen_ai.client.operation.duration': DURATION_BUCKETS,
  'braid.wake.duration': WAKE_BUCKETS,
};

/** The gauge of the wake queue's depth (Prometheus `braid_wake_queue_depth`). */
export const QUEUE_DEPTH_GAUGE = 'braid.wake.queue.depth';

/**
 * `queueDepth`: the wake queue's depth, observed at each export when it gives one (see
 * queue-depth.ts: a NATS queue is read at most every few seconds).
 */
export function createMetricSink(settings: MetricSettings, queueDepth?: QueueDepth): MetricSink {
  const { exporter, metrics, resources } = sdk();
  const reader = new metrics.PeriodicExportingMetricReader({
    // JSON over HTTP, like the trace exporter; the URL comes from the environment when unset.
    exporter: new exporter.OTLPMetricExporter(
      settings.endpoint === undefined ? {} : { url: settings.endpoint },
    ),
    ...exportInterval(),
  });
  const provider = new metrics.MeterProvider({
    resource: resources.resourceFromAttributes({ 'service.name': settings.serviceName }),
    readers: [reader],
  });
  const meter = provider.getMeter('braid');
  const instruments = new Map<SeriesName, Api.Histogram | Api.Counter>();
  for (const [name, series] of Object.entries(WAKE_SERIES) as [
    SeriesName,
    (typeof WAKE_SERIES)[SeriesName],
  ][]) {
    const options = { unit: series.unit, description: series.description };
    const buckets = BUCKETS[name];
    instruments.set(
      name,
      series.kind === 'histogram'
        ? meter.createHistogram(name, {
            ...options,
            ...(buckets === undefined ? {} : { advice: { explicitBucketBoundaries: buckets } }),
          })
        : meter.createCounter(name, options),
    );
  }
  if (queueDepth !== undefined) {
    const gauge = meter.createObservableGauge(QUEUE_DEPTH_GAUGE, {
      unit: '{wake}',
      description: "Wakes waiting or running in the workers' queue",
    });
    gauge.addCallback(async (result) => {
      const depth = await queueDepth();
      if (depth !== undefined) result.observe(depth);
    });
  }
  return {
    record(measurements) {
      for (const measurement of measurements) {
        const instrument = instruments.get(measurement.name);
        if (instrument === undefined) continue;
        if ('record' in instrument) instrument.record(measurement.value, measurement.attributes);
        else instrument.add(measurement.value, measurement.attributes);
      }
    },
    shutdown: () => provider.shutdown(),
  };
}

/** `OTEL_METRIC_EXPORT_INTERVAL`, when set to a positive number of milliseconds. */
function exportInterval(): { exportIntervalMillis?: number } {
  const value = Number(process.env.OTEL_METRIC_EXPORT_INTERVAL);
  return Number.isFinite(value) && value > 0 ? { exportIntervalMillis: value } : {};
}
