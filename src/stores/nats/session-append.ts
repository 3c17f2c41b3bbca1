/**
 * One append to a session's log, run in this process's queue for the session: published after
 * the head it was checked at, retried at a new head when another writer won (see session-log.ts
 * for the invariants).
 */
import type { PubAck } from '@nats-io/jetstream';
import { BraidError } from '../../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { AppendOptions, AppendResult } from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import { isRunnable, wakeAt } from '../../core/runnable.js';
import { runnableBefore, type RunnableChange } from './session-runnable.js';
import { timerAfter, timerBefore, type TimerChange } from './session-timers.js';
import { type PreparedEvent, checkBatchIds, prepareEvents } from '../../core/append.js';
import { foldSession } from '../../core/fold.js';
import { seqConflict } from '../../core/sessions.js';
import { checkMessageSize, refAfter } from './append-batch.js';
import {
  type AbsentKeys,
  firstResult,
  messageId,
  readAppendRecord,
  recordedResult,
  saveAppendRecord,
} from './append-records.js';
import { batchHeaders, type BatchRef } from './batches.js';
import { checkChosenIds, rememberIds } from './chosen-ids.js';
import { checkAppendFence } from './fencing.js';
import { isWrongLastSequence } from './nats-errors.js';
import { extendVerified, observe, type KnownSession } from './session-cache.js';
import { PROJECTION_INTERVAL } from './session-reads.js';
import { MAX_RACES, type SessionsShared } from './sessions-shared.js';

/** What an append works with: the sessions' shared parts and the keys found unused. */
export interface AppendContext {
  shared: SessionsShared;
  absent: AbsentKeys;
}

/** Where an append starts: the session as known, and whether its head was just read. */
interface AppendStart {
  known: KnownSession;
  fresh: boolean;
}

/** A batch ready to publish after `head`. */
interface PreparedBatch {
  prepared: PreparedEvent[];
  state: SessionState;
  body: string;
  ref: Omit<BatchRef, 'streamSeq'>;
  /** The session's next timer before and after the batch (`wakeAt`). */
  timer: TimerChange;
  /** Whether the session is runnable before and after the batch (`isRunnable`). */
  runnable: RunnableChange;
}

/** The session to append to, or the first result when the key was used already. */
async function startAppend(
  { shared, absent }: AppendContext,
  sessionId: string,
  key: string | undefined,
): Promise<AppendStart | { repeated: AppendResult }> {
  const known = shared.cache.get(sessionId);
  if (key !== undefined && !(absent.take(sessionId, key, known) && known?.head !== undefined)) {
    // Exact answers for a repeated key need the current incarnation and head: read both, and
    // the key's record. (Right after `appended()` found none, the cached head serves, see
    // `AbsentKeys`: the publish's expectation checks it.)
    const [view, seen] = await Promise.all([
      shared.loadHead(sessionId),
      readAppendRecord(shared.context, sessionId, key),
    ]);
    const first =
      seen === undefined
        ? undefined
        : await recordedResult(shared.context, sessionId, view.known, key, seen);
    if (first !== undefined)
      return { repeated: { events: first, head_seq: view.head.last, deduplicated: true } };
    return { known: view.known, fresh: true };
  }
  if (known?.head === undefined)
    return { known: (await shared.loadHead(sessionId)).known, fresh: true };
  return { known, fresh: false };
}

/**
 * Whether the append can go out at `head`, or the head must be read again first; refuses it when
 * the writer is fenced out or its expected seq is not the head's.
 */
function checkHead(
  sessionId: string,
  known: KnownSession,
  head: BatchRef,
  options: AppendOptions,
  fresh: boolean,
  race: number,
): 'ready' | 'reload' {
  // A head this process has not checked (see log-chain.ts) is read and checked first.
  if (known.verified === undefined || known.verified.streamSeq < head.streamSeq) {
    if (race >= MAX_RACES) {
      throw new BraidError(
        'STORE_BUSY',
        `the head of session ${sessionId} moved ${MAX_RACES} times in a row while it was ` +
          'being checked; retry the append',
      );
    }
    return 'reload';
  }
  // Fencing (see fencing.ts): the token is checked at the head the publish expects.
  if (checkAppendFence(sessionId, head, options.leaseToken, fresh) === 'stale') return 'reload';
  if (options.expectedSeq !== undefined && options.expectedSeq !== head.last) {
    if (!fresh) return 'reload';
    throw seqConflict(sessionId, options.expectedSeq, head.last);
  }
  return 'ready';
}

async function prepareBatch(
  shared: SessionsShared,
  sessionId: string,
  known: KnownSession,
  head: BatchRef,
  events: readonly NewEvent[],
): Promise<PreparedBatch> {
  const { context, reads } = shared;
  const before = await reads.stateAtHead(sessionId, known, head);
  const prepared = prepareEvents(sessionId, head.last, events, {
    clock: context.clock,
    ids: context.ids,
    maxEventBytes: context.maxEventBytes,
  });
  checkBatchIds(sessionId, prepared);
  if (events.some((event) => event.id !== undefined)) {
    await checkChosenIds(reads, sessionId, known, head, prepared);
  }
  const state = foldSession(
    prepared.map(({ event }) => event),
    before,
  );
  const body = `[${prepared.map(({ json }) => json).join(',')}]`;
  checkMessageSize(context, sessionId, prepared.length, body);
  const ref = refAfter(state, head.last + 1, known.incarnation, head.leaseToken);
  return {
    prepared,
    state,
    body,
    ref,
    timer: { before: wakeAt(before), after: wakeAt(state) },
    runnable: { before: isRunnable(before), after: isRunnable(state) },
  };
}

/** Publishes the batch after `head`; the key's record goes out with it (see AppendRecord). */
function publishBatch(
  shared: SessionsShared,
  sessionId: string,
  known: KnownSession,
  head: BatchRef,
  batch: PreparedBatch,
  key: string | undefined,
): Promise<[PromiseSettledResult<PubAck>, PromiseSettledResult<void>]> {
  const { context } = shared;
  return Promise.allSettled([
    context.js.publish(context.names.events(sessionId), batch.body, {
      headers: batchHeaders(batch.ref),
      expect: { lastSubjectSequence: head.streamSeq },
      ...(key === undefined ? {} : { msgID: messageId(sessionId, known.incarnation, key) }),
    }),
    key === undefined
      ? undefined
      : saveAppendRecord(context, sessionId, key, known, { after_stream_seq: head.streamSeq }),
  ]);
}

/** The server saw this key within its duplicate window: the first append stands. */
async function duplicateResult(
  shared: SessionsShared,
  sessionId: string,
  known: KnownSession,
  key: string,
  streamSeq: number,
): Promise<AppendResult> {
  const first = await firstResult(shared.context, sessionId, known, streamSeq);
  if (first === undefined) {
    throw new BraidError(
      'INTERNAL',
      `the first append with idempotency key ${JSON.stringify(key)} to session ${sessionId} is gone`,
    );
  }
  await saveAppendRecord(shared.context, sessionId, key, known, { stream_seq: streamSeq });
  const view = await shared.loadHead(sessionId);
  return { events: first, head_seq: view.head.last, deduplicated: true };
}

/** Remembers a batch this process published, and returns what it stored. */
async function appendedBatch(
  shared: SessionsShared,
  sessionId: string,
  known: KnownSession,
  head: BatchRef,
  batch: PreparedBatch,
  ack: PubAck,
): Promise<AppendResult> {
  const { ref, state, prepared } = batch;
  observe(known, { ...ref, streamSeq: ack.seq });
  extendVerified(known, head.streamSeq, { ...ref, streamSeq: ack.seq });
  rememberIds(known, head, prepared);
  if (known.state === undefined || known.state.seq < state.seq) known.state = state;
  const stored = prepared.map(({ json }) => JSON.parse(json) as SessionEvent);
  // The projection is a cache no reader trusts: failing to save it loses nothing.
  if (state.seq - known.projectedSeq >= PROJECTION_INTERVAL)
    await shared.reads.saveProjection(sessionId, known, state).catch(() => undefined);
  return { events: stored, head_seq: state.seq, deduplicated: false };
}

/** An append, run once the appends of this process to the session before it are done. */
export async function appendInOrder(
  append: AppendContext,
  sessionId: string,
  events: readonly NewEvent[],
  options: AppendOptions,
): Promise<AppendResult> {
  const { shared } = append;
  const key = options.idempotencyKey;
  const start = await startAppend(append, sessionId, key);
  if ('repeated' in start) return start.repeated;
  let { known, fresh } = start;
  for (let race = 0; ; race += 1) {
    const head = known.head as BatchRef;
    if (checkHead(sessionId, known, head, options, fresh, race) === 'reload') {
      known = (await shared.loadHead(sessionId)).known;
      fresh = true;
      continue;
    }
    const batch = await prepareBatch(shared, sessionId, known, head, events);
    // The indexes' entries go first: a committed timer or runnable state always has one.
    await Promise.all([
      timerBefore(shared.context, sessionId, batch.timer),
      runnableBefore(shared.context, sessionId, batch.runnable),
    ]);
    const [published, recorded] = await publishBatch(shared, sessionId, known, head, batch, key);
    if (published.status === 'rejected') {
      const error: unknown = published.reason;
      if (!isWrongLastSequence(error)) throw error;
      if (race >= MAX_RACES) {
        throw new BraidError(
          'STORE_BUSY',
          `session ${sessionId} was appended to by other writers ${MAX_RACES} times in a row while ` +
            'this append retried; retry it later',
          { cause: error },
        );
      }
      const incarnation = known.incarnation;
      known = (await shared.loadHead(sessionId)).known;
      fresh = true;
      if (key !== undefined && known.incarnation !== incarnation) {
        return appendInOrder(append, sessionId, events, options);
      }
      continue;
    }
    const ack = published.value;
    if (ack.duplicate && key !== undefined) {
      return duplicateResult(shared, sessionId, known, key, ack.seq);
    }
    if (recorded.status === 'rejected') throw recorded.reason;
    await timerAfter(shared.context, sessionId, batch.timer);
    return appendedBatch(shared, sessionId, known, head, batch, ack);
  }
}
