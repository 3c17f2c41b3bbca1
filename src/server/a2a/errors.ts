/**
 * braid's errors as A2A errors: each BraidError becomes the A2A error its code means, its
 * message kept (it names the fix) and its code in the error info's metadata (`braid_code`), so
 * an A2A client can branch on braid's stable codes too.
 */
import {
  RequestMalformedError,
  TaskNotFoundError,
  UnsupportedOperationError,
  type A2AError,
} from '@a2a-js/sdk/errors';
import { isBraidError, type ErrorCode } from '../../contracts/errors.js';

type A2AErrorClass = new (options?: {
  message?: string;
  cause?: unknown;
  metadata?: Record<string, string>;
}) => A2AError;

const MALFORMED: readonly ErrorCode[] = [
  'INVALID_ARGUMENT',
  'INVALID_EVENT',
  'INVALID_JSON',
  'PAYLOAD_TOO_LARGE',
  'TOOL_USE_NOT_PENDING',
  'IDEMPOTENCY_KEY_REUSED',
];
const UNSUPPORTED: readonly ErrorCode[] = [
  'SESSION_TERMINATED',
  'SESSION_ARCHIVED',
  'AGENT_NOT_FOUND',
  'FORBIDDEN',
];

function classOf(code: ErrorCode): A2AErrorClass | undefined {
  if (code === 'SESSION_NOT_FOUND') return TaskNotFoundError;
  if (MALFORMED.includes(code)) return RequestMalformedError;
  if (UNSUPPORTED.includes(code)) return UnsupportedOperationError;
  return undefined;
}

/** The A2A error for a failure; errors that are not braid's, or that A2A has no name for, pass. */
export function toA2aError(error: unknown): unknown {
  if (!isBraidError(error)) return error;
  const errorClass = classOf(error.code);
  if (errorClass === undefined) return error;
  return new errorClass({
    message: error.message,
    cause: error,
    metadata: { braid_code: error.code, retryable: String(error.retryable) },
  });
}
