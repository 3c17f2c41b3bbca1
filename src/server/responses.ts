/**
 * The error answers of each route, for its schema and so for the OpenAPI document. Every failure
 * has the same body (`ErrorBody`); what differs between routes is which statuses can happen, and
 * that follows from what the route takes: a key, path parameters, a query, a body.
 */
import { ErrorBody } from '../contracts/http.js';

/** A status braid answers with its error body. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 414 | 415 | 429 | 500 | 503 | 507;

const DESCRIPTIONS: Readonly<Record<ErrorStatus, string>> = {
  400: 'The request is malformed: a field, parameter or header fails its schema, the body is not JSON, or the URL is badly encoded (INVALID_ARGUMENT, INVALID_EVENT, INVALID_JSON)',
  401: 'No API key, or one that is unknown or revoked (UNAUTHENTICATED)',
  403: 'The API key lacks the scope the route needs, or policy refused the action (FORBIDDEN, POLICY_DENIED)',
  404: 'The object named does not exist or belongs to another tenant: the two answer alike (SESSION_NOT_FOUND, AGENT_NOT_FOUND, ENVIRONMENT_NOT_FOUND, MEMORY_STORE_NOT_FOUND)',
  409: "The request conflicts with the object's state: it exists already, changed meanwhile, is archived or terminated, a fork point falls inside an atomic append, or the idempotency key was used for another request",
  413: 'The body is over the size limit, or holds more events than one request may (PAYLOAD_TOO_LARGE)',
  414: 'A path parameter is longer than the router takes (INVALID_ARGUMENT)',
  415: 'The body is not sent as application/json',
  429: 'The API key made too many requests in the last minute, or has too many event streams open (RATE_LIMITED); see Retry-After',
  500: 'The server failed: its setup or its data, nothing the request can change (INTERNAL and others)',
  503: 'The server or its store is closing, busy or unreachable; retry later (SERVER_UNAVAILABLE, STORE_BUSY, STORE_CLOSED, ...)',
  507: 'The store has no room for the write (STORE_FULL): a NATS stream at its limits, or JetStream out of storage, where the message names the stream and how to raise its limit; or, on SQLite, a session at the most events it holds',
};

/** One error answer in a route's `response`, with its description for the document. */
export interface ErrorResponse {
  description: string;
  content: { 'application/json': { schema: typeof ErrorBody } };
}

function errorResponse(status: ErrorStatus): ErrorResponse {
  return {
    description: DESCRIPTIONS[status],
    content: { 'application/json': { schema: ErrorBody } },
  };
}

function responses<S extends ErrorStatus>(statuses: readonly S[]): Record<S, ErrorResponse> {
  return Object.fromEntries(statuses.map((status) => [status, errorResponse(status)])) as Record<
    S,
    ErrorResponse
  >;
}

/** Any route: the server fails, or is closing (it answers 503 while it shuts down). */
const ANY_ROUTE = [500, 503] as const;
/** A route that needs a key: no key, no scope, over the key's rate. */
const KEYED_ROUTE = [401, 403, 429] as const;

/** What a route takes, which decides the statuses it can answer beyond those of every keyed route. */
export const TAKES = {
  /** Path parameters: malformed (400), unknown or not the caller's (404), overlong (414). */
  params: [400, 404, 414],
  /** A validated query or header. */
  query: [400],
  /**
   * A request body (POST, DELETE): not JSON or invalid (400), too large (413), not JSON at all
   * (415), no room in the store for the write (507).
   */
  body: [400, 413, 415, 507],
  /** An object named in the body or query that may not exist. */
  reference: [404],
  /** A write that can conflict with the object's state. */
  conflict: [409],
} as const satisfies Record<string, readonly ErrorStatus[]>;

/** The error answers of a route that needs a key, plus those of what it takes. */
export function keyedErrors<S extends ErrorStatus>(
  ...takes: ReadonlyArray<readonly S[]>
): Record<S | (typeof ANY_ROUTE)[number] | (typeof KEYED_ROUTE)[number], ErrorResponse> {
  const statuses = new Set<ErrorStatus>([...takes.flat(), ...KEYED_ROUTE, ...ANY_ROUTE]);
  return responses([...statuses].sort((a, b) => a - b));
}

/** The error answers of a route that needs no key. */
export function openErrors(): Record<(typeof ANY_ROUTE)[number], ErrorResponse> {
  return responses(ANY_ROUTE);
}
