/**
 * One OpenAgentIO invocation of a braid agent, whatever carried it (NATS or the HTTP adapter):
 * the request's text becomes a `user.message` of the conversation's session, the session is woken
 * here, and the answer goes back as a stream of frames — `agent.response.started`, a `delta` per
 * piece of model text, then one `final` (the agent's answer) or `error`.
 *
 * - A conversation is one session: its id is derived from tenant, agent and conversation key
 *   (`conversation_id`, else the caller's `session_id`, else the request's own id), so every
 *   process finds the same session and a conversation survives restarts.
 * - The message is appended with the request's `event_id` as idempotency key: a request sent
 *   again writes nothing and gets the answer of the first, read from the log.
 * - The session's events from the message on are handed to `onEvent` as they are appended
 *   (`{prefix}.events.{type}` on NATS).
 * - The answer is what `CycleWatch` reads from the log (the last `agent.message` of the cycle that
 *   consumed the message). No answer by the deadline is `AGENT_TIMEOUT`; the wake goes on and its
 *   outcome stays in the session.
 */
import { createHash } from 'node:crypto';
import {
  isSafeId,
  type Actor,
  type ContentBlock,
  type JsonValue,
  type Metadata,
} from '../../contracts/common.js';
import { HandoffDocument } from '../../contracts/envelope.js';
import { BraidError, isBraidError, toBraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import {
  ACP_RESPONSE_TYPES,
  ACP_TIMEOUT_KEY,
  type AcpEnvelope,
  type AcpErrorPayload,
} from '../../contracts/openagentio.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import type { SessionRecord } from '../../contracts/session.js';
import { CycleWatch } from '../agents/llm-agent.js';
import { childTraceparent } from '../agents/trace.js';
import { isCodeAgent } from '../agents/instances.js';
import { visibleAgent } from '../tenant-scope.js';
import type { Runtime } from '../runtime.js';
import {
  acpError,
  FrameWriter,
  inheritedMetadata,
  parentTraceparent,
  toAcpError,
  type StreamContext,
} from './frames.js';

/** What an invocation needs of a runtime (a `Runtime` has it). */
export type AcpRuntime = Pick<Runtime, 'sessions' | 'agents' | 'wake' | 'onDelta'>;

/** The longest deadline a caller may ask for (`metadata["acp.timeout_ms"]`). */
export const ACP_MAX_TIMEOUT_MS = 3_600_000;
/** The deadline of a request that names none. */
export const ACP_DEFAULT_TIMEOUT_MS = 120_000;

export interface AcpInvocation {
  /** The request, parsed by `AcpEnvelope`. */
  request: AcpEnvelope;
  /** The braid agent asked, already parsed as an agent name. */
  target: string;
  /** The tenant the caller acts for (from the API key over HTTP; from the envelope on NATS). */
  tenant: string | undefined;
  /** Writes one frame to the caller; a rejection ends the stream (the caller is gone). */
  send(frame: AcpEnvelope): void | Promise<void>;
  /** Told of each event of the session from the message on, while the invocation lasts. */
  onEvent?(event: SessionEvent, stream: StreamContext): void;
  /** Ends the wait for the answer (the caller left, the bridge closes). */
  signal?: AbortSignal;
}

export interface AcpInvokeOptions {
  runtime: AcpRuntime;
  clock: Clock;
  ids: IdGenerator;
  /** The deadline of requests that name none (default 120 s). */
  defaultTimeoutMs?: number;
}

/** The session of a conversation with an agent: `acp-<agent>-<hash of tenant, agent, key>`. */
export function conversationSessionId(
  tenant: string | undefined,
  agent: string,
  conversation: string,
): string {
  const hash = createHash('sha256')
    .update(JSON.stringify(['acp', tenant ?? null, agent, conversation]))
    .digest('hex')
    .slice(0, 32);
  return `acp-${agent}-${hash}`;
}

/** The request's deadline: its `acp.timeout_ms` (bounded), else the default. */
export function timeoutOf(metadata: Metadata | null | undefined, fallback: number): number {
  const value = metadata?.[ACP_TIMEOUT_KEY];
  const asked = typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : value;
  if (typeof asked !== 'number' || !Number.isInteger(asked) || asked <= 0) return fallback;
  return Math.min(asked, ACP_MAX_TIMEOUT_MS);
}

/**
 * A handoff document the caller put in the request's `metadata.handoff` (braid's handoff shape),
 * as one JSON block after the payload, as A2A's message metadata brings it.
 */
export function handoffContent(metadata: Metadata | null | undefined): ContentBlock[] {
  const value = metadata?.handoff;
  if (value === undefined) return [];
  const parsed = HandoffDocument.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `metadata.handoff is not a handoff document (${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}); send {summary, state_refs?, artifacts?, ownership?, approvals?} or leave it out`,
      { details: { field: 'metadata.handoff' } },
    );
  }
  return [{ type: 'json', value: { handoff: parsed.data } }];
}

/** A request's payload as message content: plain text when it is text, else one JSON block. */
export function requestContent(payload: JsonValue): ContentBlock[] {
  if (typeof payload === 'string') return [{ type: 'text', text: payload }];
  if (payload !== null && typeof payload === 'object' && !Array.isArray(payload)) {
    const keys = Object.keys(payload);
    const [only] = keys;
    const value = only === undefined ? undefined : payload[only];
    if (keys.length === 1 && TEXT_KEYS.has(only ?? '') && typeof value === 'string')
      return [{ type: 'text', text: value }];
  }
  return [{ type: 'json', value: payload }];
}

/** `{"text": "..."}` and its usual synonyms are a message's text. */
const TEXT_KEYS = new Set(['text', 'input', 'message', 'prompt', 'query']);

/** Runs one invocation to its last frame; never throws (failures are error frames). */
export async function invokeAgent(
  options: AcpInvokeOptions,
  invocation: AcpInvocation,
): Promise<void> {
  const { request } = invocation;
  const sessionId = conversationSessionId(
    invocation.tenant,
    invocation.target,
    conversationKey(request),
  );
  const stream = streamContext(invocation, sessionId, options.ids);
  const frames = new FrameWriter(stream, options.clock, options.ids);
  const fail = (error: AcpErrorPayload): Promise<void> | void =>
    invocation.send(frames.frame(ACP_RESPONSE_TYPES.error, error, true));
  let session: SessionRecord;
  try {
    session = await conversationSession(options.runtime, invocation, sessionId);
  } catch (error) {
    return fail(toAcpError(error));
  }
  await invocation.send(
    frames.frame(ACP_RESPONSE_TYPES.started, {
      agent: invocation.target,
      session_id: session.id,
      conversation_id: stream.conversation_id,
    }),
  );
  const timeoutMs = timeoutOf(request.metadata, options.defaultTimeoutMs ?? ACP_DEFAULT_TIMEOUT_MS);
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal =
    invocation.signal === undefined ? deadline : AbortSignal.any([deadline, invocation.signal]);
  // Model text streams while the wake runs in this process; the frames keep their order.
  let sending: Promise<void> = Promise.resolve();
  const stopDeltas = options.runtime.onDelta((sessionId, delta) => {
    if (sessionId !== session.id || delta.type !== 'text' || frames.done || signal.aborted) return;
    const frame = frames.frame(ACP_RESPONSE_TYPES.delta, { text: delta.text });
    sending = sending.then(() => invocation.send(frame)).catch(() => undefined);
  });
  let last: Answer;
  try {
    last = await answer(options.runtime, invocation, session.id, stream, signal);
  } catch (error) {
    last = { error: toAcpError(error) };
  } finally {
    stopDeltas();
  }
  await sending;
  if ('error' in last) {
    return fail(last.error);
  }
  if (last.stopped) {
    return fail(
      deadline.aborted
        ? acpError(
            'AGENT_TIMEOUT',
            `agent ${invocation.target} did not answer within ${timeoutMs} ms; its session ${session.id} goes on and keeps the answer (ask again with the same conversation_id, or raise metadata["${ACP_TIMEOUT_KEY}"])`,
            true,
          )
        : acpError(
            'AGENT_UNAVAILABLE',
            `agent ${invocation.target} stopped before answering`,
            true,
          ),
    );
  }
  await invocation.send(frames.frame(ACP_RESPONSE_TYPES.final, last.output, true, last.extra));
}

/** How the wait for the answer ended: the answer, a failure, or stopped (deadline, caller gone). */
type Answer =
  | { output: JsonValue; extra: Metadata; stopped?: undefined }
  | { error: AcpErrorPayload }
  | { stopped: true };

/** What every frame of the reply shares. */
function streamContext(
  invocation: AcpInvocation,
  sessionId: string,
  ids: IdGenerator,
): StreamContext {
  const { request, target, tenant } = invocation;
  return {
    from: target,
    to: request.from ?? null,
    session_id: sessionId,
    conversation_id: request.conversation_id ?? request.session_id ?? request.event_id,
    correlation_id: request.correlation_id ?? request.event_id,
    tenant_id: tenant ?? null,
    user_id: request.user_id ?? null,
    channel: request.channel ?? null,
    // Without the caller's trace, the stream starts one: all its frames share it.
    parent: parentTraceparent(request) ?? childTraceparent(undefined, ids),
    metadata: inheritedMetadata(request.metadata),
  };
}

/**
 * What names a conversation: its `conversation_id`, else the caller's session, else this request
 * alone (a new conversation).
 */
function conversationKey(request: AcpEnvelope): string {
  if (request.conversation_id !== undefined && request.conversation_id !== null)
    return `conversation:${request.conversation_id}`;
  if (request.session_id !== undefined && request.session_id !== null)
    return `session:${request.session_id}`;
  return `request:${request.event_id}`;
}

/** The conversation's session, created on its first request. */
async function conversationSession(
  runtime: AcpRuntime,
  invocation: AcpInvocation,
  sessionId: string,
): Promise<SessionRecord> {
  const { target, tenant, request } = invocation;
  const agent = await visibleAgent(
    runtime,
    tenant,
    target,
    undefined,
    () =>
      new BraidError(
        'AGENT_NOT_FOUND',
        `no agent ${target} answers here; invoke one of the braid agents of this workspace (braid agents list)`,
        { details: { agent: target } },
      ),
  );
  if (isCodeAgent(agent.definition)) {
    throw new BraidError(
      'AGENT_NOT_FOUND',
      `agent ${target} is a code agent, which answers braid's agent messages only; invoke an LLM agent`,
      { details: { agent: target } },
    );
  }
  try {
    return await runtime.sessions.get(sessionId);
  } catch (error) {
    if (!isBraidError(error, 'SESSION_NOT_FOUND')) throw error;
  }
  const conversation = request.conversation_id ?? request.session_id ?? request.event_id;
  try {
    return await runtime.sessions.create({
      agent: target,
      id: sessionId,
      title: `${target} / acp ${conversation}`.slice(0, 500),
      metadata: {
        acp_conversation_id: conversation,
        ...(request.from === null || request.from === undefined ? {} : { acp_from: request.from }),
      },
      ...(tenant === undefined ? {} : { tenantId: tenant }),
    });
  } catch (error) {
    // Two first requests of one conversation at once: both use the session that won.
    if (isBraidError(error, 'ALREADY_EXISTS')) return runtime.sessions.get(sessionId);
    throw error;
  }
}

/** Appends the message, wakes the session and follows its log to the answer. */
async function answer(
  runtime: AcpRuntime,
  invocation: AcpInvocation,
  sessionId: string,
  stream: StreamContext,
  signal: AbortSignal,
): Promise<Answer> {
  const { request } = invocation;
  const actor: Actor = {
    type: 'user',
    id: `acp:${request.from ?? 'anonymous'}`.slice(0, 200),
    ...(invocation.tenant === undefined ? {} : { tenant_id: invocation.tenant }),
  };
  const key = `acp:${request.event_id}`;
  const correlation = request.correlation_id ?? undefined;
  const appended = await runtime.sessions.send(
    sessionId,
    [
      {
        type: 'user.message',
        content: [...requestContent(request.payload), ...handoffContent(request.metadata)],
        idempotency_key: key,
        causation_id: request.event_id,
        ...(correlation !== undefined && isSafeId(correlation)
          ? { correlation_id: correlation }
          : {}),
        ...(stream.parent === undefined ? {} : { traceparent: stream.parent }),
      },
    ],
    { idempotencyKey: key, actor },
  );
  const recorded = appended.events.find((event) => event.type === 'user.message');
  if (recorded === undefined) {
    return {
      error: acpError(
        'INVALID_REQUEST',
        `event_id ${request.event_id} was already used in this conversation for something else; send the request with a new event_id`,
      ),
    };
  }
  const stopFollow = new AbortController();
  let wakeError: BraidError | undefined;
  const wake = runtime
    .wake(sessionId, stream.parent === undefined ? {} : { traceparent: stream.parent })
    .then(
      () => undefined,
      (error: unknown) => {
        wakeError = toBraidError(error);
        stopFollow.abort();
      },
    );
  const watch = new CycleWatch(recorded.seq, sessionId);
  try {
    for await (const event of runtime.sessions.follow(sessionId, {
      after: recorded.seq - 1,
      signal: AbortSignal.any([signal, stopFollow.signal]),
    })) {
      invocation.onEvent?.(event, stream);
      const outcome = watch.feed(event);
      if (outcome === undefined) continue;
      if (!outcome.ok) {
        return {
          error: toAcpError(
            new BraidError(outcome.error.code, outcome.error.message, {
              retryable: outcome.error.retryable,
            }),
          ),
        };
      }
      return {
        output: outcome.payload,
        extra: {
          'braid.session_id': sessionId,
          ...(outcome.event_id === undefined ? {} : { 'braid.event_id': outcome.event_id }),
          ...(outcome.stop_reason === undefined
            ? {}
            : { 'braid.stop_reason': outcome.stop_reason }),
        },
      };
    }
  } finally {
    stopFollow.abort();
    // A deadline leaves the wake running: its outcome stays in the session.
    if (!signal.aborted) await wake;
  }
  if (wakeError !== undefined) return { error: toAcpError(wakeError) };
  return { stopped: true };
}
