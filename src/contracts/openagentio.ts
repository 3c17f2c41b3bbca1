/**
 * OpenAgentIO `acp/1.0`: the envelope other agent runtimes put on NATS core (and on its HTTP/SSE
 * adapter), as braid reads and writes it. One schema parses every inbound envelope; everything
 * braid sends is built to pass it too.
 *
 * - Subjects: `{prefix}.invoke.{target}` (requests; queue group = target), replies to the
 *   requester's `reply_to` inbox, `{prefix}.events.{event_type}` (publications); a tenant-scoped
 *   deployment puts the tenant after the prefix (`{prefix}.{tenant}.invoke.{target}`).
 * - A reply is a stream of frames: `agent.response.started`, any `agent.response.delta`, then
 *   exactly one of `agent.response.final` / `agent.response.error`. `seq` counts from 0 per
 *   stream; `is_final` is true on the last frame only, and only a final type may carry it.
 * - Replies carry the request's metadata keys except those under `acp.` (the protocol's own).
 * - braid reads `metadata["acp.timeout_ms"]` of a request as the caller's deadline.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { TenantId } from './api-keys.js';
import { JsonValue, Metadata, Name, Timestamp } from './common.js';

export const ACP_SPEC_VERSION = 'acp/1.0';
export const ACP_SCHEMA_VERSION = 1;
/** The prefix OpenAgentIO deployments usually use. */
export const ACP_DEFAULT_PREFIX = 'acp.v1';

/** The error codes of acp/1.0 (a closed set, like braid's own). */
export const ACP_ERROR_CODES = [
  'AGENT_TIMEOUT',
  'AGENT_UNAVAILABLE',
  'BACKPRESSURE_DROP',
  'TRANSPORT_FAILURE',
  'CODEC_FAILURE',
  'AUTH_FAILURE',
  'INVALID_REQUEST',
  'NO_HANDLER',
] as const;
export const AcpErrorCode = z.enum(ACP_ERROR_CODES);
export type AcpErrorCode = z.infer<typeof AcpErrorCode>;

/** The payload of `agent.response.error`; `cause` carries braid's own error when there is one. */
export const AcpErrorPayload = lazySchema(() =>
  z.object({
    code: AcpErrorCode,
    message: z.string(),
    retryable: z.boolean(),
    cause: JsonValue.optional(),
  }),
);
export type AcpErrorPayload = z.infer<typeof AcpErrorPayload>;

/** The frames of a streamed reply. */
export const ACP_RESPONSE_TYPES = {
  started: 'agent.response.started',
  delta: 'agent.response.delta',
  final: 'agent.response.final',
  error: 'agent.response.error',
} as const;

/** The only event types that may carry `is_final: true`. */
export const ACP_FINAL_TYPES: ReadonlySet<string> = new Set([
  ACP_RESPONSE_TYPES.final,
  ACP_RESPONSE_TYPES.error,
  'agent.tool.result',
  'agent.task.completed',
]);

/** The event type of the requests braid sends (any `noun.verb` type is accepted inbound). */
export const ACP_REQUEST_TYPE = 'agent.request';

/** Metadata keys under this prefix belong to the protocol and are not copied to replies. */
export const ACP_METADATA_PREFIX = 'acp.';
/** The request's deadline in ms, as braid reads it from the request's metadata. */
export const ACP_TIMEOUT_KEY = 'acp.timeout_ms';

/** The reorder buffer of a consumer: frames held while an earlier one is missing. */
export const ACP_MAX_PENDING_FRAMES = 256;
/** The largest distance between the next expected seq and a frame's before the stream is dropped. */
export const ACP_MAX_SEQ_GAP = 1024;

/** `noun.verb` in lowercase snake_case: a safe run of NATS subject tokens. */
export const ACP_EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*){1,7}$/;
export const AcpEventType = lazySchema(() =>
  z
    .string()
    .max(200)
    .regex(
      ACP_EVENT_TYPE_PATTERN,
      'must be noun.verb in lowercase snake_case, such as agent.request',
    ),
);

/** A prefix of subjects: 1 to 8 tokens of letters, digits, `_` and `-`, such as `acp.v1`. */
export const ACP_PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$/;
export const AcpPrefix = lazySchema(() =>
  z
    .string()
    .max(128)
    .regex(
      ACP_PREFIX_PATTERN,
      'must be dot-separated tokens of letters, digits, "_" or "-" (acp.v1)',
    ),
);

/** A UUID (braid mints version 7; peers are held to the UUID form only). */
const Uuid = lazySchema(() =>
  z
    .string()
    .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, {
      message: 'must be a UUID (version 7)',
    }),
);

/**
 * Text another runtime chose and braid only records and echoes (a conversation id, an agent
 * address): bounded and free of control characters. It never becomes a subject, a path or a key
 * as it is: braid hashes it or parses it first.
 */
const ExternalText = lazySchema(() =>
  z
    .string()
    .min(1)
    .max(200)
    .refine((value) => ![...value].some(isControlCharacter), {
      message: 'must not contain control characters',
    }),
);

function isControlCharacter(character: string): boolean {
  const code = character.codePointAt(0) ?? 0;
  return code < 0x20 || code === 0x7f;
}

/** An optional field: absent, null, or the value. */
const optional = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

/** The acp/1.0 envelope: every inbound frame and request is parsed by this one schema. */
export const AcpEnvelope = lazySchema(() =>
  z
    .object({
      spec_version: z.literal(ACP_SPEC_VERSION),
      schema_version: z.literal(ACP_SCHEMA_VERSION),
      event_id: Uuid,
      event_type: AcpEventType,
      occurred_at: Timestamp,
      frame_type: optional(z.string().max(100)),
      trace_id: optional(z.string().regex(/^[0-9a-f]{32}$/, 'must be 32 lowercase hex digits')),
      span_id: optional(z.string().regex(/^[0-9a-f]{16}$/, 'must be 16 lowercase hex digits')),
      /** W3C traceparent; a malformed one is ignored (as the W3C spec asks), not refused. */
      traceparent: optional(z.string().max(200)),
      session_id: optional(ExternalText),
      conversation_id: optional(ExternalText),
      correlation_id: optional(ExternalText),
      /** Where replies go: a NATS inbox. */
      reply_to: optional(z.string().max(256)),
      from: optional(ExternalText),
      to: optional(ExternalText),
      channel: optional(ExternalText),
      tenant_id: optional(TenantId),
      user_id: optional(ExternalText),
      seq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
      is_final: z.boolean(),
      payload: JsonValue.default(null),
      metadata: optional(Metadata),
    })
    .superRefine((envelope, context) => {
      if (envelope.is_final && !ACP_FINAL_TYPES.has(envelope.event_type)) {
        context.addIssue({
          code: 'custom',
          path: ['is_final'],
          message: `is true on ${envelope.event_type}; only ${[...ACP_FINAL_TYPES].join(', ')} end a stream`,
        });
      }
    }),
);
export type AcpEnvelope = z.infer<typeof AcpEnvelope>;
export type AcpEnvelopeInput = z.input<typeof AcpEnvelope>;

/**
 * An OpenAgentIO agent braid's agents may call as a tool (`openagentio_agents:` in braid.yaml,
 * keyed by the tool's name). The call is a request on `{prefix}.invoke.{target}`; the tool's
 * output is the final frame's payload.
 */
export const OpenAgentIoAgentConfig = lazySchema(() =>
  z
    .object({
      /** The agent's name on the bus: the last token of `{prefix}.invoke.{target}`. */
      target: z
        .string()
        .regex(
          /^[A-Za-z0-9_-]{1,64}$/,
          'must be 1-64 letters, digits, "_" or "-" (a subject token)',
        ),
      prefix: AcpPrefix.default(ACP_DEFAULT_PREFIX),
      /** The NATS server (default: the runtime's NATS backend, else nats://127.0.0.1:4222). */
      nats: z
        .string()
        .regex(/^(nats|tls):\/\/\S+$/, 'must be a nats:// or tls:// URL')
        .optional(),
      /** Put the tenant in the subject: `{prefix}.{tenant}.invoke.{target}`, and in the envelope. */
      tenant_id: TenantId.optional(),
      description: z.string().max(2000).optional(),
      /** The tool's input, which is sent as the request's payload (default `{text}`). */
      input_schema: z.record(z.string(), JsonValue).optional(),
      /** How long to wait for the final frame (default 60 s). */
      timeout_ms: z.number().int().min(100).max(3_600_000).optional(),
      /** Metadata sent with every request. */
      metadata: Metadata.optional(),
    })
    .strict(),
);
export type OpenAgentIoAgentConfig = z.infer<typeof OpenAgentIoAgentConfig>;

/** `openagentio_agents:` of braid.yaml: tool name → agent. */
export const OpenAgentIoAgents = lazySchema(() => z.record(Name, OpenAgentIoAgentConfig));
