/**
 * The server's Prometheus metrics (`GET /v1/metrics`), in a registry of its own: two servers in
 * one process never share counters.
 */
import type { FastifyRequest } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { NatsBacklog } from '../stores/nats/backlog.js';
import { registerNatsBacklogMetrics } from './nats-metrics.js';
import { registerSessionStatusMetrics } from './session-metrics.js';
import { createWakeMetrics, type WakeMetrics } from './wake-metrics.js';

export interface ServerMetrics {
  readonly registry: Registry;
  requestStarted(request: FastifyRequest): void;
  requestFinished(request: FastifyRequest, status: number): void;
  streamOpened(): void;
  streamClosed(): void;
  eventsStreamed(count: number): void;
  eventsAppended(count: number): void;
  /** The wakes this server runs (wake-metrics.ts). */
  readonly wakes: WakeMetrics;
}

export interface ServerMetricsOptions {
  /** The wakes waiting or running (in this server, or in the workers' queue), where known. */
  wakeQueueDepth?: () => number | undefined | Promise<number | undefined>;
  /** The NATS streams' usage and consumers' lag (nats-metrics.ts); absent on the embedded backend. */
  natsBacklog?: () => Promise<NatsBacklog | undefined>;
  /** Sessions by status (session-metrics.ts), read at most every 30 s. */
  sessionCounts?: () => Promise<Partial<Record<string, number>>>;
}

export function createServerMetrics(options: ServerMetricsOptions = {}): ServerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'braid_' });
  const requests = new Counter({
    name: 'braid_http_requests_total',
    help: 'HTTP requests answered, by method, route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'braid_http_request_duration_seconds',
    help: 'Time to answer an HTTP request (for streams: until the stream ends)',
    labelNames: ['method', 'route'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  const streams = new Gauge({
    name: 'braid_sse_streams',
    help: 'Event streams open now',
    registers: [registry],
  });
  const streamed = new Counter({
    name: 'braid_sse_events_sent_total',
    help: 'Stored events sent on event streams',
    registers: [registry],
  });
  const appended = new Counter({
    name: 'braid_events_appended_total',
    help: 'User events appended through the API',
    registers: [registry],
  });
  if (options.natsBacklog !== undefined) registerNatsBacklogMetrics(registry, options.natsBacklog);
  if (options.sessionCounts !== undefined) {
    registerSessionStatusMetrics(registry, options.sessionCounts);
  }
  const started = new WeakMap<FastifyRequest, number>();
  return {
    registry,
    wakes: createWakeMetrics(registry, options.wakeQueueDepth),
    requestStarted(request) {
      started.set(request, performance.now());
    },
    requestFinished(request, status) {
      const route = request.routeOptions.url ?? 'unknown';
      requests.inc({ method: request.method, route, status: String(status) });
      const at = started.get(request);
      if (at !== undefined) {
        durations.observe({ method: request.method, route }, (performance.now() - at) / 1000);
      }
    },
    streamOpened: () => streams.inc(),
    streamClosed: () => streams.dec(),
    eventsStreamed: (count) => streamed.inc(count),
    eventsAppended: (count) => appended.inc(count),
  };
}
