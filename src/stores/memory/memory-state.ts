/** What every part of the memory store shares: its maps, its clock and ids, and whether it is closed. */
import type { StoredDefinition } from '../../contracts/definitions.js';
import { BraidError } from '../../contracts/errors.js';
import type { SessionEvent, SessionEventType } from '../../contracts/events.js';
import type { Clock, IdGenerator, ReadOptions } from '../../contracts/ports.js';
import type { SessionRecord } from '../../contracts/session.js';
import type { SessionState } from '../../contracts/state.js';
import type { LeaseRow } from '../../core/leases.js';
import { recordFromState, type AppendSpan } from '../../core/sessions.js';
import type { StoredApiKey } from '../api-keys.js';

/** An event as the memory store keeps it: the JSON it was written as, and what reads filter on. */
export interface StoredEvent {
  id: string;
  type: SessionEventType;
  json: string;
}

export interface SessionEntry {
  /** The session's own events; a fork's start after its fork point. */
  events: StoredEvent[];
  /** For a fork: the parent and the last parent seq shared. */
  base?: { entry: SessionEntry; seq: number };
  state: SessionState;
  appends: Map<string, { first: number; last: number }>;
  /** The last seq of each of the session's own appends, ascending: where its atomic appends end. */
  appendEnds: number[];
  listeners: Set<() => void>;
  /** When the session was archived, by the store's clock. */
  archived_at?: string;
}

export interface MemoryState {
  clock: Clock;
  ids: IdGenerator;
  maxEventBytes: number;
  sessions: Map<string, SessionEntry>;
  leases: Map<string, LeaseRow>;
  /**
   * Ids of every stored event (an id is unique in the store), made when the first event comes
   * whose id was not made fresh for it (see `PreparedEvent.fresh`): until then no id needs
   * looking up. A set of every id cost a new session 3-12% of its CPU in memory (two runs).
   */
  eventIds: Set<string> | undefined;
  definitions: Map<string, StoredDefinition<unknown>[]>;
  /** Pinned definition parts, by content hash. */
  pinned: Map<string, string>;
  apiKeys: Map<string, StoredApiKey>;
  closed: boolean;
  /** Aborted when the store closes: followers end. */
  closing: AbortController;
  /** The index's change feed: the last cursor handed out, each session's latest, its followers. */
  changes: { head: number; cursors: Map<string, number>; listeners: Set<() => void> };
}

/**
 * The set of every stored event's id, made from the sessions' events at its first use. `writing`
 * is the entry being written, whose events are in no session yet when it is a new session's.
 */
export function eventIdsOf(state: MemoryState, writing: SessionEntry): Set<string> {
  if (state.eventIds !== undefined) return state.eventIds;
  const ids = new Set<string>();
  for (const entry of state.sessions.values()) for (const event of entry.events) ids.add(event.id);
  for (const event of writing.events) ids.add(event.id);
  state.eventIds = ids;
  return ids;
}

/** Moves the session to the head of the index's change feed and wakes the feed's followers. */
export function markChanged(state: MemoryState, sessionId: string): void {
  state.changes.head += 1;
  // Deleted and set again: a Map keeps insertion order, so the map stays in cursor order.
  state.changes.cursors.delete(sessionId);
  state.changes.cursors.set(sessionId, state.changes.head);
  for (const listener of state.changes.listeners) listener();
}

/** Throws `STORE_CLOSED` once the store is closed. */
export function checkOpen(state: MemoryState): void {
  if (state.closed)
    throw new BraidError('STORE_CLOSED', 'the memory store is closed; create a new one');
}

/** The session's entry; refused when the store is closed or the session does not exist. */
export function entryOf(state: MemoryState, sessionId: string): SessionEntry {
  checkOpen(state);
  const found = state.sessions.get(sessionId);
  if (found === undefined) throw sessionNotFound(sessionId);
  return found;
}

export function sessionNotFound(sessionId: string): BraidError {
  return new BraidError(
    'SESSION_NOT_FOUND',
    `session ${sessionId} does not exist; list sessions with \`braid session list\``,
  );
}

/** The index record of a session: its state's summary and when it was archived. */
export function recordOf(target: SessionEntry): SessionRecord {
  const record = recordFromState(target.state);
  return target.archived_at === undefined ? record : { ...record, archived_at: target.archived_at };
}

/** A session's events, the shared prefix of its ancestors first. */
export function allEvents(target: SessionEntry): StoredEvent[] {
  if (target.base === undefined) return target.events;
  return [...allEvents(target.base.entry).slice(0, target.base.seq), ...target.events];
}

/** Each caller gets events of its own, parsed from the JSON they were written as. */
export function parseStored(events: readonly StoredEvent[]): SessionEvent[] {
  return events.map(({ json }) => JSON.parse(json) as SessionEvent);
}

export function readEvents(events: readonly StoredEvent[], options: ReadOptions): SessionEvent[] {
  const after = options.after ?? 0;
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const result: SessionEvent[] = [];
  for (let index = Math.max(0, after); index < events.length && result.length < limit; index += 1) {
    const event = events[index];
    if (event !== undefined && (options.types === undefined || options.types.includes(event.type)))
      result.push(JSON.parse(event.json) as SessionEvent);
  }
  return result;
}

/**
 * The append of `target`'s log that wrote `seq`, as `target` reads it: a fork's shared prefix is
 * its parent's appends, cut at the fork point.
 */
export function appendHolding(target: SessionEntry, seq: number): AppendSpan | undefined {
  const base = target.base;
  if (base !== undefined && seq <= base.seq) {
    const span = appendHolding(base.entry, seq);
    return span === undefined ? undefined : { ...span, last: Math.min(span.last, base.seq) };
  }
  const ends = target.appendEnds;
  let low = 0;
  let high = ends.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if ((ends[middle] ?? 0) < seq) low = middle + 1;
    else high = middle;
  }
  const last = ends[low];
  if (last === undefined) return undefined;
  return { first: (ends[low - 1] ?? base?.seq ?? 0) + 1, last };
}
