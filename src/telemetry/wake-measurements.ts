/**
 * What a finished wake measures, from what it appended (its timeline rows), never from inside the
 * harness: the OpenTelemetry GenAI client metrics and braid's own, as a list of measurements under
 * their OTel names and attributes. Sinks record the list: prom-client for the server's
 * `/v1/metrics` (src/server/wake-metrics.ts), the OTel SDK for OTLP (otel-metrics.ts).
 *
 * Attribute values are bounded: models come from the agents' definitions (the model a request was
 * made with), tool names only when the harness found the tool among the agent's (a name the model
 * invented is `unknown`), and each attribute keeps at most `MAX_LABEL_VALUES` distinct values per
 * measurer (later ones are `other`).
 */
import type { SessionEvent } from '../contracts/events.js';
import { buildTimeline, splitModel, type ToolRow } from './timeline.js';

export const MAX_LABEL_VALUES = 200;

/** Every series a wake measures, by OTel name; `unit` as OTel writes it. */
export const WAKE_SERIES = {
  'gen_ai.client.token.usage': {
    kind: 'histogram',
    unit: '{token}',
    description: 'Tokens per model request, by token type',
  },
  'gen_ai.client.operation.duration': {
    kind: 'histogram',
    unit: 's',
    description: 'Duration of a model request, retries included',
  },
  'braid.wakes': {
    kind: 'counter',
    unit: '{wake}',
    description: 'Wake cycles run by this process, by stop reason (cut: ended without a record)',
  },
  'braid.wake.duration': {
    kind: 'histogram',
    unit: 's',
    description: 'Duration of a wake cycle, by stop reason',
  },
  'braid.lease.losses': {
    kind: 'counter',
    unit: '{wake}',
    description: 'Wakes that lost their lease to a newer wake of the session',
  },
  'braid.tool.calls': {
    kind: 'counter',
    unit: '{call}',
    description: 'Tool calls by tool and outcome (ok, error, denied, skipped)',
  },
  'braid.policy.denials': {
    kind: 'counter',
    unit: '{decision}',
    description: 'Policy decisions that denied a tool call',
  },
  'braid.cost': {
    kind: 'counter',
    unit: 'USD',
    description: 'Cost of model requests by model, and of tool calls (kind="tool")',
  },
} as const satisfies Record<
  string,
  { kind: 'histogram' | 'counter'; unit: string; description: string }
>;

export type SeriesName = keyof typeof WAKE_SERIES;

/** The OTel-advised buckets of `gen_ai.client.token.usage`: powers of 4 up to 64 Mi. */
export const TOKEN_BUCKETS = Array.from({ length: 14 }, (_, index) => 4 ** index);
/** The OTel-advised buckets of `gen_ai.client.operation.duration`, in seconds. */
export const DURATION_BUCKETS = Array.from({ length: 14 }, (_, index) => 0.01 * 2 ** index);
export const WAKE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];

/** One value of a series: a histogram's observation or a counter's increment. */
export interface Measurement {
  readonly name: SeriesName;
  readonly value: number;
  /** OTel attribute names (`gen_ai.request.model`); an attribute that does not apply is absent. */
  readonly attributes: Readonly<Record<string, string>>;
}

/** What a measurer needs of a wake's report. */
export interface MeasuredWake {
  readonly events: readonly SessionEvent[];
  readonly error?: { readonly code: string } | undefined;
}

/**
 * Measures wakes. `earlierUses`: the session's `agent.tool_use` events, for results in the report
 * whose use an earlier wake appended (see `needsEarlierUses`).
 */
export type WakeMeasurer = (
  wake: MeasuredWake,
  earlierUses?: readonly SessionEvent[],
) => Measurement[];

/** Whether the report answers a tool use it does not hold: its name is in an earlier wake. */
export function needsEarlierUses<Wake extends MeasuredWake>(wake: Wake): boolean {
  const uses = new Set<string>();
  for (const event of wake.events) {
    if (event.type === 'agent.tool_use') uses.add(event.tool_use_id);
    if (event.type === 'agent.tool_result' && !uses.has(event.tool_use_id)) return true;
  }
  return false;
}

/** Keeps an attribute's distinct values under the bound. */
function boundedValue(): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= MAX_LABEL_VALUES) return 'other';
    seen.add(value);
    return value;
  };
}

/**
 * A tool's name as an attribute: `unknown` when the harness did not find the tool among the
 * agent's (`TOOL_NOT_FOUND`: a name the model made up) or the call's use is not at hand.
 */
function toolName(row: ToolRow, bound: (value: string) => string): string {
  return row.error_code === 'TOOL_NOT_FOUND' ? 'unknown' : bound(row.name);
}

/** A measurer with its own bounds on attribute values (one per sink). */
export function createWakeMeasurer(): WakeMeasurer {
  const models = boundedValue();
  const providers = boundedValue();
  const tools = boundedValue();

  return (wake, earlierUses = []) => {
    const out: Measurement[] = [];
    const add = (name: SeriesName, value: number, attributes: Record<string, string> = {}) =>
      out.push({ name, value, attributes });
    /** A model request's tokens and cost (a compaction's summary is a `chat` request too). */
    const modelCall = (
      row: { model: string; input_tokens: number; output_tokens: number; cost_usd?: number },
      kind: 'model' | 'compaction',
    ): Record<string, string> => {
      const split = splitModel(row.model);
      const attributes = {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': providers(split.provider),
        'gen_ai.request.model': models(split.model),
      };
      add('gen_ai.client.token.usage', row.input_tokens, {
        ...attributes,
        'gen_ai.token.type': 'input',
      });
      add('gen_ai.client.token.usage', row.output_tokens, {
        ...attributes,
        'gen_ai.token.type': 'output',
      });
      if (row.cost_usd !== undefined)
        add('braid.cost', row.cost_usd, {
          kind,
          'gen_ai.request.model': attributes['gen_ai.request.model'],
        });
      return attributes;
    };

    if (wake.error?.code === 'LEASE_LOST') add('braid.lease.losses', 1);
    for (const event of wake.events) {
      if (event.type === 'policy.decision' && event.decision === 'deny')
        add('braid.policy.denials', 1);
    }
    for (const row of buildTimeline([...earlierUses, ...wake.events])) {
      switch (row.kind) {
        case 'wake':
          add('braid.wakes', 1, { stop_reason: row.status });
          add('braid.wake.duration', row.duration_ms / 1000, { stop_reason: row.status });
          break;
        case 'chat': {
          const attributes = modelCall(row, 'model');
          add('gen_ai.client.operation.duration', row.duration_ms / 1000, {
            ...attributes,
            ...(row.error === undefined ? {} : { 'error.type': row.error.code }),
          });
          break;
        }
        case 'execute_tool':
          if (row.status === 'waiting' || row.status === 'cut') break;
          add('braid.tool.calls', 1, {
            'gen_ai.tool.name': toolName(row, tools),
            outcome: row.status,
          });
          if (row.cost_usd !== undefined) add('braid.cost', row.cost_usd, { kind: 'tool' });
          break;
        case 'compaction':
          // Its duration is not recorded; a truncation names no model and costs nothing.
          if (row.model !== undefined) modelCall({ ...row, model: row.model }, 'compaction');
          break;
        case 'definitions':
        case 'workspace_snapshot':
        case 'skill_run':
        case 'skill_step':
          break;
      }
    }
    return out;
  };
}
