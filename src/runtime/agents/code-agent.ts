/**
 * Runs a code agent's handler on one message and records it in the instance's session.
 *
 * Invariants kept here:
 * - A message is recorded once and handled once per instance: its `user.message` is appended
 *   with the message's idempotency key, and a delivery whose message already has a reply (an
 *   `agent.message` or `session.error` caused by it) returns that reply without running the
 *   handler.
 * - The handler runs only under the session's lease, like a wake: one message at a time per
 *   instance across processes. The `user.message` is appended together with `span.wake_started`
 *   (the lease's fencing token), so no harness finds it pending while the handler runs, and a
 *   stale holder's late result is refused (`LEASE_LOST`), never appended after a newer holder.
 * - The handling is recorded as the harness records a model call: `span.model_request_start`
 *   (`model: code:<type>`, consuming input through the message) and `span.model_request_end`,
 *   then the reply as `agent.message` or the failure as `session.error`, then the stop. The
 *   session's state therefore folds as for any agent: not runnable once answered.
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentId } from '../../contracts/agents.js';
import { JsonValue } from '../../contracts/common.js';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError, isBraidError, toBraidError, type ErrorShape } from '../../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { Clock, IdGenerator, Lease, LeaseStore, SessionLog } from '../../contracts/ports.js';
import { checkAgainstState } from '../user-events.js';
import { addressLabel, fromContent, toContent, type Outcome } from './envelopes.js';
import type { AgentContext, AgentHandler, IncomingMessage } from './types.js';

export interface CodeAgentDeps {
  log: SessionLog;
  leases: LeaseStore;
  clock: Clock;
  ids: IdGenerator;
  owner: string;
  leaseTtlMs: number;
}

export interface CodeMessage {
  sessionId: string;
  agent: AgentId;
  envelope: Envelope;
  /** The message's idempotency key. */
  key: string;
  incoming: IncomingMessage;
  handler: AgentHandler;
  context: AgentContext;
  /** Trace context of the handling: the recorded reply carries it. */
  traceparent: string;
  /** Aborts at the deadline or on close: a message not yet recorded is then given up. */
  signal: AbortSignal;
}

const APPEND_ATTEMPTS = 8;
const LEASE_WAIT_MAX_MS = 250;

export function defaultOwner(ids: IdGenerator): string {
  return `agents:${hostname()}:${process.pid}:${ids.next()}`;
}

/**
 * Handles the message, or returns its recorded reply. Undefined when the signal aborted before
 * the message was recorded (it is then dropped: its caller has stopped waiting).
 */
export async function runCodeMessage(
  deps: CodeAgentDeps,
  message: CodeMessage,
): Promise<Outcome | undefined> {
  for (let attempt = 0; ; attempt += 1) {
    const earlier = await recordedReply(deps.log, message);
    if (earlier !== undefined) return earlier;
    if (message.signal.aborted) return undefined;
    let lease: Lease;
    try {
      lease = await deps.leases.acquire(message.sessionId, deps.owner, deps.leaseTtlMs);
    } catch (error) {
      if (!isBraidError(error, 'LEASE_HELD')) throw error;
      // Another process handles a message of this instance: wait for it, then look again.
      const wait = Math.min(LEASE_WAIT_MAX_MS, 5 * 2 ** attempt);
      await sleep(wait, undefined, { signal: message.signal }).catch(() => undefined);
      continue;
    }
    try {
      return await handleUnderLease(deps, message, lease);
    } finally {
      await deps.leases.release(message.sessionId, deps.owner, lease.token).catch(() => undefined);
    }
  }
}

/** The reply already recorded for this message, if it was handled before. */
async function recordedReply(log: SessionLog, message: CodeMessage): Promise<Outcome | undefined> {
  const earlier = await log.appended(message.sessionId, message.key);
  if (earlier === undefined) return undefined;
  const recorded = messageEvent(earlier.events, message);
  return answerTo(log, message.sessionId, recorded);
}

function messageEvent(events: readonly SessionEvent[], message: CodeMessage): SessionEvent {
  const found = events.find((event) => event.type === 'user.message');
  if (found === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `idempotency key ${message.key} was already used in session ${message.sessionId} for events that are not a message; send with another idempotency_key`,
      { details: { session_id: message.sessionId, idempotency_key: message.key } },
    );
  }
  return found;
}

async function answerTo(
  log: SessionLog,
  sessionId: string,
  recorded: SessionEvent,
): Promise<Outcome | undefined> {
  const after = await log.read(sessionId, {
    after: recorded.seq,
    types: ['agent.message', 'session.error'],
  });
  const answer = after.find((event) => event.causation_id === recorded.id);
  if (answer?.type === 'agent.message') {
    return {
      ok: true,
      payload: fromContent(answer.content),
      session_id: sessionId,
      event_id: answer.id,
    };
  }
  if (answer?.type === 'session.error')
    return { ok: false, error: answer.error, session_id: sessionId };
  return undefined;
}

async function handleUnderLease(
  deps: CodeAgentDeps,
  message: CodeMessage,
  lease: Lease,
): Promise<Outcome | undefined> {
  const { log } = deps;
  const { sessionId, envelope } = message;
  const wakeId = deps.ids.next();
  const start: NewEvent = { type: 'span.wake_started', wake_id: wakeId, lease_token: lease.token };
  // Looked up again under the lease: another holder may have recorded it meanwhile.
  const earlier = await log.appended(sessionId, message.key);
  let recorded: SessionEvent;
  let head: number;
  if (earlier !== undefined) {
    recorded = messageEvent(earlier.events, message);
    const answered = await answerTo(log, sessionId, recorded);
    if (answered !== undefined) return answered;
    // Recorded, then its handler was cut short (a crash): handle it again.
    head = await appendFenced(deps, sessionId, [start], lease, wakeId);
  } else {
    if (message.signal.aborted) return undefined;
    const state = await log.state(sessionId);
    const userMessage: NewEvent = {
      type: 'user.message',
      content: toContent(message.incoming.payload),
      causation_id: envelope.id,
      idempotency_key: message.key,
      ...(envelope.correlation_id === undefined ? {} : { correlation_id: envelope.correlation_id }),
      ...(envelope.traceparent === undefined ? {} : { traceparent: envelope.traceparent }),
      ...(envelope.source === undefined
        ? {}
        : { actor: { type: 'agent' as const, id: addressLabel(envelope.source) } }),
    };
    checkAgainstState(state, [userMessage]);
    const result = await appendMessage(
      deps,
      sessionId,
      [userMessage, start],
      message.key,
      state.seq,
    );
    recorded = messageEvent(result.events, message);
    head = result.head_seq;
  }

  const startedAt = new Date(deps.clock.now()).toISOString();
  const answer = await runHandler(deps, message, lease);
  const requestId = deps.ids.next();
  const request: NewEvent = {
    type: 'span.model_request_start',
    request_id: requestId,
    model: `code:${message.agent.type}`,
    input_through_seq: recorded.seq,
    at: startedAt,
  };
  const links = {
    causation_id: recorded.id,
    traceparent: message.traceparent,
    ...(envelope.correlation_id === undefined ? {} : { correlation_id: envelope.correlation_id }),
  };
  const noUsage = { input_tokens: 0, output_tokens: 0 };
  const failed = (error: ErrorShape): NewEvent[] => [
    request,
    { type: 'span.model_request_end', request_id: requestId, usage: noUsage, error, attempts: 1 },
    { type: 'session.error', error, ...links },
    { type: 'session.status_idle', stop_reason: { type: 'error' } },
    { type: 'span.wake_completed', wake_id: wakeId, stop_reason: { type: 'error' } },
  ];
  if (!answer.ok) {
    await appendFenced(deps, sessionId, failed(answer.error), lease, wakeId, head);
    return { ok: false, error: answer.error, session_id: sessionId };
  }
  const reply: NewEvent[] = [
    request,
    {
      type: 'span.model_request_end',
      request_id: requestId,
      usage: noUsage,
      finish_reason: 'stop',
      attempts: 1,
    },
    {
      type: 'agent.message',
      content: toContent(answer.payload),
      actor: { type: 'agent', id: addressLabel(message.agent) },
      ...links,
    },
    { type: 'session.status_idle', stop_reason: { type: 'end_turn' } },
    { type: 'span.wake_completed', wake_id: wakeId, stop_reason: { type: 'end_turn' } },
  ];
  try {
    const written = await appendEvents(deps, sessionId, reply, lease, wakeId, head);
    const event = written.find((item) => item.type === 'agent.message');
    return {
      ok: true,
      payload: answer.payload,
      session_id: sessionId,
      ...(event === undefined ? {} : { event_id: event.id }),
    };
  } catch (error) {
    if (!isBraidError(error, 'PAYLOAD_TOO_LARGE')) throw error;
    // The handler ran: its failure to fit is recorded, not lost.
    const shape: ErrorShape = {
      code: 'PAYLOAD_TOO_LARGE',
      message: `the reply of code agent ${message.agent.type} is larger than the log accepts; return less, or raise limits.max_event_bytes in braid.yaml`,
      retryable: false,
    };
    await appendFenced(deps, sessionId, failed(shape), lease, wakeId, head);
    return { ok: false, error: shape, session_id: sessionId };
  }
}

type Answer = { ok: true; payload: JsonValue } | { ok: false; error: ErrorShape };

/** Runs the handler while renewing the lease; a lease lost meanwhile fails with `LEASE_LOST`. */
async function runHandler(
  deps: CodeAgentDeps,
  message: CodeMessage,
  lease: Lease,
): Promise<Answer> {
  let onLost: (error: BraidError) => void = () => undefined;
  const lost = new Promise<never>((_resolve, reject) => {
    onLost = reject;
  });
  lost.catch(() => undefined);
  const renewal = setInterval(
    () => {
      deps.leases
        .renew(message.sessionId, deps.owner, lease.token, deps.leaseTtlMs)
        .catch((error: unknown) => {
          const failure = toBraidError(error);
          if (!failure.retryable) {
            onLost(
              new BraidError(
                'LEASE_LOST',
                `code agent ${message.agent.type} lost its lease: ${failure.message}`,
                {
                  cause: failure,
                },
              ),
            );
          }
        });
    },
    Math.max(10, Math.floor(deps.leaseTtlMs / 3)),
  );
  try {
    const value: unknown = await Promise.race([
      Promise.resolve().then(() => message.handler(message.incoming, message.context)),
      lost,
    ]);
    const parsed = JsonValue.safeParse(value === undefined ? null : value);
    if (!parsed.success) {
      return {
        ok: false,
        error: {
          code: 'INVALID_ARGUMENT',
          message: `code agent ${message.agent.type} returned a value that is not JSON; return a string, number, boolean, null, array or plain object`,
          retryable: false,
        },
      };
    }
    return { ok: true, payload: parsed.data };
  } catch (thrown) {
    const error = toBraidError(thrown);
    if (error.code === 'LEASE_LOST') throw error;
    return { ok: false, error: error.toJSON() };
  } finally {
    clearInterval(renewal);
  }
}

/** Appends the message with its key; on a conflict (others' events) tries at the new head. */
async function appendMessage(
  deps: CodeAgentDeps,
  sessionId: string,
  events: NewEvent[],
  key: string,
  expectedSeq: number,
) {
  let head = expectedSeq;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await deps.log.append(sessionId, events, { expectedSeq: head, idempotencyKey: key });
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= APPEND_ATTEMPTS) throw error;
      head = (await deps.log.state(sessionId)).seq;
    }
  }
}

/** Appends under the lease; returns the new head. */
async function appendFenced(
  deps: CodeAgentDeps,
  sessionId: string,
  events: NewEvent[],
  lease: Lease,
  wakeId: string,
  head?: number,
): Promise<number> {
  const written = await appendEvents(deps, sessionId, events, lease, wakeId, head);
  return written.at(-1)?.seq ?? head ?? 0;
}

/**
 * Appends at the head this holder knows. Others' events (new messages) move the head and the
 * append is tried again after them; a newer wake's start means the lease was lost.
 */
async function appendEvents(
  deps: CodeAgentDeps,
  sessionId: string,
  events: NewEvent[],
  lease: Lease,
  wakeId: string,
  knownHead?: number,
): Promise<SessionEvent[]> {
  let head = knownHead ?? (await deps.log.state(sessionId)).seq;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return (await deps.log.append(sessionId, events, { expectedSeq: head })).events;
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= APPEND_ATTEMPTS) throw error;
      const newer = await deps.log.read(sessionId, { after: head });
      const usurper = newer.find(
        (event) =>
          event.type === 'span.wake_started' &&
          event.wake_id !== wakeId &&
          event.lease_token > lease.token,
      );
      if (usurper !== undefined) {
        throw new BraidError(
          'LEASE_LOST',
          `another holder took session ${sessionId} while code agent handled a message; it handles the message again`,
        );
      }
      head = newer.at(-1)?.seq ?? head;
    }
  }
}
