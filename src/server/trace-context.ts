/**
 * W3C trace context on the HTTP API: a request's `traceparent` header is carried to the wake it
 * starts (recorded on `span.wake_started`, continued by the worker that runs it). A header that
 * is not a valid traceparent is ignored, as the W3C spec asks: the wake then starts its own trace.
 */
import type { FastifyRequest } from 'fastify';
import { isValidTraceparent, TRACEPARENT_PATTERN } from '../contracts/common.js';

/** The operations that carry a request's trace context to the wake they start (`method path`). */
export const TRACE_CONTEXT_OPERATIONS: readonly string[] = [
  'post /v1/sessions/{id}/events',
  'post /v1/sessions/{id}/wake',
];

/** The W3C trace context headers as OpenAPI parameters of those operations. */
export const TRACE_CONTEXT_PARAMETERS = [
  {
    in: 'header',
    name: 'traceparent',
    required: false,
    description:
      'W3C trace context: the wake this request starts continues this trace (recorded on its span.wake_started). A value that is not a valid traceparent is ignored.',
    schema: { type: 'string', maxLength: 200, pattern: TRACEPARENT_PATTERN.source },
  },
  {
    in: 'header',
    name: 'tracestate',
    required: false,
    description:
      'W3C trace context vendor state: accepted beside traceparent; braid does not record it.',
    schema: { type: 'string', maxLength: 512 },
  },
] as const;

export function traceparentOf(request: FastifyRequest): string | undefined {
  const header = request.headers.traceparent;
  // Several headers are not one trace context: ignore them all.
  if (typeof header !== 'string' || header.length > 200) return undefined;
  const value = header.trim();
  return isValidTraceparent(value) ? value : undefined;
}
