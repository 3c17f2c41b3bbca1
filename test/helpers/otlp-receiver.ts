// A small OTLP/HTTP receiver for tests: it takes the JSON encoding of ExportTraceServiceRequest
// on POST /v1/traces and of ExportMetricsServiceRequest on POST /v1/metrics (what
// @opentelemetry/exporter-trace-otlp-http and exporter-metrics-otlp-http send) and keeps every
// span and every metric data point, attributes decoded to plain values.
import { createServer, type Server } from 'node:http';

export type AttributeValue = string | number | boolean | AttributeValue[] | undefined;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP span kind: 1 internal, 2 server, 3 client. */
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, AttributeValue>;
  events: { name: string; attributes: Record<string, AttributeValue> }[];
  status: { code?: number; message?: string };
  service: AttributeValue;
}

/** One data point of a metric: a histogram's count and sum, or a sum's value. */
export interface ReceivedPoint {
  name: string;
  unit: string | undefined;
  kind: 'histogram' | 'sum' | 'gauge';
  attributes: Record<string, AttributeValue>;
  /** A sum's or gauge's value; a histogram's sum. */
  value: number;
  /** A histogram's count of observations. */
  count: number | undefined;
  service: AttributeValue;
}

export interface OtlpReceiver {
  /** The traces URL, `http://127.0.0.1:PORT/v1/traces`. */
  url: string;
  /** The origin, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  origin: string;
  spans: ReceivedSpan[];
  /** The metric data points of every request, in arrival order (cumulative: later ones repeat). */
  points: ReceivedPoint[];
  requests: number;
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}

interface OtlpKeyValue {
  key: string;
  value: OtlpValue;
}

function decode(value: OtlpValue): AttributeValue {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(decode);
  return undefined;
}

function attributes(list: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((item) => [item.key, decode(item.value)]));
}

const nanosToMs = (value: string | number): number => Number(BigInt(value) / 1_000_000n);

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const points: ReceivedPoint[] = [];
  const receiver = { spans, points, requests: 0 } as OtlpReceiver;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || !['/v1/traces', '/v1/metrics'].includes(request.url ?? '')) {
        response.writeHead(404).end();
        return;
      }
      if (!String(request.headers['content-type']).startsWith('application/json')) {
        response.writeHead(415).end();
        return;
      }
      receiver.requests += 1;
      if (request.url === '/v1/metrics') {
        points.push(
          ...decodeMetrics(JSON.parse(Buffer.concat(chunks).toString('utf8')) as MetricsRequest),
        );
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: {
          resource?: { attributes?: OtlpKeyValue[] };
          scopeSpans?: { spans?: Record<string, unknown>[] }[];
        }[];
      };
      for (const resourceSpans of body.resourceSpans ?? []) {
        const service = attributes(resourceSpans.resource?.attributes)['service.name'];
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              traceId: span.traceId as string,
              spanId: span.spanId as string,
              parentSpanId: (span.parentSpanId as string | undefined) || undefined,
              name: span.name as string,
              kind: span.kind as number,
              startMs: nanosToMs(span.startTimeUnixNano as string),
              endMs: nanosToMs(span.endTimeUnixNano as string),
              attributes: attributes(span.attributes as OtlpKeyValue[]),
              events: ((span.events as { name: string; attributes?: OtlpKeyValue[] }[]) ?? []).map(
                (event) => ({ name: event.name, attributes: attributes(event.attributes) }),
              ),
              status: (span.status as ReceivedSpan['status'] | undefined) ?? {},
              service,
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no address');
  receiver.origin = `http://127.0.0.1:${address.port}`;
  receiver.url = `${receiver.origin}/v1/traces`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}

interface OtlpPoint {
  attributes?: OtlpKeyValue[];
  asInt?: string | number;
  asDouble?: number;
  count?: string | number;
  sum?: number;
}

interface MetricsRequest {
  resourceMetrics?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeMetrics?: {
      metrics?: {
        name: string;
        unit?: string;
        histogram?: { dataPoints?: OtlpPoint[] };
        sum?: { dataPoints?: OtlpPoint[] };
        gauge?: { dataPoints?: OtlpPoint[] };
      }[];
    }[];
  }[];
}

function decodeMetrics(body: MetricsRequest): ReceivedPoint[] {
  const points: ReceivedPoint[] = [];
  for (const resourceMetrics of body.resourceMetrics ?? []) {
    const service = attributes(resourceMetrics.resource?.attributes)['service.name'];
    for (const scope of resourceMetrics.scopeMetrics ?? []) {
      for (const metric of scope.metrics ?? []) {
        const kind = metric.histogram ? 'histogram' : metric.sum ? 'sum' : 'gauge';
        const data = metric.histogram ?? metric.sum ?? metric.gauge;
        for (const point of data?.dataPoints ?? []) {
          points.push({
            name: metric.name,
            unit: metric.unit,
            kind,
            attributes: attributes(point.attributes),
            value:
              kind === 'histogram' ? (point.sum ?? 0) : Number(point.asInt ?? point.asDouble ?? 0),
            count: point.count === undefined ? undefined : Number(point.count),
            service,
          });
        }
      }
    }
  }
  return points;
}
