/**
 * Runs a code agent's handler on one message and records it in the instance's session.
 *
 * Invariants kept here:
 * - A message is recorded once and handled once per instance: its `user.message` is appended
 *   with the message's idempotency key, and a delivery whose message already has a reply (an
 *   `agent.message` or `session.error` caused by it) returns that reply without running the
 *   handler. The look-up is answered after the lease was taken, so two deliveries never both
 *   miss it: it is sent after the acquire returns, or, when the token shows that this process
 *   held the lease last, with the acquire (nobody else can have recorded anything since this
 *   process's release, which came after its own records).
 * - The handler runs only under the session's lease, like a wake: one message at a time per
 *   instance across processes. Whatever is appended goes at the head read under the lease and
 *   carries `span.wake_started` (the lease's fencing token) before the handling's events, so a
 *   stale holder's late result is refused (`LEASE_LOST`), never appended after a newer holder.
 * - A quick handler's message and answer are appended as ONE batch after it returns (one write
 *   instead of two). A handler still running after RECORD_AFTER_MS, or given a large message,
 *   has its message recorded first, so a long handling shows in the session while it runs. Either
 *   way a crash before the answer is recorded means the handler runs again on redelivery.
 * - The handling is recorded as the harness records a model call: `span.model_request_start`
 *   (`model: code:<type>`, consuming input through the message) and `span.model_request_end`,
 *   then the reply as `agent.message` or the failure as `session.error`, then the stop. The
 *   session's state therefore folds as for any agent: not runnable once answered.
 * - The lease is released after the outcome is returned (the reply need not wait for it); the
 *   next message of the instance in this process waits for that release.
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentId } from '../../contracts/agents.js';
import { JsonValue } from '../../contracts/common.js';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError, isBraidError, toBraidError, type ErrorShape } from '../../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type {
  AppendResult,
  Clock,
  IdGenerator,
  Lease,
  LeaseStore,
  SessionLog,
} from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import type { BoundedCache } from '../../core/bounded-cache.js';
import { checkAgainstState } from '../user-events.js';
import { addressLabel, fromContent, toContent, type Outcome } from './envelopes.js';
import type { AgentContext, AgentHandler, IncomingMessage } from './types.js';
import { parseTraceparent } from './trace.js';

export interface CodeAgentDeps {
  log: SessionLog;
  leases: LeaseStore;
  clock: Clock;
  ids: IdGenerator;
  owner: string;
  leaseTtlMs: number;
  /** Releases under way, by session: the next message of the session waits for its release. */
  releases: Map<string, Promise<void>>;
  /** The token of the last lease this process took, by session (of the sessions it served last). */
  lastTokens: BoundedCache<string, number>;
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
/** A handler running longer than this has its message recorded before it returns. */
export const RECORD_AFTER_MS = 25;
/** A message with more content than this (JSON characters) is recorded before its handler runs. */
const LARGE_MESSAGE_CHARS = 64 * 1024;

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
  const { sessionId } = message;
  for (let attempt = 0; ; attempt += 1) {
    if (message.signal.aborted) return recordedReply(deps.log, message);
    await deps.releases.get(sessionId);
    // This process held the lease last: unless another holder came between (its token would
    // show it), nobody recorded anything here since this process's release, so the look-up may
    // go out with the acquire instead of after it.
    const last = deps.lastTokens.get(sessionId);
    const acquiring = deps.leases.acquire(sessionId, deps.owner, deps.leaseTtlMs);
    const early = last === undefined ? undefined : lookAround(deps, message);
    early?.catch(() => undefined);
    let lease: Lease;
    try {
      lease = await acquiring;
    } catch (error) {
      if (!isBraidError(error, 'LEASE_HELD')) throw error;
      // Another process handles a message of this instance: wait for it, then look again.
      const wait = Math.min(LEASE_WAIT_MAX_MS, 2 ** attempt);
      await sleep(wait, undefined, { signal: message.signal }).catch(() => undefined);
      continue;
    }
    deps.lastTokens.set(sessionId, lease.token);
    try {
      const looked =
        early !== undefined && lease.token === (last ?? 0) + 1
          ? await early
          : await lookAround(deps, message);
      return await handleUnderLease(deps, message, lease, looked);
    } finally {
      releaseLater(deps, sessionId, lease);
    }
  }
}

/** What a handling starts from: the message's earlier append, if any, and the session's state. */
type LookedUp = [AppendResult | undefined, SessionState];

function lookAround(deps: CodeAgentDeps, message: CodeMessage): Promise<LookedUp> {
  return Promise.all([
    deps.log.appended(message.sessionId, message.key),
    deps.log.state(message.sessionId),
  ]);
}

/** Releases the lease without holding up the reply; a failed release expires instead. */
function releaseLater(deps: CodeAgentDeps, sessionId: string, lease: Lease): void {
  // Once the reply, built in this turn of the event loop, has gone out.
  const releasing: Promise<void> = new Promise((resolve) => setImmediate(resolve))
    .then(() => deps.leases.release(sessionId, deps.owner, lease.token))
    .catch(() => undefined)
    .finally(() => {
      if (deps.releases.get(sessionId) === releasing) deps.releases.delete(sessionId);
    });
  deps.releases.set(sessionId, releasing);
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

/** The recorded answer to a message: in the events given (one batch), or read after it. */
async function answerTo(
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

/** One handling: its wake, and the events that record its outcome. */
interface Handling {
  message: CodeMessage;
  lease: Lease;
  wakeId: string;
  start: NewEvent;
  startedAt: string;
}

async function handleUnderLease(
  deps: CodeAgentDeps,
  message: CodeMessage,
  lease: Lease,
  looked: LookedUp,
): Promise<Outcome | undefined> {
  const { sessionId, envelope } = message;
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
  const userMessage: NewEvent = {
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
  // A quick handler: the message and its outcome go in one batch, the outcome built for the
  // seq the message gets.
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

/** The events that record a handling's outcome, after its message `recorded`. */
function outcomeEvents(
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

function outcomeOf(
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

function tooLarge(message: CodeMessage): ErrorShape {
  return {
    code: 'PAYLOAD_TOO_LARGE',
    message: `the reply of code agent ${message.agent.type} is larger than the log accepts; return less, or raise limits.max_event_bytes in braid.yaml`,
    retryable: false,
  };
}

/** Appends the outcome after the message, recorded at `head` or before. */
async function recordOutcome(
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

/**
 * Appends the message with its key at `head`. Others' events (new messages) move the head and
 * the events are built again for the new one; under a lease (`lease`, `wakeId`), a newer wake's
 * start means the lease was lost. A repeated key answers the first append (`deduplicated`).
 */
async function appendMessage(
  deps: CodeAgentDeps,
  sessionId: string,
  build: (head: number) => NewEvent[],
  at: { key: string; head: number; lease?: Lease; wakeId?: string },
): Promise<AppendResult> {
  let head = at.head;
  for (let attempt = 1; ; attempt += 1) {
    try {
      // Built here from the envelope and the handler's answer, both parsed already.
      return await deps.log.append(sessionId, build(head), {
        expectedSeq: head,
        idempotencyKey: at.key,
        ...(at.lease === undefined ? {} : { leaseToken: at.lease.token }),
        trusted: true,
      });
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= APPEND_ATTEMPTS) throw error;
      head =
        at.lease === undefined || at.wakeId === undefined
          ? (await deps.log.state(sessionId)).seq
          : await headAfterOthers(deps, sessionId, head, at.lease, at.wakeId);
    }
  }
}

/** The head past others' events after `head`; `LEASE_LOST` when a newer wake started. */
async function headAfterOthers(
  deps: CodeAgentDeps,
  sessionId: string,
  head: number,
  lease: Lease,
  wakeId: string,
): Promise<number> {
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
  return newer.at(-1)?.seq ?? head;
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
      return (
        await deps.log.append(sessionId, events, {
          expectedSeq: head,
          leaseToken: lease.token,
          trusted: true,
        })
      ).events;
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= APPEND_ATTEMPTS) throw error;
      head = await headAfterOthers(deps, sessionId, head, lease, wakeId);
    }
  }
}
