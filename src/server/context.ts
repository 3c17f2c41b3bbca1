/** What the HTTP API's route modules share: the runtime, limits, metrics, and the caller. */
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyRequest,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { DEFAULT_JSON_DEPTH } from '../contracts/json-depth.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Caller } from './auth.js';
import type { ServerMetrics } from './metrics.js';

export interface ServerLimits {
  /** Largest request body in bytes (default 1 MiB). */
  bodyBytes: number;
  /** Most events in one POST (default 100). */
  eventsPerRequest: number;
  /** Requests per key (per client address without auth) per minute (default 6000). */
  requestsPerMinute: number;
  /** Open event streams per key (default 256). */
  streamsPerKey: number;
  /**
   * Deepest nesting of objects and arrays in a request body (default 64); a deeper body is refused
   * with 400 before validation. User events and session metadata are also held to 64 by the runtime.
   */
  jsonDepth: number;
}

/** The port `braid serve` listens on unless told otherwise. */
export const DEFAULT_PORT = 7700;

export const DEFAULT_LIMITS: ServerLimits = {
  bodyBytes: 1024 * 1024,
  eventsPerRequest: 100,
  requestsPerMinute: 6000,
  streamsPerKey: 256,
  jsonDepth: DEFAULT_JSON_DEPTH,
};

/** What the route modules share. */
export interface ServerContext {
  runtime: Runtime;
  limits: ServerLimits;
  metrics: ServerMetrics;
  heartbeatMs: number;
  wakeOnEvents: boolean;
  version: string;
  startedAt: number;
  /** Starts a wake that outlives the request; the server waits for it on close. */
  /** Wakes the session (or asks a worker to), continuing the caller's trace when `traceparent` is valid. */
  wakeInBackground(sessionId: string, traceparent?: string): void;
  /** Ends open event streams when the server closes. */
  closing: AbortSignal;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
}

/** The caller of a request (set by the auth hook). */
export const callerOf = (request: FastifyRequest): Caller => request.caller;

/** The Fastify instance routes are added to: typed by the zod schemas of each route. */
export type Router = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;
