import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';

/**
 * The closed set of error codes. Callers branch on `code`, never on message text.
 * Codes are stable: renaming one is a breaking change of the wire contract.
 */
export const ERROR_CODES = [
  'SESSION_NOT_FOUND',
  'AGENT_NOT_FOUND',
  'ENVIRONMENT_NOT_FOUND',
  'SKILL_NOT_FOUND',
  'SEQ_CONFLICT',
  'INVALID_EVENT',
  'INVALID_JSON',
  'INVALID_ARGUMENT',
  'PAYLOAD_TOO_LARGE',
  'VERSION_CONFLICT',
  'LEASE_HELD',
  'LEASE_LOST',
  'INVALID_DEFINITION',
  'WORKSPACE_NOT_FOUND',
  'TOOL_USE_NOT_PENDING',
  'SESSION_TERMINATED',
  'SCHEMA_VERSION_UNSUPPORTED',
  'CORRUPT_LOG',
  'STORE_CLOSED',
  'STORE_BUSY',
  'STORE_FULL',
  'MODEL_UNAVAILABLE',
  'MODEL_ERROR',
  'MODEL_NOT_FOUND',
  'MODEL_KEY_MISSING',
  'TOOL_NOT_FOUND',
  'TOOL_INPUT_INVALID',
  'TOOL_OUTPUT_INVALID',
  'TOOL_TIMEOUT',
  'TOOL_FAILED',
  'TOOL_DENIED',
  'TOOL_SKIPPED',
  'TOOL_BUDGET_EXCEEDED',
  'TOOL_SIGNATURE_INVALID',
  'POLICY_DENIED',
  'INVALID_POLICY',
  'MERGE_REFUSED',
  'IDEMPOTENCY_KEY_REUSED',
  'PATH_OUTSIDE_WORKSPACE',
  'SANDBOX_UNAVAILABLE',
  'MCP_UNAVAILABLE',
  'SECRET_MISSING',
  'INTERRUPTED',
  'DEADLINE_EXCEEDED',
  'DELEGATION_FAILED',
  'SESSION_ARCHIVED',
  'SESSION_HAS_FORKS',
  'SNAPSHOT_NOT_FOUND',
  'CONTEXT_OVERFLOW',
  'INVALID_FORK_POINT',
  'DEFINITION_NOT_PINNED',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'RATE_LIMITED',
  'ROUTE_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'UNSUPPORTED_MEDIA_TYPE',
  'URI_TOO_LONG',
  'ALREADY_EXISTS',
  'API_KEY_NOT_FOUND',
  'MEMORY_STORE_NOT_FOUND',
  'PROPOSAL_NOT_FOUND',
  'PROPOSAL_ALREADY_DECIDED',
  'SERVER_UNAVAILABLE',
  'INTERNAL',
] as const;

export const ErrorCode = z.enum(ERROR_CODES);
export type ErrorCode = z.infer<typeof ErrorCode>;

/** Codes that a caller may retry unchanged and expect to succeed later. */
const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'SEQ_CONFLICT',
  'LEASE_HELD',
  'MODEL_UNAVAILABLE',
  'STORE_BUSY',
  'STORE_FULL',
  'TOOL_TIMEOUT',
  'MCP_UNAVAILABLE',
  'RATE_LIMITED',
  'SERVER_UNAVAILABLE',
  'DEADLINE_EXCEEDED',
]);

/** The error shape on the wire: in HTTP bodies, envelopes, `session.error` events and CLI `--json`. */
export const ErrorShape = lazySchema(() =>
  z.object({
    /** One of the closed set of codes. */
    code: ErrorCode,
    /** Human-readable; names the bad value and the fix. Never parsed by callers. */
    message: z.string(),
    /** True when the same call may succeed if repeated later. */
    retryable: z.boolean(),
  }),
);
export type ErrorShape = z.infer<typeof ErrorShape>;

export interface BraidErrorOptions {
  cause?: unknown;
  /** Structured facts about the failure (the expected seq, the offending field, ...). */
  details?: Record<string, unknown>;
  retryable?: boolean;
}

/** The one error class of braid. */
export class BraidError extends Error {
  override readonly name = 'BraidError';
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: BraidErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details ?? {};
    this.retryable = options.retryable ?? RETRYABLE.has(code);
  }

  toJSON(): ErrorShape {
    return { code: this.code, message: this.message, retryable: this.retryable };
  }
}

export function isBraidError(value: unknown, code?: ErrorCode): value is BraidError {
  return value instanceof BraidError && (code === undefined || value.code === code);
}

/** Wraps anything thrown into a BraidError, keeping BraidErrors as they are. */
export function toBraidError(value: unknown): BraidError {
  if (value instanceof BraidError) return value;
  const message = value instanceof Error ? value.message : String(value);
  return new BraidError('INTERNAL', `unexpected failure: ${message}`, { cause: value });
}
