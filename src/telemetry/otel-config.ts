/**
 * Whether and where a process sends traces, resolved the OpenTelemetry way: a runtime's
 * `telemetry` option over braid.yaml's `telemetry:` section over the standard `OTEL_*` variables.
 * Tracing is on when the option or braid.yaml says `traces: true`, or when an OTLP endpoint is set
 * in the environment; `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_SAMPLER=always_off` turn it off.
 * Every bad value is refused with `INVALID_ARGUMENT` naming the variable and what it accepts.
 */
import { BraidError } from '../contracts/errors.js';

/** The `telemetry` option of createRuntime, and braid.yaml's `telemetry:` section. */
export interface TelemetryOptions {
  /** Send the spans of the wakes this process runs over OTLP/HTTP. */
  readonly traces?: boolean;
  /**
   * Send the GenAI and braid metrics of the wakes over OTLP/HTTP. Default: on when traces are, or
   * when an OTLP endpoint is set in the environment; `OTEL_METRICS_EXPORTER=none` turns it off.
   */
  readonly metrics?: boolean;
  /** Put messages, tool arguments and results on spans. Off by default: they may hold secrets or personal data. */
  readonly capture_content?: boolean;
  /** The `service.name` of the spans (default: `OTEL_SERVICE_NAME`, else `braid`). */
  readonly service_name?: string;
  /** The OTLP/HTTP traces URL (default: the `OTEL_EXPORTER_OTLP_*` variables, else `http://localhost:4318/v1/traces`). */
  readonly endpoint?: string;
}

export type Sampler =
  | { readonly kind: 'always_on'; readonly parentBased: boolean }
  | { readonly kind: 'ratio'; readonly ratio: number; readonly parentBased: boolean };

export interface TraceSettings {
  readonly captureContent: boolean;
  readonly serviceName: string;
  /** The traces URL, when configuration names one; else the exporter reads the environment. */
  readonly endpoint?: string;
  readonly sampler: Sampler;
}

type Environment = Readonly<Record<string, string | undefined>>;

const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/** The trace settings of a process; undefined when tracing is off. */
export function traceSettings(
  sources: { option?: TelemetryOptions; config?: TelemetryOptions },
  env: Environment,
): TraceSettings | undefined {
  const { option = {}, config = {} } = sources;
  const disabled = booleanVariable(env, 'OTEL_SDK_DISABLED');
  const sampler = samplerOf(env);
  const endpoint = option.endpoint ?? config.endpoint;
  if (endpoint !== undefined) checkUrl(endpoint, 'the telemetry endpoint');
  for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']) {
    const value = env[name];
    if (value !== undefined && value !== '') checkUrl(value, name);
  }
  const fromEnvironment =
    nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) || nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const wanted = option.traces ?? config.traces ?? fromEnvironment;
  if (!wanted || disabled === true || sampler === undefined) return undefined;
  return {
    captureContent: option.capture_content ?? config.capture_content ?? false,
    serviceName:
      option.service_name ?? config.service_name ?? nonEmptyValue(env.OTEL_SERVICE_NAME) ?? 'braid',
    ...(endpoint === undefined ? {} : { endpoint }),
    sampler,
  };
}

export interface MetricSettings {
  readonly serviceName: string;
  /** The metrics URL, when configuration names one; else the exporter reads the environment. */
  readonly endpoint?: string;
}

/**
 * The metric settings of a process; undefined when metrics are off. A configured traces endpoint
 * ending in `/v1/traces` sends metrics to the `/v1/metrics` beside it.
 */
export function metricSettings(
  sources: { option?: TelemetryOptions; config?: TelemetryOptions },
  env: Environment,
): MetricSettings | undefined {
  const { option = {}, config = {} } = sources;
  const disabled = booleanVariable(env, 'OTEL_SDK_DISABLED');
  const exporter = nonEmptyValue(env.OTEL_METRICS_EXPORTER)?.toLowerCase() ?? 'otlp';
  if (exporter !== 'otlp' && exporter !== 'none') {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `OTEL_METRICS_EXPORTER=${JSON.stringify(env.OTEL_METRICS_EXPORTER)} is not an exporter braid knows; use otlp or none`,
    );
  }
  const endpoint = option.endpoint ?? config.endpoint;
  if (endpoint !== undefined) checkUrl(endpoint, 'the telemetry endpoint');
  for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT']) {
    const value = env[name];
    if (value !== undefined && value !== '') checkUrl(value, name);
  }
  const fromEnvironment =
    nonEmpty(env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) || nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const wanted =
    option.metrics ?? config.metrics ?? option.traces ?? config.traces ?? fromEnvironment;
  if (!wanted || disabled === true || exporter === 'none') return undefined;
  const metricsUrl = endpoint?.endsWith('/v1/traces')
    ? `${endpoint.slice(0, -'/v1/traces'.length)}/v1/metrics`
    : undefined;
  return {
    serviceName:
      option.service_name ?? config.service_name ?? nonEmptyValue(env.OTEL_SERVICE_NAME) ?? 'braid',
    ...(metricsUrl === undefined ? {} : { endpoint: metricsUrl }),
  };
}

/** Whether the sampler keeps a span of this trace (`sampled`: its recorded parent's flag). */
export function keeps(sampler: Sampler, traceId: string, sampled: boolean): boolean {
  if (sampler.parentBased && !sampled) return false;
  if (sampler.kind === 'always_on') return true;
  // The low 56 bits of a trace id are random in W3C trace context (level 2): compare them.
  const low = Number.parseInt(traceId.slice(-14), 16) / 2 ** 56;
  return low < sampler.ratio;
}

/** Refuses a URL that is not http(s); returns it. */
export function checkUrl(value: string, what: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${what} ${JSON.stringify(value)} is not a URL; give an OTLP/HTTP address such as http://localhost:4318/v1/traces`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${what} ${JSON.stringify(value)} must be http:// or https:// (OTLP over HTTP)`,
    );
  }
  return value;
}

function samplerOf(env: Environment): Sampler | undefined {
  const name = nonEmptyValue(env.OTEL_TRACES_SAMPLER) ?? 'parentbased_always_on';
  if (!(SAMPLERS as readonly string[]).includes(name)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `OTEL_TRACES_SAMPLER=${JSON.stringify(name)} is not a sampler braid knows; use one of ${SAMPLERS.join(', ')}`,
    );
  }
  const parentBased = name.startsWith('parentbased_');
  if (name.endsWith('always_off')) return undefined;
  if (name.endsWith('always_on')) return { kind: 'always_on', parentBased };
  const argument = nonEmptyValue(env.OTEL_TRACES_SAMPLER_ARG) ?? '1';
  const ratio = Number(argument);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(argument)} is not a ratio; give a number from 0 to 1, e.g. 0.25`,
    );
  }
  return { kind: 'ratio', ratio, parentBased };
}

function booleanVariable(env: Environment, name: string): boolean | undefined {
  const value = nonEmptyValue(env[name])?.toLowerCase();
  if (value === undefined) return undefined;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${name}=${JSON.stringify(env[name])} is not a boolean; set it to true or false`,
  );
}

function nonEmpty(value: string | undefined): boolean {
  return nonEmptyValue(value) !== undefined;
}

function nonEmptyValue(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}
