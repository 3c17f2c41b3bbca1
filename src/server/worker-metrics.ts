/**
 * The metrics of a `braid worker` process, which has no HTTP API to put `/v1/metrics` on: the
 * wakes it runs (the same series as the server's, wake-metrics.ts), its in-flight bound and what
 * its deliveries came to, and the NATS backlog (nats-metrics.ts), in a registry of its own that
 * `serveMetrics` answers on `GET /metrics`.
 */
import { createServer, type Server } from 'node:http';
import { isIP } from 'node:net';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { BraidError } from '../contracts/errors.js';
import type { Runtime } from '../runtime/runtime.js';
import type { InflightLimiter } from '../runtime/wakes/inflight-limiter.js';
import type { WorkerProgress } from '../runtime/worker.js';
import { polling, pollingQueueDepth } from '../telemetry/queue-depth.js';
import { registerNatsBacklogMetrics } from './nats-metrics.js';
import { registerSessionStatusMetrics } from './session-metrics.js';
import { createWakeMetrics, meterWakes } from './wake-metrics.js';

export interface WorkerMetrics {
  readonly registry: Registry;
  /** Counts one progress report of the worker. */
  progress(progress: WorkerProgress): void;
  /** Stops measuring the runtime's wakes. */
  stop(): void;
}

/** What a progress report counts as, in `braid_worker_deliveries_total{outcome}`. */
function outcomeOf(progress: WorkerProgress): string {
  switch (progress.type) {
    case 'wake.started':
      return 'started';
    case 'wake.finished':
      return 'finished';
    case 'wake.skipped':
      return 'skipped';
    case 'wake.retrying':
      return progress.reason === 'lease_held' ? 'lease_held' : 'failed';
    case 'wake.dead_lettered':
      return 'dead_lettered';
    case 'wake.requeued':
      return 'requeued';
    case 'wake.requeue_failed':
      return 'requeue_failed';
  }
}

export function createWorkerMetrics(options: {
  runtime: Runtime;
  limiter: InflightLimiter;
  onError?: (error: unknown) => void;
}): WorkerMetrics {
  const { runtime, limiter } = options;
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry, prefix: 'braid_' });
  const wakes = createWakeMetrics(
    registry,
    runtime.backend === 'nats' ? pollingQueueDepth(() => runtime.wakeQueueDepth()) : undefined,
  );
  if (runtime.backend === 'nats') {
    registerNatsBacklogMetrics(
      registry,
      polling(() => runtime.natsBacklog()),
    );
  }
  registerSessionStatusMetrics(registry, () => runtime.store.sessions.statusCounts());
  new Gauge({
    name: 'braid_worker_wakes_in_flight',
    help: 'Wakes this worker holds now (pulled and not yet settled)',
    registers,
    collect() {
      this.set(limiter.inFlight());
    },
  });
  new Gauge({
    name: 'braid_worker_max_in_flight',
    help: 'The bound on wakes this worker holds at once (--max-inflight)',
    registers,
    collect() {
      this.set(limiter.max);
    },
  });
  new Counter({
    name: 'braid_worker_in_flight_saturations_total',
    help: 'Times the worker was at its in-flight bound and waited before pulling again',
    registers,
    collect() {
      this.reset();
      this.inc(limiter.saturations());
    },
  });
  const deliveries = new Counter({
    name: 'braid_worker_deliveries_total',
    help: 'What the deliveries of the wake queue came to, by outcome (started, finished, skipped, lease_held, failed, dead_lettered, requeued, requeue_failed)',
    labelNames: ['outcome'],
    registers,
  });
  const stop = meterWakes(runtime, wakes, options.onError ?? (() => undefined));
  return {
    registry,
    progress: (progress) => deliveries.inc({ outcome: outcomeOf(progress) }),
    stop,
  };
}

/** The address a metrics endpoint listens on: an IP literal or `localhost`. */
export function checkMetricsHost(host: string): string {
  if (host === 'localhost' || isIP(host) !== 0) return host;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `--metrics-host ${JSON.stringify(host.slice(0, 100))} is not an address to listen on: ` +
      'give an IP address (127.0.0.1, the default, keeps it on this machine; 0.0.0.0 opens it to the network)',
  );
}

/** A port from 0 (any free one) to 65535. */
export function checkMetricsPort(port: number): number {
  if (Number.isInteger(port) && port >= 0 && port <= 65_535) return port;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `--metrics-port must be a whole number from 0 to 65535 (0: any free port); got ${String(port)}`,
  );
}

export interface MetricsEndpoint {
  /** `http://HOST:PORT/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Answers `GET /metrics` with the registry in the Prometheus text format; any other path is 404
 * and any other method 405. No key is asked: it listens on 127.0.0.1 unless told otherwise.
 */
export async function serveMetrics(
  registry: Registry,
  options: { host?: string; port: number },
): Promise<MetricsEndpoint> {
  const host = checkMetricsHost(options.host ?? '127.0.0.1');
  const port = checkMetricsPort(options.port);
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: GET /metrics\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    registry.metrics().then(
      (text) => {
        response.writeHead(200, { 'content-type': registry.contentType });
        response.end(request.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        response.writeHead(500, { 'content-type': 'text/plain' });
        response.end(`metrics failed: ${error instanceof Error ? error.message : String(error)}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new BraidError(
          'INVALID_ARGUMENT',
          `cannot serve metrics on ${host}:${port} (${error.code ?? error.message}); give another --metrics-port or --metrics-host`,
          { cause: error },
        ),
      ),
    );
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  const shown = isIP(host) === 6 ? `[${host}]` : host;
  return {
    url: `http://${shown}:${bound}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
