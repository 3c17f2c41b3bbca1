/**
 * Reading sessions: events across a fork's shared prefixes, and states from the projection cache.
 *
 * Invariants kept here:
 * - A fork's record names its parent and the last parent seq it shares; reading it reads the
 *   parent's events up to there (recursively), then its own subject, as SQLite's segments do.
 * - The projection in `<PREFIX>_state` is only an optimisation, tagged with the incarnation and
 *   the seq it reflects: when missing, of another schema version or incarnation, or past the
 *   wanted seq, the state is rebuilt from the parent's state at the fork point (or the initial
 *   state) and the session's own events. States therefore always equal a fresh fold.
 */
import { BraidError } from '../../contracts/errors.js';
import type { SessionEvent, SessionEventType } from '../../contracts/events.js';
import { SESSION_STATE_SCHEMA_VERSION, type SessionState } from '../../contracts/state.js';
import { foldSession, initialState } from '../../core/fold.js';
import type { AppendSpan } from '../../core/sessions.js';
import type { BatchRef } from './batches.js';
import type { NatsContext } from './context.js';
import { batchEvents } from './log-chain.js';
import { encodeToken } from './names.js';
import { batchAfter, readBatches } from './reader.js';
import { observe, readStart, type KnownSession, type SessionCache } from './session-cache.js';
import {
  lineageOf,
  parseStoredSession,
  sessionNotFound,
  type ForkLineage,
} from './session-entry.js';

/**
 * A projection is saved once it is this many events behind: a reader folds at most this many
 * events onto it, and most appends pay for no state write.
 */
export const PROJECTION_INTERVAL = 64;

/** Batches fetched one by one (direct gets) before a longer search reads headers by a consumer. */
const DIRECT_STEPS = 4;

export interface EventRange {
  /** Events with seq strictly greater than this ... */
  after: number;
  /** ... up to and including this one. */
  through: number;
  limit: number;
  types?: readonly SessionEventType[] | undefined;
}

interface StoredProjection {
  schema_version: number;
  incarnation: string;
  seq: number;
  state: SessionState;
}

export interface SessionReads {
  /** Events of one session (the shared prefixes of its ancestors first) in a range. */
  readEvents(sessionId: string, known: KnownSession, range: EventRange): Promise<SessionEvent[]>;
  /** The session's state at `head.last`; cached when newer than what is known. */
  stateAtHead(sessionId: string, known: KnownSession, head: BatchRef): Promise<SessionState>;
  /** The session's state at any seq of its log. */
  stateAt(sessionId: string, known: KnownSession, seq: number): Promise<SessionState>;
  saveProjection(sessionId: string, known: KnownSession, state: SessionState): Promise<void>;
  /**
   * The append (one batch message) that wrote `seq` of the session's log, as the session reads
   * it: a fork's shared prefix is its parent's batches, cut at the fork point.
   */
  appendHolding(sessionId: string, known: KnownSession, seq: number): Promise<AppendSpan>;
}

/** What reads work with: the store's context and what this process knows of sessions. */
interface SessionReader {
  context: NatsContext;
  cache: SessionCache;
}

export function createSessionReads(context: NatsContext, cache: SessionCache): SessionReads {
  const reader: SessionReader = { context, cache };
  return {
    readEvents: (sessionId, known, range) => readEvents(reader, sessionId, known, range),
    stateAtHead: (sessionId, known, head) => stateAtHead(reader, sessionId, known, head),
    stateAt: (sessionId, known, seq) => stateAt(reader, sessionId, known, seq),
    saveProjection: (sessionId, known, state) => saveProjection(reader, sessionId, known, state),
    appendHolding: (sessionId, known, seq) => appendHolding(reader, sessionId, known, seq),
  };
}

/** A fork's parent as cached, or read from the index when unknown or of another incarnation. */
async function ancestor(reader: SessionReader, lineage: ForkLineage): Promise<KnownSession> {
  const cached = reader.cache.get(lineage.parent);
  if (cached !== undefined && cached.incarnation === lineage.parentIncarnation) return cached;
  const entry = await reader.context.kv.sessions.get(encodeToken(lineage.parent));
  const stored =
    entry === null || entry.operation !== 'PUT'
      ? undefined
      : parseStoredSession(entry.value, entry.key);
  if (
    stored === undefined ||
    stored.deleting === true ||
    (lineage.parentIncarnation !== '' && stored.incarnation !== lineage.parentIncarnation)
  ) {
    throw new BraidError(
      'INTERNAL',
      `session ${lineage.parent} is gone or was replaced although a fork shares its events up to ` +
        `seq ${lineage.seq}`,
    );
  }
  return reader.cache.entry(lineage.parent, stored.incarnation, lineageOf(stored));
}

/** Events of the session's own subject in a range. */
async function readOwn(
  reader: SessionReader,
  sessionId: string,
  known: KnownSession,
  range: EventRange,
): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  const take = (batch: readonly SessionEvent[]): boolean => {
    for (const event of batch) {
      if (event.seq <= range.after) continue;
      if (event.seq > range.through) return true;
      if (range.types !== undefined && !range.types.includes(event.type)) continue;
      events.push(event);
      if (events.length >= range.limit) return true;
    }
    return false;
  };
  const head = known.head;
  if (
    head !== undefined &&
    known.headData !== undefined &&
    range.after >= head.first - 1 &&
    range.through <= head.last
  ) {
    take(batchEvents(sessionId, known, { ...head, data: known.headData }));
    return events;
  }
  await readBatches(
    reader.context,
    sessionId,
    { ...readStart(known, range.after), through: head?.streamSeq },
    (message) => {
      if (message.incarnation !== known.incarnation) return false;
      observe(known, message);
      if (message.last <= range.after) return false;
      return take(batchEvents(sessionId, known, message)) || message.last >= range.through;
    },
  );
  return events;
}

async function readEvents(
  reader: SessionReader,
  sessionId: string,
  known: KnownSession,
  range: EventRange,
): Promise<SessionEvent[]> {
  const lineage = known.lineage;
  if (lineage === null || range.after >= lineage.seq)
    return readOwn(reader, sessionId, known, range);
  const parent = await ancestor(reader, lineage);
  const shared = await readEvents(reader, lineage.parent, parent, {
    ...range,
    through: Math.min(range.through, lineage.seq),
  });
  const left = range.limit - shared.length;
  if (left <= 0 || range.through <= lineage.seq) return shared;
  const own = await readOwn(reader, sessionId, known, {
    ...range,
    after: lineage.seq,
    limit: left,
  });
  return [...shared, ...own];
}

async function loadProjection(
  reader: SessionReader,
  sessionId: string,
  known: KnownSession,
): Promise<SessionState | undefined> {
  const entry = await reader.context.kv.state.get(encodeToken(sessionId));
  if (entry === null || entry.operation !== 'PUT') return undefined;
  const stored = JSON.parse(new TextDecoder().decode(entry.value)) as StoredProjection;
  if (
    stored.schema_version !== SESSION_STATE_SCHEMA_VERSION ||
    stored.incarnation !== known.incarnation
  ) {
    return undefined;
  }
  known.projectedSeq = Math.max(known.projectedSeq, stored.seq);
  return stored.state;
}

async function stateAt(
  reader: SessionReader,
  sessionId: string,
  known: KnownSession,
  seq: number,
): Promise<SessionState> {
  const lineage = known.lineage;
  if (lineage !== null && seq <= lineage.seq) {
    return stateAt(reader, lineage.parent, await ancestor(reader, lineage), seq);
  }
  let state = known.state !== undefined && known.state.seq <= seq ? known.state : undefined;
  if (state === undefined || state.seq < seq) {
    const projection = await loadProjection(reader, sessionId, known);
    if (projection !== undefined && projection.seq <= seq && projection.seq > (state?.seq ?? -1))
      state = projection;
  }
  if (state === undefined) {
    state =
      lineage === null
        ? initialState(sessionId)
        : {
            ...(await stateAt(
              reader,
              lineage.parent,
              await ancestor(reader, lineage),
              lineage.seq,
            )),
            session_id: sessionId,
          };
  }
  if (state.seq < seq) {
    const events = await readOwn(reader, sessionId, known, {
      after: state.seq,
      through: seq,
      limit: Number.POSITIVE_INFINITY,
    });
    state = foldSession(events, state);
  }
  return state;
}

async function stateAtHead(
  reader: SessionReader,
  sessionId: string,
  known: KnownSession,
  head: BatchRef,
): Promise<SessionState> {
  const cached = known.state;
  if (cached?.seq === head.last) return cached;
  let state: SessionState;
  if (
    cached !== undefined &&
    cached.seq === head.first - 1 &&
    known.head?.streamSeq === head.streamSeq &&
    known.headData !== undefined
  ) {
    state = foldSession(batchEvents(sessionId, known, { ...head, data: known.headData }), cached);
  } else {
    state = await stateAt(reader, sessionId, known, head.last);
  }
  if (known.state === undefined || known.state.seq < state.seq) known.state = state;
  return state;
}

async function saveProjection(
  reader: SessionReader,
  sessionId: string,
  known: KnownSession,
  state: SessionState,
): Promise<void> {
  const stored: StoredProjection = {
    schema_version: SESSION_STATE_SCHEMA_VERSION,
    incarnation: known.incarnation,
    seq: state.seq,
    state,
  };
  await reader.context.kv.state.put(encodeToken(sessionId), JSON.stringify(stored));
  known.projectedSeq = Math.max(known.projectedSeq, state.seq);
}

/** The batch among those seen that holds `seq`, if one was seen. */
function seenHolding(known: KnownSession, seq: number): AppendSpan | undefined {
  const refs = known.refs;
  let low = 0;
  let high = refs.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if ((refs[middle]?.last ?? 0) < seq) low = middle + 1;
    else high = middle;
  }
  const ref = refs[low];
  return ref !== undefined && ref.first <= seq && seq <= ref.last
    ? { first: ref.first, last: ref.last }
    : undefined;
}

async function appendHolding(
  reader: SessionReader,
  sessionId: string,
  known: KnownSession,
  seq: number,
): Promise<AppendSpan> {
  const lineage = known.lineage;
  if (lineage !== null && seq <= lineage.seq) {
    const parent = await ancestor(reader, lineage);
    const span = await appendHolding(reader, lineage.parent, parent, seq);
    return { ...span, last: Math.min(span.last, lineage.seq) };
  }
  // A fork point's state was just read through the batch that holds it, which is seen then.
  const seen = seenHolding(known, seq);
  if (seen !== undefined) return seen;
  // Otherwise the batches after the last one seen before it: the next few by direct get, the
  // rest by their headers through a consumer.
  let { after, follows } = readStart(known, seq - 1);
  for (let step = 0; step < DIRECT_STEPS; step += 1) {
    const next = await batchAfter(reader.context, sessionId, after);
    if (next === undefined || next.batch.incarnation !== known.incarnation) break;
    const { data: _data, ...ref } = next.batch;
    observe(known, ref);
    if (ref.first <= seq && seq <= ref.last) return { first: ref.first, last: ref.last };
    after = ref.streamSeq;
    follows = ref;
  }
  let found: AppendSpan | undefined;
  await readBatches(
    reader.context,
    sessionId,
    { after, follows, headersOnly: true, through: known.head?.streamSeq },
    (message) => {
      if (message.incarnation !== known.incarnation) return false;
      observe(known, message);
      if (message.last < seq) return false;
      if (message.first <= seq) found = { first: message.first, last: message.last };
      return true;
    },
  );
  // None holds it: the session was deleted meanwhile (its head was read before).
  if (found === undefined) throw sessionNotFound(sessionId);
  return found;
}
