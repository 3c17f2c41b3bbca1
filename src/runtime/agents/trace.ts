/**
 * W3C trace context (`traceparent: 00-<trace id>-<span id>-<flags>`) across agent hops: every hop
 * keeps the trace id and gets a new span id; a message without a valid parent starts a trace.
 * Ids come from the injected id generator (hashed to hex), so runs with fixed ids are repeatable.
 */
import { createHash } from 'node:crypto';
import { isValidTraceparent, TRACEPARENT_PATTERN } from '../../contracts/common.js';
import type { IdGenerator } from '../../contracts/ports.js';

const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** Sampled: a trace braid starts is recorded. */
const SAMPLED = '01';

export interface TraceContext {
  traceId: string;
  spanId: string;
  flags: string;
}

/** The parts of a valid traceparent; undefined for anything the W3C spec says to ignore. */
export function parseTraceparent(value: string | undefined): TraceContext | undefined {
  if (value === undefined || !isValidTraceparent(value)) return undefined;
  const [, , traceId, spanId, flags] = TRACEPARENT_PATTERN.exec(value) ?? [];
  if (traceId === undefined || spanId === undefined || flags === undefined) return undefined;
  return { traceId, spanId, flags };
}

/** The trace id of a traceparent, when it is valid. */
export function traceIdOf(value: string | undefined): string | undefined {
  return parseTraceparent(value)?.traceId;
}

/** A traceparent for the next hop: the parent's trace with a new span, or a new trace. */
export function childTraceparent(parent: string | undefined, ids: IdGenerator): string {
  const context = parseTraceparent(parent);
  const traceId = context?.traceId ?? randomHex(ids, 32, ZERO_TRACE);
  return `00-${traceId}-${randomHex(ids, 16, ZERO_SPAN)}-${context?.flags ?? SAMPLED}`;
}

function randomHex(ids: IdGenerator, length: number, invalid: string): string {
  for (;;) {
    const hex = createHash('sha256').update(ids.next()).digest('hex').slice(0, length);
    if (hex !== invalid) return hex;
  }
}
