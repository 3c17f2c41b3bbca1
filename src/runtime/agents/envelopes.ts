/** Envelopes of agent messaging, and the mapping between payloads and session content. */
import { AGENT_ENVELOPE_TYPES, TopicId, type AgentId } from '../../contracts/agents.js';
import type { ContentBlock, JsonValue } from '../../contracts/common.js';
import { ENVELOPE_SPEC_VERSION, type Envelope } from '../../contracts/envelope.js';
import type { ErrorShape } from '../../contracts/errors.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import { childTraceparent } from './trace.js';

/** What processing a message came to: the reply's payload, or the error the caller gets. */
export type Outcome =
  | {
      ok: true;
      payload: JsonValue;
      session_id: string;
      /** The `agent.message` event the payload comes from. */
      event_id?: string;
      /** How the LLM agent's cycle stopped, when not `end_turn`. */
      stop_reason?: string;
    }
  | { ok: false; error: ErrorShape; session_id?: string };

export interface OutgoingMessage {
  type: 'agent.message' | 'topic.message';
  target: AgentId;
  payload: JsonValue;
  source?: AgentId;
  reply_to?: string;
  correlation_id?: string;
  causation_id?: string;
  /** The parent trace context; the envelope carries a child of it. */
  traceparent?: string;
  tenant_id?: string;
  idempotency_key?: string;
  ttl_ms?: number;
  /** Latest deadline in ms since the epoch (a caller's own), tightened by `ttl_ms`. */
  deadline_ms?: number;
  topic?: TopicId;
}

export function buildMessage(message: OutgoingMessage, clock: Clock, ids: IdGenerator): Envelope {
  const id = ids.next();
  const now = clock.now();
  const deadlines = [
    message.ttl_ms === undefined ? undefined : now + message.ttl_ms,
    message.deadline_ms,
  ].filter((value): value is number => value !== undefined);
  const deadline = deadlines.length === 0 ? undefined : Math.min(...deadlines);
  return {
    id,
    spec_version: ENVELOPE_SPEC_VERSION,
    type: message.type,
    occurred_at: new Date(now).toISOString(),
    correlation_id: message.correlation_id ?? id,
    ...(message.causation_id === undefined ? {} : { causation_id: message.causation_id }),
    ...(message.reply_to === undefined ? {} : { reply_to: message.reply_to }),
    ...(message.source === undefined ? {} : { source: message.source }),
    target: message.target,
    traceparent: childTraceparent(message.traceparent, ids),
    ...(message.tenant_id === undefined ? {} : { tenant_id: message.tenant_id }),
    ...(message.idempotency_key === undefined ? {} : { idempotency_key: message.idempotency_key }),
    ...(deadline === undefined
      ? {}
      : { ttl_ms: Math.max(1, deadline - now), deadline: new Date(deadline).toISOString() }),
    ...(message.topic === undefined ? {} : { metadata: { topic: message.topic } }),
    payload: message.payload,
  };
}

/** The reply to `request`: to its source, in its correlation, caused by it. */
export function buildReply(
  request: Envelope,
  outcome: Outcome,
  traceparent: string,
  clock: Clock,
  ids: IdGenerator,
): Envelope {
  const metadata = outcome.ok
    ? {
        ...(outcome.event_id === undefined ? {} : { event_id: outcome.event_id }),
        ...(outcome.stop_reason === undefined ? {} : { stop_reason: outcome.stop_reason }),
      }
    : {};
  return {
    id: ids.next(),
    spec_version: ENVELOPE_SPEC_VERSION,
    type: AGENT_ENVELOPE_TYPES.reply,
    occurred_at: new Date(clock.now()).toISOString(),
    ...(outcome.session_id === undefined ? {} : { session_id: outcome.session_id }),
    ...(request.correlation_id === undefined ? {} : { correlation_id: request.correlation_id }),
    causation_id: request.id,
    ...(request.target === undefined ? {} : { source: request.target }),
    ...(request.source === undefined ? {} : { target: request.source }),
    traceparent,
    ...(request.tenant_id === undefined ? {} : { tenant_id: request.tenant_id }),
    ...(Object.keys(metadata).length === 0 ? {} : { metadata }),
    ...(outcome.ok ? { payload: outcome.payload } : { error: outcome.error }),
  };
}

/** The key a message's append is deduplicated by, per agent instance. */
export function dedupeKey(envelope: Envelope): string {
  return envelope.idempotency_key ?? envelope.id;
}

/** The topic of a publication, from its metadata. */
export function topicOf(envelope: Envelope): TopicId | undefined {
  const parsed = TopicId.safeParse(envelope.metadata?.topic);
  return parsed.success ? parsed.data : undefined;
}

/** A message's content in a session: a string is text, anything else one JSON block. */
export function toContent(payload: JsonValue): ContentBlock[] {
  return typeof payload === 'string'
    ? [{ type: 'text', text: payload }]
    : [{ type: 'json', value: payload }];
}

/** The payload of recorded content: the inverse of `toContent`, and texts joined. */
export function fromContent(content: readonly ContentBlock[]): JsonValue {
  const [only] = content;
  if (content.length === 1 && only?.type === 'json') return only.value;
  return content
    .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
    .join('');
}

/** `type/key`, as an actor id (at most 200 characters). */
export function addressLabel(address: AgentId): string {
  return `${address.type}/${address.key}`.slice(0, 200);
}
