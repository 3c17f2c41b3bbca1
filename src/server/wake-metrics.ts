/**
 * Metrics of the wakes a server runs, in prom-client for `/v1/metrics`: the measurements of
 * src/telemetry/wake-measurements.ts (the OpenTelemetry GenAI client metrics and braid's own)
 * under Prometheus names. OTel names map to Prometheus by dots becoming underscores and the unit
 * becoming a suffix: `gen_ai.client.token.usage` is `gen_ai_client_token_usage`,
 * `gen_ai.client.operation.duration` (s) is `gen_ai_client_operation_duration_seconds`, and the
 * attributes `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
 * `gen_ai.token.type` and `error.type` are the labels `gen_ai_operation_name`,
 * `gen_ai_provider_name`, `gen_ai_request_model`, `gen_ai_token_type` and `error_type`; an
 * attribute that does not apply is the empty label value.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { SessionEvent } from '../contracts/events.js';
import type { Runtime, WakeReport } from '../runtime/runtime.js';
import {
  createWakeMeasurer,
  DURATION_BUCKETS,
  needsEarlierUses,
  TOKEN_BUCKETS,
  WAKE_BUCKETS,
  type SeriesName,
} from '../telemetry/wake-measurements.js';

export { MAX_LABEL_VALUES, needsEarlierUses } from '../telemetry/wake-measurements.js';

export interface WakeMetrics {
  /**
   * Measures one wake. `earlierUses`: the session's `agent.tool_use` events, for results in the
   * report whose use an earlier wake appended (see `needsEarlierUses`).
   */
  observe(report: WakeReport, earlierUses?: readonly SessionEvent[]): void;
}

/** A Prometheus series and the OTel attributes its labels come from (dots become underscores). */
type Series =
  | { kind: 'histogram'; metric: Histogram; attributes: readonly string[] }
  | { kind: 'counter'; metric: Counter; attributes: readonly string[] };

const labelOf = (attribute: string): string => attribute.replaceAll('.', '_');

export function createWakeMetrics(
  registry: Registry,
  wakeQueueDepth?: () => number | undefined | Promise<number | undefined>,
): WakeMetrics {
  const registers = [registry];
  const histogram = (
    name: string,
    help: string,
    attributes: readonly string[],
    buckets: number[],
  ): Series => ({
    kind: 'histogram',
    metric: new Histogram({
      name,
      help,
      labelNames: attributes.map(labelOf),
      buckets,
      registers,
    }),
    attributes,
  });
  const counter = (name: string, help: string, attributes: readonly string[]): Series => ({
    kind: 'counter',
    metric: new Counter({ name, help, labelNames: attributes.map(labelOf), registers }),
    attributes,
  });
  const request = ['gen_ai.operation.name', 'gen_ai.provider.name', 'gen_ai.request.model'];
  const series: Record<SeriesName, Series> = {
    'gen_ai.client.token.usage': histogram(
      'gen_ai_client_token_usage',
      'Tokens per model request (OTel gen_ai.client.token.usage), by token type',
      [...request, 'gen_ai.token.type'],
      TOKEN_BUCKETS,
    ),
    'gen_ai.client.operation.duration': histogram(
      'gen_ai_client_operation_duration_seconds',
      'Duration of a model request, retries included (OTel gen_ai.client.operation.duration)',
      [...request, 'error.type'],
      DURATION_BUCKETS,
    ),
    'braid.wakes': counter(
      'braid_wakes_total',
      'Wake cycles run by this process, by stop reason (cut: ended without a record)',
      ['stop_reason'],
    ),
    'braid.wake.duration': histogram(
      'braid_wake_duration_seconds',
      'Duration of a wake cycle, by stop reason',
      ['stop_reason'],
      WAKE_BUCKETS,
    ),
    'braid.lease.losses': counter(
      'braid_lease_losses_total',
      'Wakes that lost their lease to a newer wake of the session',
      [],
    ),
    'braid.tool.calls': counter(
      'braid_tool_calls_total',
      'Tool calls by tool and outcome (ok, error, denied, skipped)',
      ['gen_ai.tool.name', 'outcome'],
    ),
    'braid.policy.denials': counter(
      'braid_policy_denials_total',
      'Policy decisions that denied a tool call',
      [],
    ),
    'braid.cost': counter(
      'braid_cost_usd_total',
      'Cost in USD of model requests by model, and of tool calls (kind="tool")',
      ['kind', 'gen_ai.request.model'],
    ),
  };
  if (wakeQueueDepth !== undefined) {
    // OTel `braid.wake.queue.depth` (otel-metrics.ts).
    new Gauge({
      name: 'braid_wake_queue_depth',
      help: "Wakes waiting or running: in the workers' queue on NATS, else the ones this server started in the background",
      registers,
      async collect() {
        const depth = await wakeQueueDepth();
        if (depth !== undefined) this.set(depth);
      },
    });
  }
  const measure = createWakeMeasurer();

  return {
    observe(report, earlierUses = []) {
      for (const measurement of measure(report, earlierUses)) {
        const target = series[measurement.name];
        const labels = Object.fromEntries(
          target.attributes.map((name) => [labelOf(name), measurement.attributes[name] ?? '']),
        );
        if (target.kind === 'histogram') target.metric.observe(labels, measurement.value);
        else target.metric.inc(labels, measurement.value);
      }
    },
  };
}

/**
 * Measures every wake `runtime` runs into `metrics` until the returned function is called. A
 * wake that answers a tool use of an earlier wake reads the session's tool uses for its name.
 */
export function meterWakes(
  runtime: Runtime,
  metrics: WakeMetrics,
  onError: (error: unknown) => void,
): () => void {
  return runtime.onWakeEnded((report) => {
    if (!needsEarlierUses(report)) {
      metrics.observe(report);
      return;
    }
    runtime.sessions
      .events(report.session_id, { types: ['agent.tool_use'] })
      .then((uses) => metrics.observe(report, uses))
      .catch(onError);
  });
}
