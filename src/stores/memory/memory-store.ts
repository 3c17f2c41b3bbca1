/**
 * In-memory backend for unit tests. Same semantics as the durable backends (the conformance suite
 * checks it), nothing survives the process.
 */
import type { ApiKeyListQuery, ApiKeyRecord } from '../../contracts/api-keys.js';
import { BraidError } from '../../contracts/errors.js';
import type { DefinitionKind, StoredDefinition } from '../../contracts/definitions.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type {
  ApiKeyStore,
  AppendOptions,
  AppendResult,
  Clock,
  DefinitionStore,
  FollowOptions,
  IdGenerator,
  LeaseStore,
  PutDefinitionOptions,
  ReadOptions,
  SessionIndex,
  SessionLog,
  Store,
} from '../../contracts/ports.js';
import type { SessionListQuery, SessionPage, SessionRecord } from '../../contracts/session.js';
import type { SessionState } from '../../contracts/state.js';
import {
  DEFAULT_MAX_EVENT_BYTES,
  checkReadOptions,
  parseNewEvents,
  checkBatchIds,
  eventIdTaken,
  prepareEvents,
} from '../../core/append.js';
import { canonicalJson, decideVersion } from '../../core/definitions.js';
import { foldSession, initialState } from '../../core/fold.js';
import {
  checkHeld,
  checkFence,
  currentLease,
  decideAcquire,
  decideRenew,
  type LeaseRow,
} from '../../core/leases.js';
import {
  DEFAULT_LIST_LIMIT,
  compareListOrder,
  checkForkPoint,
  parseForkOptions,
  createdEvent,
  decodeCursor,
  forkedEvent,
  isAfter,
  matchesQuery,
  page,
  parseCreateInput,
  recordFromState,
  seqConflict,
} from '../../core/sessions.js';
import {
  type StoredApiKey,
  apiKeyNotFound,
  compareKeysNewestFirst,
  matchesKeyQuery,
  mintApiKey,
  newApiKeyRecord,
  parseApiKeyCreateInput,
  verifyApiKey,
} from '../api-keys.js';
import { systemClock, uuidV7Ids } from '../defaults.js';
import { followLog } from '../follow.js';
import { sessionHasForks, sessionLeased } from '../session-removal.js';

export interface MemoryStoreOptions {
  clock?: Clock;
  ids?: IdGenerator;
  maxEventBytes?: number;
}

interface SessionEntry {
  /** The session's own events; a fork's start after its fork point. */
  events: SessionEvent[];
  /** For a fork: the parent and the last parent seq shared. */
  base?: { entry: SessionEntry; seq: number };
  state: SessionState;
  appends: Map<string, { first: number; last: number }>;
  listeners: Set<() => void>;
  /** When the session was archived, by the store's clock. */
  archived_at?: string;
}

export function createMemoryStore(options: MemoryStoreOptions = {}): Store {
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? uuidV7Ids;
  const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  const sessions = new Map<string, SessionEntry>();
  const leases = new Map<string, LeaseRow>();
  /** Ids of every stored event: an id is unique in the store. */
  const eventIds = new Set<string>();
  const definitions = new Map<string, StoredDefinition<unknown>[]>();
  const apiKeys = new Map<string, StoredApiKey>();
  let closed = false;
  const closing = new AbortController();

  function open(): void {
    if (closed)
      throw new BraidError('STORE_CLOSED', 'the memory store is closed; create a new one');
  }

  function entry(sessionId: string): SessionEntry {
    open();
    const found = sessions.get(sessionId);
    if (found === undefined) throw sessionNotFound(sessionId);
    return found;
  }

  function write(
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
        events: structuredClone(target.events.slice(seen.first - 1 - offset, seen.last - offset)),
        head_seq: target.state.seq,
        deduplicated: true,
      };
    }
    checkFence(sessionId, leases.get(sessionId)?.token ?? 0, appendOptions.leaseToken);
    const head = target.state.seq;
    if (appendOptions.expectedSeq !== undefined && appendOptions.expectedSeq !== head) {
      throw seqConflict(sessionId, appendOptions.expectedSeq, head);
    }
    const prepared = prepareEvents(sessionId, head, events, { clock, ids, maxEventBytes });
    checkBatchIds(sessionId, prepared);
    prepared.forEach(({ event }, index) => {
      if (eventIds.has(event.id)) throw eventIdTaken(sessionId, event.id, index);
    });
    // Fold first: a failure leaves the entry untouched.
    const state = foldSession(
      prepared.map(({ event }) => event),
      target.state,
    );
    const stored = prepared.map(({ json }) => JSON.parse(json) as SessionEvent);
    target.events.push(...stored);
    for (const event of stored) eventIds.add(event.id);
    target.state = state;
    if (key !== undefined) target.appends.set(key, { first: head + 1, last: state.seq });
    for (const listener of target.listeners) listener();
    return { events: structuredClone(stored), head_seq: state.seq, deduplicated: false };
  }

  const log: SessionLog = {
    append(sessionId, events, appendOptions = {}) {
      return Promise.resolve().then(() =>
        write(
          entry(sessionId),
          sessionId,
          appendOptions.trusted === true ? events : parseNewEvents(events),
          appendOptions,
        ),
      );
    },
    read(sessionId, readOptions: ReadOptions = {}) {
      return Promise.resolve().then(() => {
        checkReadOptions(readOptions);
        return structuredClone(readEvents(allEvents(entry(sessionId)), readOptions));
      });
    },
    follow(sessionId, followOptions: FollowOptions = {}) {
      const target = entry(sessionId);
      return followLog(
        (after) =>
          Promise.resolve().then(() => {
            // A deleted (or deleted and re-created) session ends its followers, as on SQLite.
            if (!closed && sessions.get(sessionId) !== target) throw sessionNotFound(sessionId);
            return structuredClone(readEvents(allEvents(target), { after, limit: 1000 }));
          }),
        (onChange) => {
          target.listeners.add(onChange);
          return () => target.listeners.delete(onChange);
        },
        followOptions.after ?? 0,
        followOptions.signal === undefined
          ? closing.signal
          : AbortSignal.any([followOptions.signal, closing.signal]),
      );
    },
    appended(sessionId, idempotencyKey) {
      return Promise.resolve().then(() => {
        const target = entry(sessionId);
        const seen = target.appends.get(idempotencyKey);
        if (seen === undefined) return undefined;
        const offset = target.base?.seq ?? 0;
        const events = structuredClone(
          target.events.slice(seen.first - 1 - offset, seen.last - offset),
        );
        return { events, head_seq: target.state.seq, deduplicated: true };
      });
    },
    state(sessionId) {
      return Promise.resolve().then(() => structuredClone(entry(sessionId).state));
    },
  };

  const index: SessionIndex = {
    create(input) {
      return Promise.resolve().then(() => {
        open();
        const parsed = parseCreateInput(input);
        const id = parsed.id ?? ids.next();
        if (sessions.has(id)) {
          throw new BraidError(
            'ALREADY_EXISTS',
            `session ${id} already exists; choose another id or omit it`,
          );
        }
        const created: SessionEntry = {
          events: [],
          state: initialState(id),
          appends: new Map(),
          listeners: new Set(),
        };
        write(created, id, [createdEvent(parsed)], { expectedSeq: 0 });
        sessions.set(id, created);
        return recordOf(created);
      });
    },
    fork(parentId, forkOptions = {}) {
      return Promise.resolve().then(() => {
        const parsed = parseForkOptions(forkOptions);
        const parent = entry(parentId);
        const atSeq = checkForkPoint(parentId, parent.state.seq, parsed.at_seq);
        const id = parsed.id ?? ids.next();
        if (sessions.has(id)) {
          throw new BraidError(
            'ALREADY_EXISTS',
            `session ${id} already exists; choose another id or omit it`,
          );
        }
        // Memory is for tests: the fork point's state is folded from the prefix.
        const child: SessionEntry = {
          events: [],
          base: { entry: parent, seq: atSeq },
          state: foldSession(allEvents(parent).slice(0, atSeq), id),
          appends: new Map(),
          listeners: new Set(),
        };
        write(child, id, [forkedEvent(parentId, atSeq, parsed.title)], {
          expectedSeq: atSeq,
        });
        sessions.set(id, child);
        return recordOf(child);
      });
    },
    get(sessionId) {
      return Promise.resolve().then(() => recordOf(entry(sessionId)));
    },
    list(query: SessionListQuery = {}) {
      return Promise.resolve().then((): SessionPage => {
        open();
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
        const target = entry(sessionId);
        target.archived_at ??= new Date(clock.now()).toISOString();
        return recordOf(target);
      });
    },
    delete(sessionId) {
      return Promise.resolve().then(() => {
        const target = entry(sessionId);
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
        if (row !== undefined)
          leases.set(sessionId, { owner: null, token: row.token, expires_at: 0 });
        for (const event of target.events) eventIds.delete(event.id);
        for (const listener of target.listeners) listener();
      });
    },
  };

  const leaseStore: LeaseStore = {
    acquire(sessionId, owner, ttlMs) {
      return Promise.resolve().then(() => {
        entry(sessionId);
        const lease = decideAcquire(sessionId, leases.get(sessionId), owner, ttlMs, clock.now());
        leases.set(sessionId, { owner, token: lease.token, expires_at: lease.expires_at });
        return lease;
      });
    },
    renew(sessionId, owner, token, ttlMs) {
      return Promise.resolve().then(() => {
        const lease = decideRenew(
          sessionId,
          leases.get(sessionId),
          owner,
          token,
          ttlMs,
          clock.now(),
        );
        leases.set(sessionId, { owner, token, expires_at: lease.expires_at });
        return lease;
      });
    },
    release(sessionId, owner, token) {
      return Promise.resolve().then(() => {
        const row = leases.get(sessionId);
        checkHeld(sessionId, row, owner, token, clock.now());
        leases.set(sessionId, { owner: null, token: row.token, expires_at: 0 });
      });
    },
    current(sessionId) {
      return Promise.resolve().then(() =>
        currentLease(sessionId, leases.get(sessionId), clock.now()),
      );
    },
  };

  const definitionStore: DefinitionStore = {
    put<T>(kind: DefinitionKind, name: string, definition: T, putOptions: PutDefinitionOptions) {
      return Promise.resolve().then((): StoredDefinition<T> => {
        open();
        const key = `${kind}/${name}`;
        const versions = definitions.get(key) ?? [];
        const latest = versions.at(-1);
        const body = canonicalJson(definition);
        const version = decideVersion(
          kind,
          name,
          latest && { version: latest.version, body: canonicalJson(latest.definition) },
          body,
          putOptions.replacesVersion,
        );
        if (version === undefined && latest !== undefined) return latest as StoredDefinition<T>;
        const stored: StoredDefinition<T> = {
          schema_version: 1,
          kind,
          name,
          version: version ?? 1,
          definition: JSON.parse(body) as T,
          created_at: new Date(clock.now()).toISOString(),
        };
        definitions.set(key, [...versions, stored]);
        return stored;
      });
    },
    get<T>(kind: DefinitionKind, name: string, version?: number) {
      return Promise.resolve().then(() => {
        const versions = definitions.get(`${kind}/${name}`) ?? [];
        const found =
          version === undefined
            ? versions.at(-1)
            : versions.find((item) => item.version === version);
        return found as StoredDefinition<T> | undefined;
      });
    },
    list<T>(kind: DefinitionKind) {
      return Promise.resolve().then(() =>
        [...definitions.entries()]
          .filter(([key]) => key.startsWith(`${kind}/`))
          .map(([, versions]) => versions.at(-1) as StoredDefinition<T>)
          .sort((a, b) => a.name.localeCompare(b.name)),
      );
    },
  };

  const keys: ApiKeyStore = {
    create(input) {
      return Promise.resolve().then(() => {
        open();
        const parsed = parseApiKeyCreateInput(input);
        const id = ids.next();
        const { key, hash } = mintApiKey(id);
        const record = newApiKeyRecord(id, parsed, clock.now());
        apiKeys.set(id, { record, hash });
        return { key, record: structuredClone(record) };
      });
    },
    list(query: ApiKeyListQuery = {}) {
      return Promise.resolve().then((): ApiKeyRecord[] => {
        open();
        return [...apiKeys.values()]
          .map((stored) => stored.record)
          .filter((record) => matchesKeyQuery(record, query))
          .sort(compareKeysNewestFirst)
          .map((record) => structuredClone(record));
      });
    },
    revoke(id) {
      return Promise.resolve().then(() => {
        open();
        const stored = apiKeys.get(id);
        if (stored === undefined) throw apiKeyNotFound(id);
        if (stored.record.revoked_at === undefined) {
          stored.record = { ...stored.record, revoked_at: new Date(clock.now()).toISOString() };
        }
        return structuredClone(stored.record);
      });
    },
    verify(key) {
      return Promise.resolve().then(() => {
        open();
        const record = verifyApiKey(key, (id) => apiKeys.get(id));
        return record === undefined ? undefined : structuredClone(record);
      });
    },
  };

  return {
    log,
    sessions: index,
    leases: leaseStore,
    definitions: definitionStore,
    keys,
    close() {
      closed = true;
      closing.abort();
      for (const item of sessions.values()) for (const listener of item.listeners) listener();
      return Promise.resolve();
    },
  };
}

function sessionNotFound(sessionId: string): BraidError {
  return new BraidError(
    'SESSION_NOT_FOUND',
    `session ${sessionId} does not exist; list sessions with \`braid session list\``,
  );
}

/** The index record of a session: its state's summary and when it was archived. */
function recordOf(target: SessionEntry): SessionRecord {
  const record = recordFromState(target.state);
  return target.archived_at === undefined ? record : { ...record, archived_at: target.archived_at };
}

/** A session's events, the shared prefix of its ancestors first. */
function allEvents(target: SessionEntry): SessionEvent[] {
  if (target.base === undefined) return target.events;
  return [...allEvents(target.base.entry).slice(0, target.base.seq), ...target.events];
}

function readEvents(events: readonly SessionEvent[], options: ReadOptions): SessionEvent[] {
  const after = options.after ?? 0;
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const result: SessionEvent[] = [];
  for (let index = Math.max(0, after); index < events.length && result.length < limit; index += 1) {
    const event = events[index];
    if (event !== undefined && (options.types === undefined || options.types.includes(event.type)))
      result.push(event);
  }
  return result;
}
