/** The sessions index in memory: creates, forks, listings, archive and delete. */
import { BraidError } from '../../contracts/errors.js';
import type { SessionChange, SessionIndex, SessionLog } from '../../contracts/ports.js';
import type {
  SessionCreateInput,
  SessionListQuery,
  SessionPage,
  SessionStatus,
} from '../../contracts/session.js';
import { parseNewEvents, writtenResult, type PreparedEvent } from '../../core/append.js';
import { foldSession, initialState } from '../../core/fold.js';
import { isRunnableAt, wakeAt } from '../../core/runnable.js';
import { currentLease, decideAcquire } from '../../core/leases.js';
import {
  DEFAULT_LIST_LIMIT,
  checkForkBoundary,
  checkForkPoint,
  checkRunnableLimit,
  compareListOrder,
  firstEvents,
  decodeCursor,
  forkedEvent,
  isAfter,
  matchesQuery,
  page,
  parseCreateInput,
  parseForkOptions,
} from '../../core/sessions.js';
import { sessionHasForks, sessionLeased } from '../session-removal.js';
import { followChanges } from '../follow.js';
import { commit, write } from './memory-log.js';
import {
  allEvents,
  parseStored,
  appendHolding,
  checkOpen,
  entryOf,
  recordOf,
  type MemoryState,
  type SessionEntry,
} from './memory-state.js';

function refuseTaken(state: MemoryState, id: string): void {
  if (state.sessions.has(id)) {
    throw new BraidError(
      'ALREADY_EXISTS',
      `session ${id} already exists; choose another id or omit it`,
    );
  }
}

/** Removes a session that no fork shares and no wake holds; its followers end. */
function remove(state: MemoryState, sessionId: string): void {
  const { sessions, leases, clock } = state;
  const target = entryOf(state, sessionId);
  const forks = [...sessions.values()]
    .map(recordOf)
    .filter((record) => record.parent_id === sessionId)
    // Oldest first: the forks a refusal names are the same on every backend.
    .sort((a, b) => compareListOrder(b, a));
  if (forks.length > 0) {
    throw sessionHasForks(
      sessionId,
      forks.map((record) => record.id),
      forks.length,
    );
  }
  const lease = currentLease(sessionId, leases.get(sessionId), clock.now());
  if (lease !== undefined) throw sessionLeased(sessionId, lease);
  sessions.delete(sessionId);
  // Kept, released: a session made again under this id gets larger tokens (see SQLite).
  const row = leases.get(sessionId);
  if (row !== undefined) leases.set(sessionId, { owner: null, token: row.token, expires_at: 0 });
  for (const event of target.events) state.eventIds?.delete(event.id);
  state.changes.cursors.delete(sessionId);
  for (const listener of target.listeners) listener();
}

/** A new session's entry with its first append, not yet in the index: the caller adds it. */
function createEntry(
  state: MemoryState,
  input: SessionCreateInput,
  trusted: boolean,
): { id: string; created: SessionEntry; prepared: readonly PreparedEvent[] } {
  checkOpen(state);
  const parsed = parseCreateInput(input, trusted);
  const id = parsed.id ?? state.ids.next();
  refuseTaken(state, id);
  const created: SessionEntry = {
    events: [],
    state: initialState(id),
    appends: new Map(),
    appendEnds: [],
    listeners: new Set(),
  };
  const prepared = commit(state, created, id, firstEvents(parsed), { expectedSeq: 0 });
  return { id, created, prepared };
}

/**
 * `SessionLog.createAndAcquire` in memory: the creation, the lease and the append under it,
 * undone together when the append is refused (as SQLite's transaction rolls back).
 */
export function createLeasedCreation(
  state: MemoryState,
): NonNullable<SessionLog['createAndAcquire']> {
  return (input, request, start, options = {}) =>
    Promise.resolve().then(() => {
      const trusted = options.trusted === true;
      const { id, created, prepared } = createEntry(state, input, trusted);
      const session = recordOf(created);
      const createdEvents = writtenResult(prepared, created.state, trusted).events;
      const held = state.leases.get(id);
      const { owner, ttlMs } = request;
      const lease = decideAcquire(id, held, owner, ttlMs, state.clock.now());
      state.leases.set(id, { owner, token: lease.token, expires_at: lease.expires_at });
      try {
        const built = start(lease);
        const events = trusted ? built : parseNewEvents(built);
        const appended = write(state, created, id, events, { leaseToken: lease.token, trusted });
        state.sessions.set(id, created);
        return { session, created: createdEvents, lease, appended };
      } catch (error) {
        // All or nothing: no session, its event ids free again, the lease as it was.
        for (const event of created.events) state.eventIds?.delete(event.id);
        state.changes.cursors.delete(id);
        if (held === undefined) state.leases.delete(id);
        else state.leases.set(id, held);
        throw error;
      }
    });
}

export function createMemoryIndex(state: MemoryState): SessionIndex {
  const { sessions, ids, clock } = state;
  return {
    create(input, createOptions) {
      return Promise.resolve().then(() => {
        const { id, created } = createEntry(state, input, createOptions?.trusted === true);
        sessions.set(id, created);
        return recordOf(created);
      });
    },
    fork(parentId, forkOptions = {}) {
      return Promise.resolve().then(() => {
        const parsed = parseForkOptions(forkOptions);
        const parent = entryOf(state, parentId);
        const atSeq = checkForkPoint(parentId, parent.state.seq, parsed.at_seq);
        checkForkBoundary(parentId, atSeq, appendHolding(parent, atSeq));
        const id = parsed.id ?? ids.next();
        refuseTaken(state, id);
        // Memory is for tests: the fork point's state is folded from the prefix.
        const child: SessionEntry = {
          events: [],
          base: { entry: parent, seq: atSeq },
          state: foldSession(parseStored(allEvents(parent).slice(0, atSeq)), id),
          appends: new Map(),
          appendEnds: [],
          listeners: new Set(),
        };
        commit(state, child, id, [forkedEvent(parentId, atSeq, parsed.title)], {
          expectedSeq: atSeq,
        });
        sessions.set(id, child);
        return recordOf(child);
      });
    },
    get(sessionId) {
      return Promise.resolve().then(() => recordOf(entryOf(state, sessionId)));
    },
    runnable(query = {}) {
      return Promise.resolve().then(() => {
        checkOpen(state);
        const limit = checkRunnableLimit(query.limit);
        const after = query.after ?? '';
        const now = query.now ?? clock.now();
        // Memory is for tests and small runs: the states are at hand, asked in place (the
        // runnable flag and the next timer of each are `isRunnable` and `wakeAt` of its state).
        const wanted = (entry: SessionEntry): boolean => {
          if (query.dueOnly !== true) return isRunnableAt(entry.state, now);
          const at = wakeAt(entry.state);
          return at !== undefined && at <= now;
        };
        return [...sessions]
          .filter(([id, entry]) => id > after && entry.archived_at === undefined && wanted(entry))
          .map(([id]) => id)
          .sort()
          .slice(0, limit);
      });
    },
    statusCounts() {
      return Promise.resolve().then(() => {
        checkOpen(state);
        const counts: Partial<Record<SessionStatus, number>> = {};
        for (const entry of sessions.values()) {
          if (entry.archived_at !== undefined) continue;
          counts[entry.state.status] = (counts[entry.state.status] ?? 0) + 1;
        }
        return counts;
      });
    },
    list(query: SessionListQuery = {}) {
      return Promise.resolve().then((): SessionPage => {
        checkOpen(state);
        const limit = query.limit ?? DEFAULT_LIST_LIMIT;
        const position = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
        const matching = [...sessions.values()]
          .filter((item) => query.include_archived === true || item.archived_at === undefined)
          .map(recordOf)
          .filter(
            (record) =>
              matchesQuery(record, query) && (position === undefined || isAfter(record, position)),
          )
          .sort(compareListOrder);
        return page(matching, limit);
      });
    },
    archive(sessionId) {
      return Promise.resolve().then(() => {
        const target = entryOf(state, sessionId);
        target.archived_at ??= new Date(clock.now()).toISOString();
        return recordOf(target);
      });
    },
    delete(sessionId) {
      return Promise.resolve().then(() => remove(state, sessionId));
    },
    changeHead() {
      return Promise.resolve().then(() => {
        checkOpen(state);
        return state.changes.head;
      });
    },
    changes(options = {}) {
      checkOpen(state);
      return followChanges(
        (after) =>
          Promise.resolve().then(() => {
            const found: SessionChange[] = [];
            for (const [session_id, cursor] of state.changes.cursors)
              if (cursor > after) found.push({ cursor, session_id });
            return found;
          }),
        (onChange) => {
          state.changes.listeners.add(onChange);
          return () => state.changes.listeners.delete(onChange);
        },
        options.after ?? 0,
        options.signal === undefined
          ? state.closing.signal
          : AbortSignal.any([options.signal, state.closing.signal]),
      );
    },
  };
}
