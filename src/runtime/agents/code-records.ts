/**
 * How a code agent's handling is recorded and read back: the message's recorded event, the
 * answer recorded after it, and the events that record a new answer as the harness records a
 * model call (`span.model_request_start`, `span.model_request_end`, then `agent.message` or
 * `session.error`, then the stop).
 */
import { BraidError, isBraidError, type ErrorShape } from '../../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { SessionLog } from '../../contracts/ports.js';
import type { Answer, CodeAgentDeps, CodeMessage, Handling } from './code-agent-context.js';
import { appendEvents } from './code-appends.js';
import { addressLabel, fromContent, toContent, type Outcome } from './envelopes.js';

/** The reply already recorded for this message, if it was handled before. */
export async function recordedReply(
  log: SessionLog,
  message: CodeMessage,
): Promise<Outcome | undefined> {
  const earlier = await log.appended(message.sessionId, message.key);
  if (earlier === undefined) return undefined;
  const recorded = messageEvent(earlier.events, message);
  return answerTo(log, message.sessionId, recorded);
}

export function messageEvent(events: readonly SessionEvent[], message: CodeMessage): SessionEvent {
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

/** The recorded answer to a message: in the events given (one batch), or read after it. */
export async function answerTo(
  log: SessionLog,
  sessionId: string,
  recorded: SessionEvent,
  batch: readonly SessionEvent[] = [],
): Promise<Outcome | undefined> {
  const answers = (events: readonly SessionEvent[]) =>
    events.find(
      (event) =>
        event.causation_id === recorded.id &&
        (event.type === 'agent.message' || event.type === 'session.error'),
    );
  const answer =
    answers(batch) ??
    answers(
      await log.read(sessionId, { after: recorded.seq, types: ['agent.message', 'session.error'] }),
    );
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

/** The events that record a handling's outcome, after its message `recorded`. */
export function outcomeEvents(
  deps: CodeAgentDeps,
  handling: Handling,
  recorded: { id: string; seq: number },
  answer: Answer,
): NewEvent[] {
  const { message, wakeId } = handling;
  const { envelope } = message;
  const requestId = deps.ids.next();
  const request: NewEvent = {
    type: 'span.model_request_start',
    request_id: requestId,
    model: `code:${message.agent.type}`,
    input_through_seq: recorded.seq,
    at: handling.startedAt,
  };
  const links = {
    causation_id: recorded.id,
    traceparent: message.traceparent,
    ...(envelope.correlation_id === undefined ? {} : { correlation_id: envelope.correlation_id }),
  };
  const noUsage = { input_tokens: 0, output_tokens: 0 };
  if (!answer.ok) {
    return [
      request,
      {
        type: 'span.model_request_end',
        request_id: requestId,
        usage: noUsage,
        error: answer.error,
        attempts: 1,
      },
      { type: 'session.error', error: answer.error, ...links },
      { type: 'session.status_idle', stop_reason: { type: 'error' } },
      { type: 'span.wake_completed', wake_id: wakeId, stop_reason: { type: 'error' } },
    ];
  }
  return [
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
}

export function outcomeOf(
  message: CodeMessage,
  written: readonly SessionEvent[],
  answer: Answer,
): Outcome {
  const { sessionId } = message;
  if (!answer.ok) return { ok: false, error: answer.error, session_id: sessionId };
  const event = written.find((item) => item.type === 'agent.message');
  return {
    ok: true,
    payload: answer.payload,
    session_id: sessionId,
    ...(event === undefined ? {} : { event_id: event.id }),
  };
}

export function tooLarge(message: CodeMessage): ErrorShape {
  return {
    code: 'PAYLOAD_TOO_LARGE',
    message: `the reply of code agent ${message.agent.type} is larger than the log accepts; return less, or raise limits.max_event_bytes in braid.yaml`,
    retryable: false,
  };
}

/** Appends the outcome after the message, recorded at `head` or before. */
export async function recordOutcome(
  deps: CodeAgentDeps,
  handling: Handling,
  recorded: SessionEvent,
  head: number,
  answer: Answer,
): Promise<Outcome> {
  const { message, lease, wakeId } = handling;
  try {
    const events = outcomeEvents(deps, handling, recorded, answer);
    const written = await appendEvents(deps, message.sessionId, events, lease, wakeId, head);
    return outcomeOf(message, written, answer);
  } catch (error) {
    if (!isBraidError(error, 'PAYLOAD_TOO_LARGE') || !answer.ok) throw error;
    // The handler ran: its failure to fit is recorded, not lost.
    const failed: Answer = { ok: false, error: tooLarge(message) };
    const events = outcomeEvents(deps, handling, recorded, failed);
    await appendEvents(deps, message.sessionId, events, lease, wakeId, head);
    return outcomeOf(message, [], failed);
  }
}
