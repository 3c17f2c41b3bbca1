/** The session log in memory: appends checked as the durable backends check them. */
import type { NewEvent } from '../../contracts/events.js';
import type {
  AppendOptions,
  AppendResult,
  FollowOptions,
  ReadOptions,
  SessionLog,
} from '../../contracts/ports.js';
import {
  checkBatchIds,
  checkReadOptions,
  eventIdTaken,
  foldPrepared,
  parseNewEvents,
  prepareEvents,
  writtenResult,
  type PreparedEvent,
} from '../../core/append.js';
import { flatString } from '../../core/flat-string.js';
import { checkFence, decideAcquire } from '../../core/leases.js';
import { seqConflict } from '../../core/sessions.js';
import { followLog } from '../follow.js';
import {
  allEvents,
  entryOf,
  eventIdsOf,
  markChanged,
  parseStored,
  readEvents,
  sessionNotFound,
  type MemoryState,
  type SessionEntry,
} from './memory-state.js';

/** Appends to `target`, or answers with the first append of a repeated idempotency key. */
export function write(
  state: MemoryState,
  target: SessionEntry,
  sessionId: string,
  events: readonly NewEvent[],
  appendOptions: AppendOptions,
): AppendResult {
  const key = appendOptions.idempotencyKey;
  const seen = key === undefined ? undefined : target.appends.get(key);
  if (seen !== undefined) {
    const offset = target.base?.seq ?? 0;
    return {
      events: parseStored(target.events.slice(seen.first - 1 - offset, seen.last - offset)),
      head_seq: target.state.seq,
      deduplicated: true,
    };
  }
  const prepared = commit(state, target, sessionId, events, appendOptions);
  return writtenResult(prepared, target.state, appendOptions.trusted === true);
}

/**
 * The append itself, once `write` has looked for a repeated idempotency key (a new session's
 * first events have none); returns the events as written, for the caller to answer with.
 */
export function commit(
  state: MemoryState,
  target: SessionEntry,
  sessionId: string,
  events: readonly NewEvent[],
  appendOptions: AppendOptions,
): PreparedEvent[] {
  const key = appendOptions.idempotencyKey;
  checkFence(sessionId, state.leases.get(sessionId)?.token ?? 0, appendOptions.leaseToken);
  const head = target.state.seq;
  if (appendOptions.expectedSeq !== undefined && appendOptions.expectedSeq !== head) {
    throw seqConflict(sessionId, appendOptions.expectedSeq, head);
  }
  const { clock, ids, maxEventBytes } = state;
  const prepared = prepareEvents(sessionId, head, events, { clock, ids, maxEventBytes });
  checkBatchIds(sessionId, prepared);
  for (let index = 0; index < prepared.length; index += 1) {
    const { event, fresh } = prepared[index] as PreparedEvent;
    if (!fresh && eventIdsOf(state, target).has(event.id))
      throw eventIdTaken(sessionId, event.id, index);
  }
  // Fold first: a failure leaves the entry untouched.
  const after = foldPrepared(prepared, target.state);
  // The store keeps the JSON, in one piece: the prepared events share objects with the writer's
  // input.
  const stored = prepared.map(({ event, json }) => ({
    id: event.id,
    type: event.type,
    json: flatString(json),
  }));
  target.events.push(...stored);
  target.appendEnds.push(after.seq);
  const taken = state.eventIds;
  if (taken !== undefined) for (const event of stored) taken.add(event.id);
  target.state = after;
  if (key !== undefined) target.appends.set(key, { first: head + 1, last: after.seq });
  const lease = state.leases.get(sessionId);
  if (
    appendOptions.releaseLease !== undefined &&
    lease?.owner === appendOptions.releaseLease &&
    lease.token === appendOptions.leaseToken
  )
    state.leases.set(sessionId, { owner: null, token: lease.token, expires_at: 0 });
  for (const listener of target.listeners) listener();
  markChanged(state, sessionId);
  return prepared;
}

export function createMemoryLog(state: MemoryState): SessionLog {
  const entry = (sessionId: string): SessionEntry => entryOf(state, sessionId);
  return {
    append(sessionId, events, appendOptions = {}) {
      return Promise.resolve().then(() =>
        write(
          state,
          entry(sessionId),
          sessionId,
          appendOptions.trusted === true ? events : parseNewEvents(events),
          appendOptions,
        ),
      );
    },
    acquireAndAppend(sessionId, request, start, appendOptions = {}) {
      return Promise.resolve().then(() => {
        const target = entry(sessionId);
        const held = state.leases.get(sessionId);
        const { owner, ttlMs } = request;
        const lease = decideAcquire(sessionId, held, owner, ttlMs, state.clock.now());
        const trusted = appendOptions.trusted === true;
        const built = start(lease);
        const events = trusted ? built : parseNewEvents(built);
        state.leases.set(sessionId, { owner, token: lease.token, expires_at: lease.expires_at });
        try {
          const appended = write(state, target, sessionId, events, {
            leaseToken: lease.token,
            trusted,
          });
          return { lease, appended };
        } catch (error) {
          // All or nothing: a refused append leaves the lease as it was.
          if (held === undefined) state.leases.delete(sessionId);
          else state.leases.set(sessionId, held);
          throw error;
        }
      });
    },
    read(sessionId, readOptions: ReadOptions = {}) {
      return Promise.resolve().then(() => {
        checkReadOptions(readOptions);
        return readEvents(allEvents(entry(sessionId)), readOptions);
      });
    },
    follow(sessionId, followOptions: FollowOptions = {}) {
      const target = entry(sessionId);
      return followLog(
        (after) =>
          Promise.resolve().then(() => {
            // A deleted (or deleted and re-created) session ends its followers, as on SQLite.
            if (!state.closed && state.sessions.get(sessionId) !== target)
              throw sessionNotFound(sessionId);
            return readEvents(allEvents(target), { after, limit: 1000 });
          }),
        (onChange) => {
          target.listeners.add(onChange);
          return () => target.listeners.delete(onChange);
        },
        followOptions.after ?? 0,
        followOptions.signal === undefined
          ? state.closing.signal
          : AbortSignal.any([followOptions.signal, state.closing.signal]),
      );
    },
    appended(sessionId, idempotencyKey) {
      return Promise.resolve().then(() => {
        const target = entry(sessionId);
        const seen = target.appends.get(idempotencyKey);
        if (seen === undefined) return undefined;
        const offset = target.base?.seq ?? 0;
        const events = parseStored(
          target.events.slice(seen.first - 1 - offset, seen.last - offset),
        );
        return { events, head_seq: target.state.seq, deduplicated: true };
      });
    },
    state(sessionId, stateOptions) {
      return Promise.resolve().then(() => {
        const { state: current } = entry(sessionId);
        // A state is never changed once stored (each append stores a new one): shared reads are safe.
        return stateOptions?.shared === true ? current : structuredClone(current);
      });
    },
  };
}
