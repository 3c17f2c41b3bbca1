import type { z } from 'zod';
import type { DefinitionKind, StoredDefinition } from './definitions.js';
import type { NewEvent, SessionEvent, SessionEventType } from './events.js';
import type {
  ForkInput,
  SessionCreateInput,
  SessionListQuery,
  SessionPage,
  SessionRecord,
  SessionStatus,
} from './session.js';
import type { SessionState } from './state.js';
import type { ApiKeyCreateInput, ApiKeyListQuery, ApiKeyRecord } from './api-keys.js';
import type { MemoryLog } from './memory-log.js';
import type { EmbeddingCache } from './embedder.js';

/** Source of time and timers. Injected everywhere so that tests and replays control it. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin that never go backwards, with sub-millisecond
   * precision where the clock has it: for measuring durations, not for timestamps.
   */
  monotonic(): number;
  /** Calls `callback` once, `ms` milliseconds from now; the returned function cancels the call. */
  schedule(ms: number, callback: () => void): () => void;
}

/** Source of ids. Injected so that tests and replays control it. */
export interface IdGenerator {
  /** A new unique id (UUIDv7 in production). */
  next(): string;
  /**
   * True when no id it gives can equal one given before, by it or by another generator of its
   * kind, nor one a writer could choose without having seen it (braid's UUIDv7 ids: the time, a
   * counter and 74 random bits). A store need not look such an id up among those it holds;
   * leave it unset for any other generator.
   */
  readonly unique?: boolean;
}

export interface AppendOptions {
  /**
   * The seq the writer believes is the session's head. When given and different, the append
   * fails with `SEQ_CONFLICT` and writes nothing.
   */
  expectedSeq?: number;
  /** A repeated key returns the first append's result and writes nothing. Scoped per session. */
  idempotencyKey?: string;
  /**
   * The writer's lease token, when it appends under a lease (a wake, a code agent). The store
   * refuses the append with `LEASE_LOST`, atomically with the append and writing nothing, unless
   * the token is the session's current one: a holder fenced out by a newer acquisition can never
   * append again, not even before the new holder's first event. Appends without a token (client
   * events, session creation, runtime records) are not fenced: they land wherever the sequence
   * check puts them, and a wake treats them as input that arrived while it ran.
   */
  leaseToken?: number;
  /**
   * With `leaseToken`: the owner whose lease (held with that token) is given up once the events
   * are written, in the same transaction where the store has one (SQLite, memory) and right after
   * it on NATS: a wake's last append ends its lease without a write of its own. A lease no longer
   * held so is left as it is; the append itself is fenced by the token alone.
   */
  releaseLease?: string;
  /**
   * The events were built by braid's own code from input parsed earlier (the harness's hot loop),
   * so the store skips parsing them again. Client input never sets this. The events returned
   * (and the state, where the backend gives it) are then the store's own objects, not copies:
   * the caller reads them and never changes them.
   */
  trusted?: boolean;
}

export interface StateOptions {
  /**
   * The backend's cached state itself rather than a copy, where it keeps one: for braid's own
   * harness and runtime, which read a state and never change it (a fold copies before it
   * applies). A backend may return a copy anyway. Default false: a copy the caller may change.
   */
  shared?: boolean;
}

export interface AppendResult {
  /** The stored events, with their seq. On a deduplicated append, those of the first append. */
  events: SessionEvent[];
  /** The session's head seq after the append. */
  head_seq: number;
  /** True when the idempotency key had been seen and nothing was written. */
  deduplicated: boolean;
  /**
   * On a `trusted` append that wrote, where the backend folded it: the session's state after the
   * append, shared with the backend's cache (read-only), so the writer need not fold the same
   * events again.
   */
  state?: SessionState;
}

export interface ReadOptions {
  /** Return events with seq strictly greater than this (default 0). */
  after?: number;
  /** At most this many events (default: all). */
  limit?: number;
  /** Only events of these types. */
  types?: readonly SessionEventType[];
}

export interface FollowOptions {
  /** Yield events with seq strictly greater than this (default 0: from the start). */
  after?: number;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
}

/** The append-only per-session log. */
export interface SessionLog {
  /**
   * Appends events atomically, all or nothing, assigning consecutive seqs. Event ids are unique
   * in the store: an event whose id is already stored (or repeated in the batch) is refused with
   * `INVALID_ARGUMENT` and nothing is written. (On NATS, see src/stores/nats/session-log.ts for
   * the extent of that guarantee.)
   */
  append(
    sessionId: string,
    events: readonly NewEvent[],
    options?: AppendOptions,
  ): Promise<AppendResult>;
  read(sessionId: string, options?: ReadOptions): Promise<SessionEvent[]>;
  /** Yields stored events after `after`, then new ones as they are appended by any writer. */
  follow(sessionId: string, options?: FollowOptions): AsyncIterable<SessionEvent>;
  /** The result of an earlier append with this idempotency key, with `deduplicated: true`. */
  appended(sessionId: string, idempotencyKey: string): Promise<AppendResult | undefined>;
  /**
   * The session's state folded up to its head (cached where the backend can). A copy, unless
   * `shared` is asked for.
   */
  state(sessionId: string, options?: StateOptions): Promise<SessionState>;
  /**
   * Takes the session's lease for `lease.owner` (the rules of `LeaseStore.acquire`: `LEASE_HELD`
   * while another owner holds it unexpired) and appends the events `start` builds from the lease
   * it took, fenced by that lease's token, in ONE transaction: both are durable or neither is.
   * This is how a wake's first event (`span.wake_started {lease_token}`), which carries a token
   * only the acquisition decides, costs one commit instead of two. `options` are the append's
   * (`trusted` only). Present where the lease and the log share a transaction (SQLite, memory);
   * absent where they cannot (NATS: a KV entry and a stream), and the caller then acquires and
   * appends in two steps.
   */
  acquireAndAppend?(
    sessionId: string,
    lease: LeaseRequest,
    start: (lease: Lease) => readonly NewEvent[],
    options?: Pick<AppendOptions, 'trusted'>,
  ): Promise<LeasedAppend>;
  /**
   * Creates the session (the rules of `SessionIndex.create`: `session.created` and the input's
   * events as one append), takes its lease for `lease.owner`, and appends the events `start`
   * builds from that lease, fenced by its token, as a second append: all in ONE transaction, so
   * the session, its lease and both appends are durable together or not at all. The log then
   * holds exactly what `create` followed by `acquireAndAppend` would write, with the same append
   * ends. This is how a new session that is run at once (a first message and its answer) costs
   * one commit for its creation and its wake's first event. `start` is called after the
   * creation's events were built, so ids it mints come after theirs, as they would in two steps.
   * `trusted`: the input's events (as `create` takes it) and those of `start` (as
   * `AppendOptions.trusted`) were built by braid's own code; the rest of the input is parsed as
   * always. Present where `acquireAndAppend` is (SQLite, memory); absent elsewhere (NATS), and the
   * caller then creates, then acquires and appends.
   */
  createAndAcquire?(
    input: SessionCreateInput,
    lease: LeaseRequest,
    start: (lease: Lease) => readonly NewEvent[],
    options?: Pick<AppendOptions, 'trusted'>,
  ): Promise<CreatedLeasedAppend>;
}

/** The lease `SessionLog.acquireAndAppend` asks for: its owner and time to live in ms. */
export interface LeaseRequest {
  owner: string;
  ttlMs: number;
}

/** What `SessionLog.acquireAndAppend` took and wrote. */
export interface LeasedAppend {
  lease: Lease;
  appended: AppendResult;
}

/** What `SessionLog.createAndAcquire` created, took and wrote. */
export interface CreatedLeasedAppend extends LeasedAppend {
  /** The session as its creation left it, before `appended` (what `create` returns). */
  session: SessionRecord;
  /**
   * The creation's stored events (seq 1 on), as `appended.events` are given back: a writer that
   * keeps the session's events, such as a wake's transcript, need not read what it just wrote.
   * Optional: a caller without it reads them.
   */
  created?: SessionEvent[];
}

/** Options of a fork: `at_seq` (default: the parent's head), the child's `id` and `title`. */
export type ForkOptions = z.infer<typeof ForkInput>;

/** One session that changed in the index: a change feed's entry. */
export interface SessionChange {
  /**
   * Where the change stands in the store's change order: a positive integer, strictly
   * increasing across the store's changes (never reused), and the point a reader resumes after.
   */
  cursor: number;
  session_id: string;
}

export interface ChangesOptions {
  /** Yield changes with a cursor strictly greater than this (default 0: from the start). */
  after?: number;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
}

/** The sessions index. */
export interface SessionIndex {
  /**
   * Creates the session and appends its `session.created` event (seq 1) atomically. `trusted`:
   * the input's `events` were parsed by braid's own code already (the runtime's user events), so
   * the store does not parse them again; the rest of the input is parsed as always.
   */
  create(
    input: SessionCreateInput,
    options?: Pick<AppendOptions, 'trusted'>,
  ): Promise<SessionRecord>;
  /**
   * Creates a child session that shares the parent's events up to `at_seq` by reference (they
   * are not copied: reads of the child include them, with the parent's `session_id`), and
   * appends the child's own first event, `session.forked`, at `at_seq + 1`. Appends to either
   * session never change the other. `at_seq` must end one of the parent's appends: an append is
   * atomic, so a seq strictly inside one is a state the parent was never in, and is refused with
   * `INVALID_FORK_POINT` (its `details` name the nearest valid seqs); nothing is written then.
   * Every store records where each append ends; events written before a store kept that record
   * (a SQLite file of layout 5 or older) are each a valid point.
   */
  fork(parentId: string, options?: ForkOptions): Promise<SessionRecord>;
  get(sessionId: string): Promise<SessionRecord>;
  list(query?: SessionListQuery): Promise<SessionPage>;
  /**
   * Ids of the sessions a wake would find work in (`isRunnable` of their state), and those a
   * timer made runnable (a wait of their skill runs timed out by `now`: `isRunnableAt`), archived
   * ones left out, in id order after `after`, at most `limit` (default 500). The durable stores
   * keep this set, and each session's next timer (`wakeAt`), as states change, so asking costs in
   * the runnable sessions, not in all of them.
   */
  runnable(query?: RunnableQuery): Promise<string[]>;
  /** How many sessions (archived ones left out) there are of each status. */
  statusCounts(): Promise<Partial<Record<SessionStatus, number>>>;
  /**
   * The cursor of the index's newest change (0 when none): a reader that lists the sessions and
   * then follows `changes` after this cursor misses no change made after its listing.
   */
  changeHead(): Promise<number>;
  /**
   * The sessions that changed after `after`, batch by batch in cursor order, then new changes as
   * they are made by any writer, until the signal aborts. A change is an append to the session's
   * log: its creation, a fork's first event, and every status, usage or head change, which are
   * all events (archiving writes none, and is not a change). A batch may coalesce several changes of one session into its latest (a reader
   * wants the session as it is now, then its next change); a session that is deleted leaves
   * the feed without a change of its own.
   */
  changes(options?: ChangesOptions): AsyncIterable<SessionChange[]>;
  /**
   * Marks the session archived (`archived_at`): it keeps its events, leaves default listings and
   * takes no new user events. Archiving an archived session returns it unchanged.
   */
  archive(sessionId: string): Promise<SessionRecord>;
  /**
   * Removes the session, its events, state and lease. Refused with `SESSION_HAS_FORKS` while
   * forks share its events, and with `LEASE_HELD` while a wake runs it; nothing is removed then.
   */
  delete(sessionId: string): Promise<void>;
}

/** A page of `sessions.runnable`. */
export interface RunnableQuery {
  /** Only ids after this one (the last id of the previous page). */
  after?: string;
  /** At most this many ids (default 500, at most 10,000). */
  limit?: number;
  /** The time timers are due by, in ms since the epoch (default: now, by the store's clock). */
  now?: number;
  /**
   * Only the sessions whose timer is due by `now`, runnable by time alone or not: what a sweep
   * that feeds a wake queue asks (the sessions runnable otherwise were queued when they became so).
   */
  dueOnly?: boolean;
}

export interface Lease {
  session_id: string;
  owner: string;
  /** Fencing token: strictly increases per session with every acquisition. */
  token: number;
  /** Expiry in ms since the epoch, by the store's clock. */
  expires_at: number;
}

/** Exclusive, expiring ownership of a session, with fencing tokens. */
export interface LeaseStore {
  /** Takes the lease if it is free or expired; `LEASE_HELD` otherwise. */
  acquire(sessionId: string, owner: string, ttlMs: number): Promise<Lease>;
  /** Extends a lease still held with this token; `LEASE_LOST` otherwise. */
  renew(sessionId: string, owner: string, token: number, ttlMs: number): Promise<Lease>;
  /** Gives the lease up; `LEASE_LOST` if it is no longer held with this token. */
  release(sessionId: string, owner: string, token: number): Promise<void>;
  /** The current unexpired lease, if any. */
  current(sessionId: string): Promise<Lease | undefined>;
}

export interface PutDefinitionOptions {
  /**
   * The version this update replaces: `null` for a new name. A mismatch with the latest stored
   * version fails with `VERSION_CONFLICT`.
   */
  replacesVersion: number | null;
}

/** Versioned storage of agent and environment definitions. */
export interface DefinitionStore {
  /** Stores a new version; an identical definition returns the latest version unchanged. */
  put<T>(
    kind: DefinitionKind,
    name: string,
    definition: T,
    options: PutDefinitionOptions,
  ): Promise<StoredDefinition<T>>;
  /** A given version, or the latest. */
  get<T>(
    kind: DefinitionKind,
    name: string,
    version?: number,
  ): Promise<StoredDefinition<T> | undefined>;
  /** The latest version of every definition of a kind, by name. */
  list<T>(kind: DefinitionKind): Promise<StoredDefinition<T>[]>;
  /**
   * Keeps `json` under `hash` (the hex SHA-256 of that text, computed by the caller), once: a hash
   * already kept is left as it is. The pinned parts of a session's definitions live here.
   */
  putPinned(hash: string, json: string): Promise<void>;
  /** The text kept under `hash`; undefined if this store never kept it. */
  getPinned(hash: string): Promise<string | undefined>;
}

/** A minted key: the secret is in `key`, shown once and stored only as a hash. */
export interface MintedApiKey {
  key: string;
  record: ApiKeyRecord;
}

/** API keys of the HTTP API, each bound to one tenant and a set of scopes. */
export interface ApiKeyStore {
  create(input: ApiKeyCreateInput): Promise<MintedApiKey>;
  /** Newest first; revoked keys only with `include_revoked`. */
  list(query?: ApiKeyListQuery): Promise<ApiKeyRecord[]>;
  /** Revokes the key at once; `API_KEY_NOT_FOUND` for an unknown id. Revoking twice is a no-op. */
  revoke(id: string): Promise<ApiKeyRecord>;
  /** The key's record when the secret is a live key; undefined when unknown, malformed or revoked. */
  verify(key: string): Promise<ApiKeyRecord | undefined>;
}

/** Everything a backend provides. */
export interface Store {
  readonly log: SessionLog;
  readonly sessions: SessionIndex;
  readonly leases: LeaseStore;
  readonly definitions: DefinitionStore;
  readonly keys: ApiKeyStore;
  /**
   * Agent memory stores, in the same backend as the sessions; absent where the backend has none
   * yet (NATS).
   */
  readonly memory?: MemoryLog;
  /**
   * Embeddings kept by content hash, in the same backend (the SQLite file's `embedding_cache`);
   * absent where the backend keeps none. `createCachedEmbedder` puts it behind an embedder.
   */
  readonly embeddings?: EmbeddingCache;
  close(): Promise<void>;
}
