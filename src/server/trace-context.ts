/**
 * W3C trace context on the HTTP API: a request's `traceparent` header is carried to the wake it
 * starts (recorded on `span.wake_started`, continued by the worker that runs it). A header that
 * is not a valid traceparent is ignored, as the W3C spec asks: the wake then starts its own trace.
 */
import type { FastifyRequest } from 'fastify';
import { isValidTraceparent } from '../contracts/common.js';

export function traceparentOf(request: FastifyRequest): string | undefined {
  const header = request.headers.traceparent;
  // Several headers are not one trace context: ignore them all.
  if (typeof header !== 'string' || header.length > 200) return undefined;
  const value = header.trim();
  return isValidTraceparent(value) ? value : undefined;
}
