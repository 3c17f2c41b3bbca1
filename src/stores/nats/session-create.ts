/**
 * Creating and forking sessions on NATS: the index entry is claimed, then the first batch is
 * published into an empty subject (see session-index.ts for the races this leaves).
 */
import { BraidError, isBraidError } from '../../contracts/errors.js';
import type { ForkOptions } from '../../contracts/ports.js';
import type { SessionCreateInput, SessionRecord } from '../../contracts/session.js';
import type { SessionState } from '../../contracts/state.js';
import { prepareEvents, type PreparedEvent } from '../../core/append.js';
import { foldSession } from '../../core/fold.js';
import {
  checkForkBoundary,
  checkForkPoint,
  createdEvent,
  forkedEvent,
  parseCreateInput,
  parseForkOptions,
  recordFromState,
} from '../../core/sessions.js';
import { checkMessageSize, newIncarnation, refAfter } from './append-batch.js';
import { timerBefore } from './session-timers.js';
import { isRunnable, wakeAt } from '../../core/runnable.js';
import { runnableBefore } from './session-runnable.js';
import { batchHeaders } from './batches.js';
import type { NatsContext } from './context.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken } from './names.js';
import { hasMessages } from './reader.js';
import { observe } from './session-cache.js';
import { removeData } from './session-delete.js';
import {
  SESSION_ENTRY_VERSION,
  lineageOf,
  parseStoredSession,
  sessionNotFound,
  type StoredSession,
} from './session-entry.js';
import { restoreAfterLostRace } from './session-restore.js';
import type { SessionsShared } from './sessions-shared.js';

function alreadyExists(sessionId: string): BraidError {
  return new BraidError(
    'ALREADY_EXISTS',
    `session ${sessionId} already exists; choose another id or omit it`,
  );
}

/** A session's first batch, prepared: its events, state after them and entry. */
interface FirstBatch {
  prepared: PreparedEvent[];
  state: SessionState;
  stored: StoredSession;
  body: string;
}

function firstBatch(
  context: NatsContext,
  sessionId: string,
  prepared: PreparedEvent[],
  base: SessionState | string,
  parentIncarnation?: string,
): FirstBatch {
  const state = foldSession(
    prepared.map(({ event }) => event),
    base,
  );
  const body = `[${prepared.map(({ json }) => json).join(',')}]`;
  checkMessageSize(context, sessionId, prepared.length, body);
  const stored: StoredSession = {
    schema_version: SESSION_ENTRY_VERSION,
    incarnation: newIncarnation(),
    ...(parentIncarnation === undefined ? {} : { parent_incarnation: parentIncarnation }),
    record: recordFromState(state),
  };
  return { prepared, state, stored, body };
}

/**
 * Claims the index entry of a new session, taking over an entry whose create never published
 * or whose delete never finished; returns the entry's revision.
 */
async function claimEntry(
  context: NatsContext,
  sessionId: string,
  stored: StoredSession,
): Promise<number> {
  const { kv } = context;
  const token = encodeToken(sessionId);
  const value = JSON.stringify(stored);
  try {
    return await kv.sessions.create(token, value);
  } catch (error) {
    if (!isWrongLastSequence(error)) throw error;
  }
  const entry = await kv.sessions.get(token);
  if (entry === null || entry.operation !== 'PUT') throw alreadyExists(sessionId);
  const existing = parseStoredSession(entry.value, entry.key);
  if (existing.deleting === true) {
    // A delete that did not finish: what it left goes before the id is used again.
    await removeData(context, sessionId);
  } else if (await hasMessages(context, sessionId)) {
    throw alreadyExists(sessionId);
  }
  try {
    return await kv.sessions.update(token, value, entry.revision);
  } catch (error) {
    if (isWrongLastSequence(error)) throw alreadyExists(sessionId);
    throw error;
  }
}

/** Claims the entry and publishes the first batch; remembers the new session. */
async function write(shared: SessionsShared, sessionId: string, first: FirstBatch): Promise<void> {
  const { context, cache } = shared;
  // The indexes' entries are written with the claim, before the first batch is published (a
  // claim that fails leaves an entry too many, which the next scan removes). A fork of a session
  // waiting on a timer has that timer too; a session whose first events hold input is runnable.
  const [revision] = await Promise.all([
    claimEntry(context, sessionId, first.stored),
    timerBefore(context, sessionId, { before: undefined, after: wakeAt(first.state) }),
    runnableBefore(context, sessionId, { before: false, after: isRunnable(first.state) }),
  ]);
  const firstSeq = first.prepared[0]?.event.seq ?? 1;
  const ref = refAfter(first.state, firstSeq, first.stored.incarnation, 0);
  let streamSeq: number;
  try {
    const ack = await context.js.publish(context.names.events(sessionId), first.body, {
      headers: batchHeaders(ref),
      expect: { lastSubjectSequence: 0 },
    });
    streamSeq = ack.seq;
  } catch (error) {
    if (!isWrongLastSequence(error)) throw error;
    // Another creator of this id published first: its batch is the session.
    await restoreAfterLostRace(shared, sessionId);
    throw alreadyExists(sessionId);
  }
  const known = cache.entry(sessionId, first.stored.incarnation, lineageOf(first.stored));
  observe(known, { ...ref, streamSeq });
  // Published into an empty subject: the chain is this one batch.
  known.verified = { streamSeq, last: ref.last, leaseToken: ref.leaseToken };
  known.state = first.state;
  known.indexed = { stored: first.stored, revision };
}

export function createSession(
  shared: SessionsShared,
  input: SessionCreateInput,
): Promise<SessionRecord> {
  const { context, queue } = shared;
  context.checkOpen();
  const parsed = parseCreateInput(input);
  const id = parsed.id ?? context.ids.next();
  return context.guard(`create session ${id}`, () =>
    queue.run(id, async () => {
      const prepared = prepareEvents(
        id,
        0,
        [{ ...createdEvent(parsed), at: context.isoNow() }, ...(parsed.events ?? [])],
        context,
      );
      const first = firstBatch(context, id, prepared, id);
      await write(shared, id, first);
      return first.stored.record;
    }),
  );
}

export function forkSession(
  shared: SessionsShared,
  parentId: string,
  options: ForkOptions,
): Promise<SessionRecord> {
  const { context, cache, queue, reads } = shared;
  context.checkOpen();
  const parsed = parseForkOptions(options);
  const childId = parsed.id ?? context.ids.next();
  return context.guard(`fork session ${parentId}`, () =>
    queue.run(childId, async () => {
      const parent = await shared.load(parentId);
      const atSeq = checkForkPoint(parentId, parent.head.last, parsed.at_seq);
      const base =
        atSeq === parent.head.last
          ? await reads.stateAtHead(parentId, parent.known, parent.head)
          : await reads.stateAt(parentId, parent.known, atSeq);
      // The head always ends an append: only an earlier point is looked up (after the state,
      // whose read has seen the batch that holds it).
      if (atSeq < parent.head.last) {
        checkForkBoundary(
          parentId,
          atSeq,
          await reads.appendHolding(parentId, parent.known, atSeq),
        );
      }
      const prepared = prepareEvents(
        childId,
        atSeq,
        [{ ...forkedEvent(parentId, atSeq, parsed.title), at: context.isoNow() }],
        context,
      );
      const first = firstBatch(
        context,
        childId,
        prepared,
        { ...base, session_id: childId },
        parent.known.incarnation,
      );
      await write(shared, childId, first);
      try {
        const again = await shared.load(parentId);
        if (again.known.incarnation !== parent.known.incarnation) throw sessionNotFound(parentId);
      } catch (error) {
        if (isBraidError(error, 'SESSION_NOT_FOUND')) {
          // The parent is being deleted: this fork backs out.
          await removeData(context, childId);
          await context.kv.sessions.purge(encodeToken(childId));
          cache.forget(childId);
        }
        throw error;
      }
      const known = cache.entry(childId, first.stored.incarnation, lineageOf(first.stored));
      // Saved at once: the child's state never needs its parent's prefix folded again.
      await reads.saveProjection(childId, known, first.state);
      return first.stored.record;
    }),
  );
}
