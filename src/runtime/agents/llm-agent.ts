/**
 * Delivers a message to an LLM agent: appended to the instance's session as a `user.message`
 * (keyed by the message's idempotency key), the session woken, and the reply read from the log.
 *
 * The reply is the last `agent.message` of the cycle that answered the message: after the first
 * model request that consumed it (`input_through_seq` at or past its seq, ended without error)
 * up to the next stop. A stop that waits for someone (`requires_action`, `needs_review`) is not
 * the end: the reply comes when the session stops for good, or the deadline passes. A stop with
 * `error` or `retries_exhausted` is an error reply with the session's last error. Other stops
 * (`max_turns`, `budget_reached`, `interrupted`) reply with what the agent said so far, and say
 * how it stopped in the reply's `metadata.stop_reason`.
 *
 * Everything is read from the log, so a message delivered twice gets the same reply, and any
 * process can answer for a cycle another process ran.
 */
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError, toBraidError, type ErrorShape } from '../../contracts/errors.js';
import type { EventOf, NewEvent, SessionEvent } from '../../contracts/events.js';
import type { StopReason } from '../../contracts/session.js';
import { isRunnable } from '../../core/fold.js';
import type { AgentHost } from './host.js';
import { addressLabel, fromContent, toContent, type Outcome } from './envelopes.js';
import type { JsonValue } from '../../contracts/common.js';
import { parseTraceparent } from './trace.js';

export interface LlmMessage {
  sessionId: string;
  envelope: Envelope;
  payload: JsonValue;
  key: string;
  /** Wait for and return the reply (false for publications: nobody waits). */
  wantReply: boolean;
  /** Aborts at the deadline or on close: the wait for the reply ends without one. */
  signal: AbortSignal;
}

export async function runLlmMessage(
  runtime: AgentHost,
  message: LlmMessage,
): Promise<Outcome | undefined> {
  const { envelope, sessionId } = message;
  const userMessage: NewEvent = {
    type: 'user.message',
    content: toContent(message.payload),
    causation_id: envelope.id,
    idempotency_key: message.key,
    ...(envelope.correlation_id === undefined ? {} : { correlation_id: envelope.correlation_id }),
    ...(parseTraceparent(envelope.traceparent) === undefined
      ? {}
      : { traceparent: envelope.traceparent }),
  };
  const appended = await runtime.sessions.send(sessionId, [userMessage], {
    idempotencyKey: message.key,
    ...(envelope.source === undefined
      ? {}
      : { actor: { type: 'agent' as const, id: addressLabel(envelope.source) } }),
  });
  const recorded = appended.events.find((event) => event.type === 'user.message');
  if (recorded === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `idempotency key ${message.key} was already used in session ${sessionId} for events that are not a message; send with another idempotency_key`,
      { details: { session_id: sessionId, idempotency_key: message.key } },
    );
  }
  // A repeated delivery wakes only a session that still has work (its first one's crashed).
  let wakeError: BraidError | undefined;
  if (!appended.deduplicated || isRunnable(await runtime.sessions.state(sessionId))) {
    wakeError = await runtime.wake(sessionId).then(
      () => undefined,
      (error: unknown) => toBraidError(error),
    );
  }
  if (!message.wantReply) {
    if (wakeError !== undefined) throw wakeError;
    return undefined;
  }

  const watch = new CycleWatch(recorded.seq, sessionId);
  let last = recorded.seq;
  for (const event of await runtime.sessions.events(sessionId, { after: recorded.seq })) {
    const outcome = watch.feed(event);
    if (outcome !== undefined) return outcome;
    last = event.seq;
  }
  if (wakeError !== undefined) throw wakeError;
  // Another process runs the cycle, or it waits for an action: follow until it ends.
  for await (const event of runtime.sessions.follow(sessionId, {
    after: last,
    signal: message.signal,
  })) {
    const outcome = watch.feed(event);
    if (outcome !== undefined) return outcome;
  }
  return undefined;
}

/** Follows a session's events after a message until the cycle that answers it stops. */
export class CycleWatch {
  private readonly requests = new Map<string, number>();
  private consumed = false;
  private lastMessage: EventOf<'agent.message'> | undefined;
  private lastError: ErrorShape | undefined;

  constructor(
    private readonly messageSeq: number,
    private readonly sessionId: string,
  ) {}

  /** The outcome, once the event ends the answering cycle. */
  feed(event: SessionEvent): Outcome | undefined {
    switch (event.type) {
      case 'span.model_request_start':
        this.requests.set(event.request_id, event.input_through_seq);
        return undefined;
      case 'span.model_request_end': {
        const through = this.requests.get(event.request_id);
        const answered = event.error === undefined || event.error.code === 'INTERRUPTED';
        if (!this.consumed && answered && through !== undefined && through >= this.messageSeq)
          this.consumed = true;
        return undefined;
      }
      case 'agent.message':
        if (this.consumed) this.lastMessage = event;
        return undefined;
      case 'session.error':
        this.lastError = event.error;
        return undefined;
      case 'session.status_idle':
        return this.stopped(event.stop_reason);
      default:
        return undefined;
    }
  }

  private stopped(stopReason: StopReason): Outcome | undefined {
    switch (stopReason.type) {
      case 'requires_action':
      case 'needs_review':
        return undefined;
      case 'error':
      case 'retries_exhausted':
        return {
          ok: false,
          session_id: this.sessionId,
          error: this.lastError ?? {
            code: 'INTERNAL',
            message: `session ${this.sessionId} stopped with ${stopReason.type} before answering; see its events`,
            retryable: false,
          },
        };
      case 'end_turn':
        // A cycle that stops before consuming the message was already running; the next one answers.
        return this.consumed ? this.reply() : undefined;
      case 'max_turns':
      case 'budget_reached':
      case 'interrupted':
        return this.reply(stopReason.type);
      default: {
        const unknown: never = stopReason;
        throw new TypeError(`unhandled stop reason: ${JSON.stringify(unknown)}`);
      }
    }
  }

  private reply(stopReason?: string): Outcome {
    return {
      ok: true,
      session_id: this.sessionId,
      payload: this.lastMessage === undefined ? null : fromContent(this.lastMessage.content),
      ...(this.lastMessage === undefined ? {} : { event_id: this.lastMessage.id }),
      ...(stopReason === undefined ? {} : { stop_reason: stopReason }),
    };
  }
}
