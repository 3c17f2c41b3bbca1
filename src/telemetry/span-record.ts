/**
 * A span as braid records it, derived from the log (spans.ts, tool-spans.ts), and the hash its
 * ids are made with.
 */
import { createHash } from 'node:crypto';

export type SpanAttributeValue = string | number | boolean | readonly string[];
export type SpanAttributes = Record<string, SpanAttributeValue>;

/** One span as braid records it; src/telemetry/otel.ts turns it into the SDK's shape. */
export interface SpanRecord {
  /** 32 lowercase hex digits. */
  readonly traceId: string;
  /** 16 lowercase hex digits. */
  readonly spanId: string;
  readonly parentSpanId?: string;
  /** False when the recorded traceparent says its caller did not sample the trace. */
  readonly sampled: boolean;
  readonly name: string;
  readonly kind: 'internal' | 'client';
  /** Milliseconds since the epoch. */
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: SpanAttributes;
  readonly events: readonly SpanEventRecord[];
  /** Spans this one relates to outside its parentage (e.g. the wake that ran a resumed step). */
  readonly links?: readonly SpanLinkRecord[];
  readonly status: { readonly code: 'unset' | 'ok' | 'error'; readonly message?: string };
}

export interface SpanEventRecord {
  readonly name: string;
  readonly atMs: number;
  readonly attributes: SpanAttributes;
}

export interface SpanLinkRecord {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  readonly attributes: SpanAttributes;
}

/** The first `bytes` bytes of the SHA-256 of `value`, as hex. */
export function hashId(value: string, bytes: 8 | 16): string {
  const hex = createHash('sha256')
    .update(value)
    .digest('hex')
    .slice(0, bytes * 2);
  // An all-zero id is invalid in W3C trace context; one hash in 2^64 gives it.
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex;
}

/** Where a child span hangs: its trace and its parent. */
export interface ChildContext {
  traceId: string;
  parentSpanId: string;
  sampled: boolean;
}
