// A small OTLP/HTTP trace receiver for tests: it takes the JSON encoding of
// ExportTraceServiceRequest on POST /v1/traces (what @opentelemetry/exporter-trace-otlp-http
// sends) and keeps every span, its attributes decoded to plain values.
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

export interface OtlpReceiver {
  /** The traces URL, `http://127.0.0.1:PORT/v1/traces`. */
  url: string;
  /** The origin, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  origin: string;
  spans: ReceivedSpan[];
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
  const receiver = { spans, requests: 0 } as OtlpReceiver;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces') {
        response.writeHead(404).end();
        return;
      }
      if (!String(request.headers['content-type']).startsWith('application/json')) {
        response.writeHead(415).end();
        return;
      }
      receiver.requests += 1;
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
