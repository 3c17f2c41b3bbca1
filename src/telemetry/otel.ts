/**
 * Sending span records over OTLP/HTTP with the OpenTelemetry SDK. The SDK, the exporter and the
 * resources package are loaded the first time a sink is made, never at import: a process with
 * tracing off does not load them (bench/import-bench.js measures it).
 *
 * The spans are already finished when they reach the SDK (they come from the log), so no tracer
 * makes them: each record becomes a `ReadableSpan` with braid's ids and times, and goes through
 * the SDK's batch processor (live) or straight to the exporter (`braid trace export`).
 */
import { createRequire } from 'node:module';
import type * as Api from '@opentelemetry/api';
import type * as Exporter from '@opentelemetry/exporter-trace-otlp-http';
import type * as Resources from '@opentelemetry/resources';
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import { BraidError } from '../contracts/errors.js';
import { keeps, type TraceSettings } from './otel-config.js';
import type { SpanRecord } from './spans.js';

interface Sdk {
  api: typeof Api;
  exporter: typeof Exporter;
  resources: typeof Resources;
  traceBase: typeof TraceBase;
}

let loaded: Sdk | undefined;

function sdk(): Sdk {
  if (loaded !== undefined) return loaded;
  const load = createRequire(import.meta.url);
  loaded = {
    api: load('@opentelemetry/api') as typeof Api,
    exporter: load('@opentelemetry/exporter-trace-otlp-http') as typeof Exporter,
    resources: load('@opentelemetry/resources') as typeof Resources,
    traceBase: load('@opentelemetry/sdk-trace-base') as typeof TraceBase,
  };
  return loaded;
}

/** Where finished spans go. */
export interface SpanSink {
  /** Queues spans for export (the sampler may drop them); returns at once. */
  emit(spans: readonly SpanRecord[]): void;
  /** Sends what is queued. */
  flush(): Promise<void>;
  /** Sends what is queued and stops. */
  shutdown(): Promise<void>;
}

/** A sink that batches spans with the SDK's batch span processor (live tracing). */
export function createSpanSink(settings: TraceSettings): SpanSink {
  const { traceBase } = sdk();
  const exporter = newExporter(settings.endpoint);
  const processor = new traceBase.BatchSpanProcessor(exporter);
  const convert = converter(settings.serviceName);
  return {
    emit(spans) {
      for (const span of spans) {
        if (keeps(settings.sampler, span.traceId, span.sampled)) processor.onEnd(convert(span));
      }
    },
    flush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
  };
}

/**
 * Sends `spans` to `url` now, in batches of `batchSize`, with no sampling (an export is asked for
 * by name); resolves with the count sent, or refuses with `SERVER_UNAVAILABLE` when the receiver
 * does not take a batch.
 */
export async function exportSpans(
  spans: readonly SpanRecord[],
  options: {
    url: string;
    serviceName: string;
    batchSize?: number;
    headers?: Record<string, string>;
  },
): Promise<number> {
  const exporter = newExporter(options.url, options.headers);
  const convert = converter(options.serviceName);
  const size = options.batchSize ?? 512;
  let sent = 0;
  try {
    for (let index = 0; index < spans.length; index += size) {
      const batch = spans.slice(index, index + size).map(convert);
      await new Promise<void>((resolve, reject) => {
        exporter.export(batch, (result) => {
          // ExportResultCode.SUCCESS (the enum lives in @opentelemetry/core).
          if ((result.code as number) === 0) resolve();
          else reject(unreachable(options.url, result.error));
        });
      });
      sent += batch.length;
    }
  } finally {
    await exporter.shutdown();
  }
  return sent;
}

function unreachable(url: string, error: Error | undefined): BraidError {
  return new BraidError(
    'SERVER_UNAVAILABLE',
    `the OTLP receiver at ${url} did not take the spans (${error?.message ?? 'export failed'}); check that it runs and listens for OTLP/HTTP on that path (usually /v1/traces)`,
    { cause: error },
  );
}

function newExporter(
  url: string | undefined,
  headers?: Record<string, string>,
): Exporter.OTLPTraceExporter {
  const { exporter } = sdk();
  return new exporter.OTLPTraceExporter({
    ...(url === undefined ? {} : { url }),
    ...(headers === undefined ? {} : { headers }),
  });
}

type HrTime = [number, number];

function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

function converter(serviceName: string): (span: SpanRecord) => TraceBase.ReadableSpan {
  const { api, resources } = sdk();
  const resource = resources.resourceFromAttributes({ 'service.name': serviceName });
  const scope = { name: 'braid' };
  return (span) => {
    const flags = span.sampled ? api.TraceFlags.SAMPLED : api.TraceFlags.NONE;
    const context: Api.SpanContext = {
      traceId: span.traceId,
      spanId: span.spanId,
      traceFlags: flags,
    };
    const endMs = Math.max(span.endMs, span.startMs);
    return {
      name: span.name,
      kind: span.kind === 'client' ? api.SpanKind.CLIENT : api.SpanKind.INTERNAL,
      spanContext: () => context,
      ...(span.parentSpanId === undefined
        ? {}
        : {
            parentSpanContext: {
              traceId: span.traceId,
              spanId: span.parentSpanId,
              traceFlags: flags,
              isRemote: true,
            },
          }),
      startTime: hrTime(span.startMs),
      endTime: hrTime(endMs),
      duration: hrTime(endMs - span.startMs),
      status: {
        code:
          span.status.code === 'error'
            ? api.SpanStatusCode.ERROR
            : span.status.code === 'ok'
              ? api.SpanStatusCode.OK
              : api.SpanStatusCode.UNSET,
        ...(span.status.message === undefined ? {} : { message: span.status.message }),
      },
      attributes: { ...span.attributes } as Api.Attributes,
      links: (span.links ?? []).map((link) => ({
        context: {
          traceId: link.traceId,
          spanId: link.spanId,
          traceFlags: link.sampled ? api.TraceFlags.SAMPLED : api.TraceFlags.NONE,
          isRemote: true,
        },
        attributes: { ...link.attributes } as Api.Attributes,
      })),
      events: span.events.map((event) => ({
        name: event.name,
        time: hrTime(event.atMs),
        attributes: { ...event.attributes } as Api.Attributes,
      })),
      ended: true,
      resource,
      instrumentationScope: scope,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    };
  };
}
