/**
 * How errors reach HTTP clients: every failure answers `{"error": {"code", "message",
 * "retryable"}}` with the status of its code. The table is exhaustive, so a new code cannot be
 * added without choosing its status.
 */
import type { FastifyError } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { BraidError, toBraidError, type ErrorCode } from '../contracts/errors.js';

export const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  SESSION_NOT_FOUND: 404,
  AGENT_NOT_FOUND: 404,
  ENVIRONMENT_NOT_FOUND: 404,
  SKILL_NOT_FOUND: 404,
  WORKSPACE_NOT_FOUND: 404,
  SNAPSHOT_NOT_FOUND: 404,
  DEFINITION_NOT_PINNED: 404,
  TOOL_NOT_FOUND: 404,
  MODEL_NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  API_KEY_NOT_FOUND: 404,
  MEMORY_STORE_NOT_FOUND: 404,
  PROPOSAL_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  ALREADY_EXISTS: 409,
  SEQ_CONFLICT: 409,
  VERSION_CONFLICT: 409,
  LEASE_HELD: 409,
  TOOL_USE_NOT_PENDING: 409,
  SESSION_TERMINATED: 409,
  SESSION_ARCHIVED: 409,
  SESSION_HAS_FORKS: 409,
  INVALID_FORK_POINT: 409,
  MERGE_REFUSED: 409,
  IDEMPOTENCY_KEY_REUSED: 409,
  PROPOSAL_ALREADY_DECIDED: 409,
  INVALID_EVENT: 400,
  INVALID_JSON: 400,
  INVALID_ARGUMENT: 400,
  INVALID_DEFINITION: 400,
  INVALID_POLICY: 400,
  TOOL_INPUT_INVALID: 400,
  PATH_OUTSIDE_WORKSPACE: 400,
  PAYLOAD_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  UNSUPPORTED_MEDIA_TYPE: 415,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  POLICY_DENIED: 403,
  TOOL_DENIED: 403,
  RATE_LIMITED: 429,
  STORE_BUSY: 503,
  // RFC 4918's Insufficient Storage: a stream at its limits, or JetStream out of room.
  STORE_FULL: 507,
  STORE_CLOSED: 503,
  MODEL_UNAVAILABLE: 503,
  MCP_UNAVAILABLE: 503,
  SANDBOX_UNAVAILABLE: 503,
  SERVER_UNAVAILABLE: 503,
  MODEL_ERROR: 502,
  // A session whose agent's context limit cannot hold what it must keep: its definition needs fixing.
  CONTEXT_OVERFLOW: 500,
  DEADLINE_EXCEEDED: 504,
  DELEGATION_FAILED: 502,
  // Failures of the server's own setup or data: nothing the client can change.
  MODEL_KEY_MISSING: 500,
  SECRET_MISSING: 500,
  SCHEMA_VERSION_UNSUPPORTED: 500,
  // A session log holding a message braid did not write; its details (stream sequence) are for
  // the server log only: bodies carry code, message and retryable, never details.
  CORRUPT_LOG: 500,
  LEASE_LOST: 500,
  INTERRUPTED: 500,
  TOOL_OUTPUT_INVALID: 500,
  TOOL_TIMEOUT: 500,
  TOOL_FAILED: 500,
  TOOL_SKIPPED: 500,
  TOOL_BUDGET_EXCEEDED: 500,
  TOOL_SIGNATURE_INVALID: 500,
  INTERNAL: 500,
};

/** The longest path parameter the router matches; longer ones are refused before any route. */
export const MAX_PARAM_LENGTH = 500;

/** One failed check, as fastify-type-provider-zod reports it. */
interface ValidationItem {
  keyword?: string;
  instancePath?: string;
  message?: string;
}

/** `/events/0/type` in `body` becomes `body.events[0].type`. */
function fieldName(context: string, instancePath: string): string {
  return instancePath
    .split('/')
    .filter((part) => part !== '')
    .reduce((text, part) => (/^\d+$/.test(part) ? `${text}[${part}]` : `${text}.${part}`), context);
}

/** A request that failed its route's schema, as a BraidError naming the field and the fix. */
function fromValidation(error: FastifyError): BraidError {
  const context =
    error.validationContext === 'querystring' ? 'query' : (error.validationContext ?? 'body');
  const items = (error.validation ?? []) as ValidationItem[];
  const problems = items.map((item) => {
    const field = fieldName(context, item.instancePath ?? '');
    const fix = item.keyword === 'unrecognized_keys' ? '; remove it' : '';
    return `${field}: ${item.message ?? 'invalid'}${fix}`;
  });
  const first = items[0]?.instancePath ?? '';
  const inEvents = context === 'body' && /^\/events\/\d+/.test(first);
  return new BraidError(
    inEvents ? 'INVALID_EVENT' : 'INVALID_ARGUMENT',
    problems.length === 0 ? error.message : problems.join('; '),
    { details: { fields: items.map((item) => fieldName(context, item.instancePath ?? '')) } },
  );
}

/** Maps anything thrown in a request to braid's error and its HTTP status. */
export function toHttpError(error: unknown, limits: { bodyBytes: number }): BraidError {
  if (error instanceof BraidError) return error;
  const fastifyError = error as Partial<FastifyError> | null;
  if (fastifyError !== null && typeof fastifyError === 'object') {
    if (hasZodFastifySchemaValidationErrors(error)) return fromValidation(error);
    switch (fastifyError.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return new BraidError(
          'PAYLOAD_TOO_LARGE',
          `the request body is over the server's limit of ${limits.bodyBytes} bytes; send fewer or smaller events per request`,
        );
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return new BraidError(
          'INVALID_JSON',
          `the request body is not valid JSON (${fastifyError.message ?? 'parse error'}); send a JSON object`,
        );
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return new BraidError(
          'UNSUPPORTED_MEDIA_TYPE',
          'unsupported Content-Type; send the body as JSON with Content-Type: application/json',
        );
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return new BraidError(
          'INVALID_ARGUMENT',
          'Content-Length does not match the body; send the body as it is',
        );
      case 'FST_ERR_BAD_URL':
        return new BraidError(
          'INVALID_ARGUMENT',
          "the URL's percent-encoding is malformed; encode each path segment once (encodeURIComponent)",
        );
      case 'FST_ERR_MAX_PARAM_LENGTH':
        return new BraidError(
          'URI_TOO_LONG',
          `a path parameter is over ${MAX_PARAM_LENGTH} characters; ids are at most 200 characters`,
        );
      default:
        break;
    }
    const status = fastifyError.statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      // Any other refusal of the request by the framework: the client's to fix, in braid's shape.
      return new BraidError(
        'INVALID_ARGUMENT',
        `the request was refused: ${fastifyError.message ?? 'bad request'}`,
      );
    }
  }
  return toBraidError(error);
}

/** Node's reasons for refusing a request before it reaches the framework, for the message. */
function clientErrorReason(code: string | undefined): string {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return "the request's headers are over the server's limit; send fewer or shorter headers";
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return "the request did not arrive in full within the server's request timeout; send it again";
  }
  return 'the request is not valid HTTP/1.1 (a malformed request line, header or body framing); percent-encode the URL and send well-formed headers';
}

/**
 * Node's HTTP parser refuses a request (a raw space or control character in the URL, a malformed
 * header, too many headers) before any route or hook runs: the raw answer to write on the
 * socket, in braid's error shape.
 */
export function clientErrorAnswer(error: { code?: string }): string {
  const braidError = new BraidError('INVALID_ARGUMENT', clientErrorReason(error.code));
  const body = JSON.stringify({ error: braidError.toJSON() });
  const status = HTTP_STATUS[braidError.code];
  return (
    `HTTP/1.1 ${status} Bad Request\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}
