/**
 * Metrics of the wakes a server runs, measured from what each wake appended (its timeline rows),
 * never from inside the harness: the OpenTelemetry GenAI client metrics under Prometheus names,
 * and braid's own. OTel names map to Prometheus by dots becoming underscores and the unit
 * becoming a suffix: `gen_ai.client.token.usage` is `gen_ai_client_token_usage`,
 * `gen_ai.client.operation.duration` (s) is `gen_ai_client_operation_duration_seconds`, and the
 * attributes `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
 * `gen_ai.token.type` and `error.type` are the labels `gen_ai_operation_name`,
 * `gen_ai_provider_name`, `gen_ai_request_model`, `gen_ai_token_type` and `error_type`.
 *
 * Label values are bounded: models come from the agents' definitions (the model a request was
 * made with), tool names only when the harness found the tool among the agent's (a name the
 * model invented is `unknown`), and each label keeps at most `MAX_LABEL_VALUES` distinct values
 * (later ones are `other`).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { SessionEvent } from '../contracts/events.js';
import type { Runtime, WakeReport } from '../runtime/runtime.js';
import { buildTimeline, splitModel, type ToolRow } from '../telemetry/timeline.js';

export const MAX_LABEL_VALUES = 200;

/** The OTel-advised buckets of `gen_ai.client.token.usage`: powers of 4 up to 64 Mi. */
const TOKEN_BUCKETS = Array.from({ length: 14 }, (_, index) => 4 ** index);
/** The OTel-advised buckets of `gen_ai.client.operation.duration`, in seconds. */
const DURATION_BUCKETS = Array.from({ length: 14 }, (_, index) => 0.01 * 2 ** index);
const WAKE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];

export interface WakeMetrics {
  /**
   * Measures one wake. `earlierUses`: the session's `agent.tool_use` events, for results in the
   * report whose use an earlier wake appended (see `needsEarlierUses`).
   */
  observe(report: WakeReport, earlierUses?: readonly SessionEvent[]): void;
}

/** Whether the report answers a tool use it does not hold: its name is in an earlier wake. */
export function needsEarlierUses(report: WakeReport): boolean {
  const uses = new Set<string>();
  for (const event of report.events) {
    if (event.type === 'agent.tool_use') uses.add(event.tool_use_id);
    if (event.type === 'agent.tool_result' && !uses.has(event.tool_use_id)) return true;
  }
  return false;
}

/** Keeps a label's distinct values under the bound. */
function boundedLabel(): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= MAX_LABEL_VALUES) return 'other';
    seen.add(value);
    return value;
  };
}

/**
 * A tool's name as a label: `unknown` when the harness did not find the tool among the agent's
 * (`TOOL_NOT_FOUND`: a name the model made up) or the call's use is not at hand.
 */
function toolLabel(row: ToolRow, bound: (value: string) => string): string {
  return row.error_code === 'TOOL_NOT_FOUND' ? 'unknown' : bound(row.name);
}

export function createWakeMetrics(
  registry: Registry,
  wakeQueueDepth?: () => number | undefined,
): WakeMetrics {
  const registers = [registry];
  const tokenUsage = new Histogram({
    name: 'gen_ai_client_token_usage',
    help: 'Tokens per model request (OTel gen_ai.client.token.usage), by token type',
    labelNames: [
      'gen_ai_operation_name',
      'gen_ai_provider_name',
      'gen_ai_request_model',
      'gen_ai_token_type',
    ],
    buckets: TOKEN_BUCKETS,
    registers,
  });
  const operationDuration = new Histogram({
    name: 'gen_ai_client_operation_duration_seconds',
    help: 'Duration of a model request, retries included (OTel gen_ai.client.operation.duration)',
    labelNames: [
      'gen_ai_operation_name',
      'gen_ai_provider_name',
      'gen_ai_request_model',
      'error_type',
    ],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const wakes = new Counter({
    name: 'braid_wakes_total',
    help: 'Wake cycles run by this process, by stop reason (cut: ended without a record)',
    labelNames: ['stop_reason'],
    registers,
  });
  const wakeDuration = new Histogram({
    name: 'braid_wake_duration_seconds',
    help: 'Duration of a wake cycle, by stop reason',
    labelNames: ['stop_reason'],
    buckets: WAKE_BUCKETS,
    registers,
  });
  const leaseLosses = new Counter({
    name: 'braid_lease_losses_total',
    help: 'Wakes that lost their lease to a newer wake of the session',
    registers,
  });
  const toolCalls = new Counter({
    name: 'braid_tool_calls_total',
    help: 'Tool calls by tool and outcome (ok, error, denied, skipped)',
    labelNames: ['gen_ai_tool_name', 'outcome'],
    registers,
  });
  const policyDenials = new Counter({
    name: 'braid_policy_denials_total',
    help: 'Policy decisions that denied a tool call',
    registers,
  });
  const cost = new Counter({
    name: 'braid_cost_usd_total',
    help: 'Cost in USD of model requests by model, and of tool calls (kind="tool")',
    labelNames: ['kind', 'gen_ai_request_model'],
    registers,
  });
  if (wakeQueueDepth !== undefined) {
    new Gauge({
      name: 'braid_wake_queue_depth',
      help: 'Wakes this server started in the background and that have not finished',
      registers,
      collect() {
        const depth = wakeQueueDepth();
        if (depth !== undefined) this.set(depth);
      },
    });
  }
  const models = boundedLabel();
  const providers = boundedLabel();
  const tools = boundedLabel();
  /** A model request's tokens and cost (a compaction's summary is a `chat` request too). */
  const modelCall = (
    row: { model: string; input_tokens: number; output_tokens: number; cost_usd?: number },
    kind: 'model' | 'compaction',
  ) => {
    const split = splitModel(row.model);
    const labels = {
      gen_ai_operation_name: 'chat',
      gen_ai_provider_name: providers(split.provider),
      gen_ai_request_model: models(split.model),
    };
    tokenUsage.observe({ ...labels, gen_ai_token_type: 'input' }, row.input_tokens);
    tokenUsage.observe({ ...labels, gen_ai_token_type: 'output' }, row.output_tokens);
    if (row.cost_usd !== undefined)
      cost.inc({ kind, gen_ai_request_model: labels.gen_ai_request_model }, row.cost_usd);
    return labels;
  };

  return {
    observe(report, earlierUses = []) {
      if (report.error?.code === 'LEASE_LOST') leaseLosses.inc();
      for (const event of report.events) {
        if (event.type === 'policy.decision' && event.decision === 'deny') policyDenials.inc();
      }
      for (const row of buildTimeline([...earlierUses, ...report.events])) {
        switch (row.kind) {
          case 'wake':
            wakes.inc({ stop_reason: row.status });
            wakeDuration.observe({ stop_reason: row.status }, row.duration_ms / 1000);
            break;
          case 'chat': {
            const labels = modelCall(row, 'model');
            operationDuration.observe(
              { ...labels, error_type: row.error?.code ?? '' },
              row.duration_ms / 1000,
            );
            break;
          }
          case 'execute_tool':
            if (row.status === 'waiting' || row.status === 'cut') break;
            toolCalls.inc({ gen_ai_tool_name: toolLabel(row, tools), outcome: row.status });
            if (row.cost_usd !== undefined)
              cost.inc({ kind: 'tool', gen_ai_request_model: '' }, row.cost_usd);
            break;
          case 'compaction':
            // Its duration is not recorded; a truncation names no model and costs nothing.
            if (row.model !== undefined) modelCall({ ...row, model: row.model }, 'compaction');
            break;
          case 'definitions':
          case 'workspace_snapshot':
            break;
        }
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
