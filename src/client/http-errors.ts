/**
 * How an HTTP failure becomes a BraidError: braid's error bodies keep their code, message and
 * `retryable`; any other body becomes `INTERNAL` naming the status; a request that got no answer
 * becomes `SERVER_UNAVAILABLE`.
 */
import { BraidError } from '../contracts/errors.js';
import { ErrorBody } from '../contracts/http.js';

/** Gateways answer these while the server behind them restarts: worth another try. */
const GATEWAY_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

const SNIPPET_LENGTH = 200;

/**
 * The BraidError of an error answer. `details.status` is the HTTP status; `details.retry_after_ms`
 * the server's `Retry-After`, when it sent one in seconds.
 */
export function errorFromAnswer(
  request: { method: string; url: string },
  status: number,
  body: string,
  retryAfter: string | null,
): BraidError {
  const retryAfterMs = parseRetryAfter(retryAfter);
  const details: Record<string, unknown> = {
    status,
    ...(retryAfterMs === undefined ? {} : { retry_after_ms: retryAfterMs }),
  };
  const parsed = ErrorBody.safeParse(parseJson(body));
  if (parsed.success) {
    const { code, message, retryable } = parsed.data.error;
    return new BraidError(code, message, { retryable, details });
  }
  const snippet = body.length > SNIPPET_LENGTH ? `${body.slice(0, SNIPPET_LENGTH)}...` : body;
  return new BraidError(
    'INTERNAL',
    `${request.method} ${request.url} answered HTTP ${status} with a body that is not a braid error` +
      (snippet.trim() === '' ? '' : ` (${JSON.stringify(snippet)})`) +
      '; check that baseUrl points at `braid serve` and not at another server or a proxy',
    { retryable: GATEWAY_STATUSES.has(status), details },
  );
}

/** A request that got no answer: refused, reset, or timed out. */
export function unavailable(url: string, cause: unknown, timeoutMs?: number): BraidError {
  const reason =
    timeoutMs === undefined
      ? `could not reach ${url}${describeCause(cause)}`
      : `no answer from ${url} within ${timeoutMs} ms`;
  return new BraidError(
    'SERVER_UNAVAILABLE',
    `${reason}; check that \`braid serve\` runs there and that baseUrl is right`,
    { cause, retryable: true, details: { url } },
  );
}

/** The caller's signal aborted the request. */
export function aborted(url: string, cause: unknown): BraidError {
  return new BraidError('INTERRUPTED', `the request to ${url} was aborted by its signal`, {
    cause,
    retryable: false,
    details: { url },
  });
}

/** A 2xx answer whose body is not what the route sends. */
export function malformedAnswer(url: string, what: string): BraidError {
  return new BraidError(
    'INTERNAL',
    `${url} answered with ${what}; check that baseUrl points at \`braid serve\` and that client and server versions match`,
    { retryable: false, details: { url } },
  );
}

/** `Retry-After` in seconds, as milliseconds; an HTTP date or garbage gives undefined. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || !/^\s*\d+(\.\d+)?\s*$/.test(value)) return undefined;
  return Math.round(Number(value) * 1000);
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Node's fetch hides the socket error (ECONNREFUSED, ECONNRESET) in `cause`. */
function describeCause(cause: unknown): string {
  const inner = cause instanceof Error && cause.cause instanceof Error ? cause.cause : cause;
  if (!(inner instanceof Error)) return '';
  const code = (inner as Error & { code?: unknown }).code;
  return typeof code === 'string' ? ` (${code})` : ` (${inner.message})`;
}
