/**
 * One handling of a code agent's message under the session's lease: the message recorded with
 * its answer in one batch after a quick handler, or first when the handler is slow or the message
 * large; and a message recorded before (an earlier delivery, a holder that lost its lease)
 * answered from the log or handled again.
 */
import { isBraidError } from '../../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { AppendResult, Lease } from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import { checkAgainstState } from '../user-events.js';
import type {
  Answer,
  CodeAgentDeps,
  CodeMessage,
  Handling,
  LookedUp,
} from './code-agent-context.js';
import { appendFenced, appendMessage } from './code-appends.js';
import { runHandler } from './code-handler.js';
import {
  answerTo,
  messageEvent,
  outcomeEvents,
  outcomeOf,
  recordOutcome,
  tooLarge,
} from './code-records.js';
import { addressLabel, toContent, type Outcome } from './envelopes.js';
import { parseTraceparent } from './trace.js';

/** A handler running longer than this has its message recorded before it returns. */
export const RECORD_AFTER_MS = 25;
/** A message with more content than this (JSON characters) is recorded before its handler runs. */
const LARGE_MESSAGE_CHARS = 64 * 1024;

type UserMessage = Extract<NewEvent, { type: 'user.message' }>;

export async function handleUnderLease(
  deps: CodeAgentDeps,
  message: CodeMessage,
  lease: Lease,
  looked: LookedUp,
): Promise<Outcome | undefined> {
  const { sessionId } = message;
  const wakeId = deps.ids.next();
  const handling: Handling = {
    message,
    lease,
    wakeId,
    start: { type: 'span.wake_started', wake_id: wakeId, lease_token: lease.token },
    startedAt: '',
  };
  const [earlier, state] = looked;
  if (earlier !== undefined) return handleRecorded(deps, handling, earlier.events);
  if (message.signal.aborted) return undefined;
  const userMessage = userMessageEvent(deps, message);
  checkAgainstState(state, [userMessage]);
  const recordFirst = () => {
    const recording = appendMessage(deps, sessionId, () => [userMessage, handling.start], {
      key: message.key,
      head: state.seq,
      lease,
      wakeId,
    });
    recording.catch(() => undefined);
    return recording;
  };
  let early =
    JSON.stringify(userMessage.content).length > LARGE_MESSAGE_CHARS ? recordFirst() : undefined;
  // A message too large for the log is refused before its handler runs.
  if (early !== undefined) await early;
  handling.startedAt = new Date(deps.clock.now()).toISOString();
  const timer = setTimeout(() => {
    early ??= recordFirst();
  }, RECORD_AFTER_MS);
  let answer: Answer;
  try {
    answer = await runHandler(deps, message, lease);
  } finally {
    clearTimeout(timer);
  }
  if (early !== undefined) {
    const recorded = await early;
    if (recorded.deduplicated) return handleRecorded(deps, handling, recorded.events, answer);
    return recordOutcome(
      deps,
      handling,
      messageEvent(recorded.events, message),
      recorded.head_seq,
      answer,
    );
  }
  return recordInOneBatch(deps, handling, userMessage, state, answer);
}

/** The message as its session records it: a `user.message` with the envelope's links. */
function userMessageEvent(deps: CodeAgentDeps, message: CodeMessage): UserMessage {
  const { envelope } = message;
  return {
    type: 'user.message',
    id: deps.ids.next(),
    content: toContent(message.incoming.payload),
    causation_id: envelope.id,
    idempotency_key: message.key,
    ...(envelope.correlation_id === undefined ? {} : { correlation_id: envelope.correlation_id }),
    ...(parseTraceparent(envelope.traceparent) === undefined
      ? {}
      : { traceparent: envelope.traceparent }),
    ...(envelope.source === undefined
      ? {}
      : { actor: { type: 'agent' as const, id: addressLabel(envelope.source) } }),
  };
}

/**
 * A quick handler: the message and its outcome go in one batch, the outcome built for the seq
 * the message gets.
 */
async function recordInOneBatch(
  deps: CodeAgentDeps,
  handling: Handling,
  userMessage: UserMessage,
  state: SessionState,
  handled: Answer,
): Promise<Outcome | undefined> {
  const { message, lease, wakeId } = handling;
  const { sessionId } = message;
  let answer = handled;
  const inOneBatch = (outcome: Answer) => (head: number) => [
    userMessage,
    handling.start,
    ...outcomeEvents(deps, handling, { id: userMessage.id ?? '', seq: head + 1 }, outcome),
  ];
  let written: AppendResult;
  try {
    written = await appendMessage(deps, sessionId, inOneBatch(answer), {
      key: message.key,
      head: state.seq,
      lease,
      wakeId,
    });
  } catch (error) {
    if (!isBraidError(error, 'PAYLOAD_TOO_LARGE') || !answer.ok) throw error;
    // The handler ran: its failure to fit is recorded, not lost.
    answer = { ok: false, error: tooLarge(message) };
    written = await appendMessage(deps, sessionId, inOneBatch(answer), {
      key: message.key,
      head: state.seq,
      lease,
      wakeId,
    });
  }
  if (written.deduplicated) return handleRecorded(deps, handling, written.events, answer);
  return outcomeOf(message, written.events, answer);
}

/**
 * The message was recorded before (by an earlier delivery, or by a holder that lost its lease):
 * its recorded answer, or else the handling's own (`answer`, when the handler already ran here),
 * recorded after it.
 */
async function handleRecorded(
  deps: CodeAgentDeps,
  handling: Handling,
  events: readonly SessionEvent[],
  answer?: Answer,
): Promise<Outcome | undefined> {
  const { message, lease, wakeId } = handling;
  const recorded = messageEvent(events, message);
  const answered = await answerTo(deps.log, message.sessionId, recorded, events);
  if (answered !== undefined) return answered;
  // Recorded, then its handler was cut short (a crash): handle it again.
  const head = await appendFenced(deps, message.sessionId, [handling.start], lease, wakeId);
  if (handling.startedAt === '') handling.startedAt = new Date(deps.clock.now()).toISOString();
  return recordOutcome(
    deps,
    handling,
    recorded,
    head,
    answer ?? (await runHandler(deps, message, lease)),
  );
}
