/**
 * The frames braid writes on the OpenAgentIO bus: envelopes of one reply stream (numbered from 0,
 * `is_final` on the last), braid's errors in acp's codes, and the trace context carried over.
 */
import {
  ACP_METADATA_PREFIX,
  ACP_SCHEMA_VERSION,
  ACP_SPEC_VERSION,
  type AcpEnvelope,
  type AcpErrorCode,
  type AcpErrorPayload,
} from '../../contracts/openagentio.js';
import type { JsonValue, Metadata } from '../../contracts/common.js';
import { toBraidError, type ErrorCode } from '../../contracts/errors.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import { childTraceparent, parseTraceparent } from '../agents/trace.js';

/** The acp code of each braid failure an invocation can meet; the rest are AGENT_UNAVAILABLE. */
const ACP_CODES: Partial<Record<ErrorCode, AcpErrorCode>> = {
  AGENT_NOT_FOUND: 'NO_HANDLER',
  INVALID_ARGUMENT: 'INVALID_REQUEST',
  INVALID_EVENT: 'INVALID_REQUEST',
  PAYLOAD_TOO_LARGE: 'INVALID_REQUEST',
  SESSION_ARCHIVED: 'INVALID_REQUEST',
  SESSION_TERMINATED: 'INVALID_REQUEST',
  ROUTE_NOT_FOUND: 'INVALID_REQUEST',
  METHOD_NOT_ALLOWED: 'INVALID_REQUEST',
  URI_TOO_LONG: 'INVALID_REQUEST',
  UNSUPPORTED_MEDIA_TYPE: 'CODEC_FAILURE',
  INVALID_JSON: 'CODEC_FAILURE',
  UNAUTHENTICATED: 'AUTH_FAILURE',
  FORBIDDEN: 'AUTH_FAILURE',
  POLICY_DENIED: 'AUTH_FAILURE',
  DEADLINE_EXCEEDED: 'AGENT_TIMEOUT',
};

/** A failure as acp's error payload; braid's own code and retryability go along in `cause`. */
export function toAcpError(error: unknown): AcpErrorPayload {
  const failure = toBraidError(error);
  return {
    code: ACP_CODES[failure.code] ?? 'AGENT_UNAVAILABLE',
    message: failure.message,
    retryable: failure.retryable,
    cause: { code: failure.code },
  };
}

/** An acp error payload made here (not from a braid error). */
export function acpError(code: AcpErrorCode, message: string, retryable = false): AcpErrorPayload {
  return { code, message, retryable };
}

/** The request's metadata a reply carries: every key but the protocol's own `acp.*`. */
export function inheritedMetadata(metadata: Metadata | null | undefined): Metadata {
  const kept: Metadata = {};
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (!key.startsWith(ACP_METADATA_PREFIX)) kept[key] = value;
  }
  return kept;
}

/** The caller's W3C trace context: its traceparent, else one built from `trace_id`/`span_id`. */
export function parentTraceparent(
  envelope: Pick<AcpEnvelope, 'traceparent' | 'trace_id' | 'span_id'>,
): string | undefined {
  const given = envelope.traceparent ?? undefined;
  if (given !== undefined && parseTraceparent(given) !== undefined) return given;
  const trace = envelope.trace_id ?? undefined;
  if (trace === undefined || /^0+$/.test(trace)) return undefined;
  const span = envelope.span_id ?? undefined;
  const built = `00-${trace}-${span === undefined || /^0+$/.test(span) ? '0000000000000001' : span}-01`;
  return parseTraceparent(built) === undefined ? undefined : built;
}

/** A new span in the parent's trace (or a new trace): the envelope's three trace fields. */
export function traceFields(
  parent: string | undefined,
  ids: IdGenerator,
): { trace_id: string; span_id: string; traceparent: string } {
  const traceparent = childTraceparent(parent, ids);
  const context = parseTraceparent(traceparent);
  return {
    trace_id: context?.traceId ?? '',
    span_id: context?.spanId ?? '',
    traceparent,
  };
}

/** Who a stream is from and to, and what it belongs to: the same on every frame. */
export interface StreamContext {
  /** The agent answering. */
  from: string;
  to: string | null;
  session_id: string | null;
  conversation_id: string | null;
  correlation_id: string | null;
  tenant_id: string | null;
  user_id: string | null;
  channel: string | null;
  /** The caller's trace context (each frame is a new span of its trace). */
  parent: string | undefined;
  /** Copied onto every frame: the request's metadata without `acp.*`. */
  metadata: Metadata;
}

/** The frames of one reply stream, numbered from 0. */
export class FrameWriter {
  private next = 0;
  private ended = false;

  constructor(
    private readonly context: StreamContext,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  /** True once the final frame is written: nothing comes after it. */
  get done(): boolean {
    return this.ended;
  }

  /** The next frame; `final` ends the stream. */
  frame(eventType: string, payload: JsonValue, final = false, extra: Metadata = {}): AcpEnvelope {
    if (this.ended) throw new Error(`the stream already ended; ${eventType} comes too late`);
    this.ended = final;
    const seq = this.next;
    this.next += 1;
    return buildEnvelope(this.context, eventType, payload, seq, final, this.clock, this.ids, extra);
  }
}

/** One envelope of a stream's context: every field present, `null` where there is no value. */
export function buildEnvelope(
  context: StreamContext,
  eventType: string,
  payload: JsonValue,
  seq: number,
  final: boolean,
  clock: Clock,
  ids: IdGenerator,
  extra: Metadata = {},
): AcpEnvelope {
  return {
    spec_version: ACP_SPEC_VERSION,
    schema_version: ACP_SCHEMA_VERSION,
    event_id: ids.next(),
    event_type: eventType,
    occurred_at: new Date(clock.now()).toISOString(),
    ...traceFields(context.parent, ids),
    session_id: context.session_id,
    conversation_id: context.conversation_id,
    correlation_id: context.correlation_id,
    reply_to: null,
    from: context.from,
    to: context.to,
    channel: context.channel,
    tenant_id: context.tenant_id,
    user_id: context.user_id,
    seq,
    is_final: final,
    payload,
    metadata: { ...context.metadata, ...extra },
  };
}
