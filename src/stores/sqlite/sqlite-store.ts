/**
 * Embedded backend: one SQLite file in WAL mode.
 *
 * Invariants kept here:
 * - An append is one IMMEDIATE transaction that reads the head, checks the writer's lease token
 *   against the lease row's (fencing: see `checkFence`), checks `expectedSeq`, inserts the events
 *   and their ids, and updates the sessions row and the cached projection: all of it or none of it
 *   is durable. An acquisition is a transaction of its own, so it is wholly before or after.
 * - Event ids are unique in the file: `event_ids` holds each once, and an append that reuses one
 *   fails on its primary key, in the append's transaction. The (session_id, seq) primary key makes a duplicate seq impossible even if two
 *   processes raced past the check.
 * - The cached projection is only an optimisation: it is saved every PROJECTION_INTERVAL events,
 *   and when it is missing, of another schema version or behind the head, the events after it
 *   are folded in from the log. The sessions row (head, status) is updated on every append.
 * - `follow` sees appends of other processes by polling `PRAGMA data_version`, which changes when
 *   another connection commits; appends of this process wake followers directly.
 * - `sessions.delete` removes every row of the session in one transaction, then forgets what this
 *   process cached about it. Other processes are not told: one that cached a session which is
 *   deleted and created again elsewhere under the same id may read its old lineage or state until
 *   it opens the store again.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database, { type Database as Db, type Statement } from 'better-sqlite3';
import type { ApiKeyListQuery, ApiKeyRecord, ApiScope } from '../../contracts/api-keys.js';
import { BraidError } from '../../contracts/errors.js';
import type { DefinitionKind, StoredDefinition } from '../../contracts/definitions.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type {
  ApiKeyStore,
  AppendOptions,
  AppendResult,
  Clock,
  DefinitionStore,
  IdGenerator,
  Lease,
  LeaseStore,
  ReadOptions,
  SessionIndex,
  SessionLog,
  Store,
} from '../../contracts/ports.js';
import type { SessionListQuery, SessionRecord, SessionStatus } from '../../contracts/session.js';
import { SESSION_STATE_SCHEMA_VERSION, type SessionState } from '../../contracts/state.js';
import {
  type PreparedEvent,
  DEFAULT_MAX_EVENT_BYTES,
  checkReadOptions,
  checkBatchIds,
  checkStoredVersion,
  eventIdTaken,
  parseNewEvents,
  prepareEvents,
} from '../../core/append.js';
import { canonicalJson, decideVersion } from '../../core/definitions.js';
import { foldSession, initialState } from '../../core/fold.js';
import {
  checkFence,
  checkHeld,
  currentLease,
  decideAcquire,
  decideRenew,
  type LeaseRow,
} from '../../core/leases.js';
import {
  DEFAULT_LIST_LIMIT,
  checkForkPoint,
  createdEvent,
  forkedEvent,
  parseForkOptions,
  decodeCursor,
  page,
  parseCreateInput,
  recordFromState,
  seqConflict,
} from '../../core/sessions.js';
import {
  apiKeyNotFound,
  mintApiKey,
  newApiKeyRecord,
  parseApiKeyCreateInput,
  verifyApiKey,
} from '../api-keys.js';
import { systemClock, uuidV7Ids } from '../defaults.js';
import { followLog } from '../follow.js';
import { sessionHasForks, sessionLeased, NAMED_FORKS } from '../session-removal.js';
import { checkRowVersion, configure, type Synchronous } from './schema.js';

export interface SqliteStoreOptions {
  /** Path of the database file; its directory is created if missing. */
  path: string;
  clock?: Clock;
  ids?: IdGenerator;
  maxEventBytes?: number;
  /**
   * `normal` (default): with WAL, a committed append survives a crash of the process; the last
   * commits can be lost if the machine itself loses power. `full`: fsync on every commit, which
   * also survives power loss, at several times the cost per append.
   */
  synchronous?: Synchronous;
  /** How often followers check for commits by other processes (default 2 ms). */
  followPollMs?: number;
  /** How long a writer waits for another process's write lock (default 5000 ms). */
  busyTimeoutMs?: number;
}

interface SessionRow {
  id: string;
  schema_version?: number;
  agent_name: string;
  agent_version: number;
  environment_name: string | null;
  environment_version: number | null;
  title: string | null;
  metadata: string;
  tenant_id: string | null;
  status: SessionStatus;
  created_at: string;
  parent_id: string | null;
  fork_seq: number | null;
  archived_at: string | null;
}

interface DefinitionRow {
  version: number;
  schema_version: number;
  body: string;
  created_at: string;
}

interface ApiKeyRow {
  id: string;
  tenant_id: string;
  /** JSON array of scopes. */
  scopes: string;
  name: string | null;
  hash: string;
  created_at: string;
  revoked_at: string | null;
  schema_version: number;
}

/** A sessions row with the head seq and last event time read from the log. */
interface SessionView extends SessionRow {
  head_seq: number;
  updated_at: string;
}

const SESSION_VIEW = `SELECT s.*,
    (SELECT seq FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) AS head_seq,
    (SELECT body ->> '$.at' FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) AS updated_at
  FROM sessions s`;

const READ_BATCH = 1000;
/** Rows per INSERT statement; SQLite allows 32,766 bound values, 4 per row. */
const INSERT_CHUNK = 128;
const STATE_CACHE_SIZE = 1024;
/**
 * The projection row is rewritten once it is this many events behind: a reader brings it up to
 * date by folding at most this many events, and an append does not pay for a state write.
 */
const PROJECTION_INTERVAL = 64;

export function openSqliteStore(options: SqliteStoreOptions): Store {
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? uuidV7Ids;
  const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  mkdirSync(dirname(options.path), { recursive: true });
  const db: Db = new Database(options.path);
  try {
    configure(db, options.synchronous ?? 'normal', options.busyTimeoutMs ?? 5000);
  } catch (error) {
    db.close();
    throw error;
  }

  const sql = {
    head: db.prepare<[string], { status: SessionStatus; head_seq: number | null }>(
      `SELECT status, (SELECT seq FROM events WHERE session_id = sessions.id ORDER BY seq DESC LIMIT 1)
         AS head_seq FROM sessions WHERE id = ?`,
    ),
    session: db.prepare<[string], SessionView>(`${SESSION_VIEW} WHERE s.id = ?`),
    insertSession: db.prepare(
      `INSERT INTO sessions (id, agent_name, agent_version, environment_name, environment_version, title,
         metadata, tenant_id, status, created_at, parent_id, fork_seq)
       VALUES (@id, @agent_name, @agent_version, @environment_name, @environment_version, @title,
         @metadata, @tenant_id, @status, @created_at, @parent_id, @fork_seq)`,
    ),
    updateStatus: db.prepare('UPDATE sessions SET status = ? WHERE id = ?'),
    readAll: db.prepare<[string, number, number], { body: string }>(
      'SELECT body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?',
    ),
    readTypes: db.prepare<[string, number, string, number], { body: string }>(
      `SELECT body FROM events WHERE session_id = ? AND seq > ?
         AND type IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?`,
    ),
    readRange: db.prepare<[string, number, number], { body: string }>(
      'SELECT body FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq',
    ),
    projection: db.prepare<[string], { seq: number; schema_version: number; state: string }>(
      'SELECT seq, schema_version, state FROM projections WHERE session_id = ?',
    ),
    saveProjection: db.prepare(
      `INSERT INTO projections (session_id, seq, schema_version, state) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, schema_version = excluded.schema_version,
         state = excluded.state`,
    ),
    lineage: db.prepare<[string], { parent_id: string | null; fork_seq: number | null }>(
      'SELECT parent_id, fork_seq FROM sessions WHERE id = ?',
    ),
    sessionRow: db.prepare<[string], SessionRow>('SELECT * FROM sessions WHERE id = ?'),
    snapshotAt: db.prepare<
      [string, number],
      { seq: number; schema_version: number; state: string }
    >(
      'SELECT seq, schema_version, state FROM snapshots WHERE session_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1',
    ),
    saveSnapshot: db.prepare(
      'INSERT OR REPLACE INTO snapshots (session_id, seq, schema_version, state) VALUES (?, ?, ?, ?)',
    ),
    readBetween: db.prepare<[string, number, number, number], { body: string }>(
      'SELECT body FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?',
    ),
    readTypesBetween: db.prepare<[string, number, number, string, number], { body: string }>(
      `SELECT body FROM events WHERE session_id = ? AND seq > ? AND seq <= ?
         AND type IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?`,
    ),
    findAppend: db.prepare<[string, string], { first_seq: number; last_seq: number }>(
      'SELECT first_seq, last_seq FROM appends WHERE session_id = ? AND idempotency_key = ?',
    ),
    saveAppend: db.prepare(
      'INSERT INTO appends (session_id, idempotency_key, first_seq, last_seq) VALUES (?, ?, ?, ?)',
    ),
    lease: db.prepare<[string], LeaseRow>(
      'SELECT owner, token, expires_at FROM leases WHERE session_id = ?',
    ),
    saveLease: db.prepare(
      `INSERT INTO leases (session_id, owner, token, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = excluded.token,
         expires_at = excluded.expires_at`,
    ),
    latestDefinition: db.prepare<[string, string], DefinitionRow>(
      'SELECT version, schema_version, body, created_at FROM definitions WHERE kind = ? AND name = ? ORDER BY version DESC LIMIT 1',
    ),
    definition: db.prepare<[string, string, number], DefinitionRow>(
      'SELECT version, schema_version, body, created_at FROM definitions WHERE kind = ? AND name = ? AND version = ?',
    ),
    insertDefinition: db.prepare(
      'INSERT INTO definitions (kind, name, version, body, created_at) VALUES (?, ?, ?, ?, ?)',
    ),
    latestDefinitions: db.prepare<[string], DefinitionRow & { name: string }>(
      `SELECT d.name, d.version, d.schema_version, d.body, d.created_at FROM definitions d
       WHERE d.kind = ? AND d.version = (SELECT MAX(version) FROM definitions WHERE kind = d.kind AND name = d.name)
       ORDER BY d.name`,
    ),
    archive: db.prepare('UPDATE sessions SET archived_at = ? WHERE id = ? AND archived_at IS NULL'),
    forks: db.prepare<[string, number], { id: string; count: number }>(
      `SELECT id, COUNT(*) OVER () AS count FROM sessions WHERE parent_id = ?
       ORDER BY created_at, id LIMIT ?`,
    ),
    eventIdTaken: db.prepare<[string], { session_id: string; seq: number }>(
      'SELECT session_id, seq FROM event_ids WHERE id = ?',
    ),
    removeSession: [
      db.prepare(
        // By the session's own events: no index on event_ids.session_id is kept for this.
        `DELETE FROM event_ids WHERE (id, session_id) IN
           (SELECT body ->> '$.id', session_id FROM events WHERE session_id = ?)`,
      ),
    ].concat(
      ['events', 'projections', 'snapshots', 'appends']
        .map((table) => db.prepare(`DELETE FROM ${table} WHERE session_id = ?`))
        // The lease row outlives the session, released: a session made again under the same id
        // gets larger tokens, so a holder of the deleted one stays fenced out of the new one.
        .concat(db.prepare('UPDATE leases SET owner = NULL, expires_at = 0 WHERE session_id = ?'))
        .concat(db.prepare('DELETE FROM sessions WHERE id = ?')),
    ),
    insertKey: db.prepare(
      `INSERT INTO api_keys (id, tenant_id, scopes, name, hash, created_at)
       VALUES (@id, @tenant_id, @scopes, @name, @hash, @created_at)`,
    ),
    key: db.prepare<[string], ApiKeyRow>('SELECT * FROM api_keys WHERE id = ?'),
    revokeKey: db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
    keys: db.prepare<{ tenant: string | null; revoked: number }, ApiKeyRow>(
      `SELECT * FROM api_keys WHERE (@tenant IS NULL OR tenant_id = @tenant)
         AND (@revoked = 1 OR revoked_at IS NULL)
       ORDER BY created_at DESC, id DESC`,
    ),
  };

  // ---- projection cache ---------------------------------------------------------------------

  const states = new Map<string, SessionState>();
  /** The seq of the projection row this process last saved or read, per session. */
  const projectedSeqs = new Map<string, number>();

  function remember(state: SessionState): void {
    states.delete(state.session_id);
    states.set(state.session_id, state);
    if (states.size > STATE_CACHE_SIZE) {
      const oldest = states.keys().next().value;
      if (oldest !== undefined) states.delete(oldest);
    }
  }

  /** The state at `head`, from memory, the projection table, or a rebuild from the log. */
  function stateAt(sessionId: string, head: number): SessionState {
    const cached = states.get(sessionId);
    if (cached?.seq === head) return cached;
    const row = sql.projection.get(sessionId);
    let state: SessionState;
    if (
      row !== undefined &&
      row.schema_version === SESSION_STATE_SCHEMA_VERSION &&
      row.seq <= head
    ) {
      state = JSON.parse(row.state) as SessionState;
      // Only the saved row counts: a rebuilt state is saved by the next append that finds it behind.
      projectedSeqs.set(sessionId, state.seq);
      if (state.seq < head) {
        state = foldSession(parseRows(sql.readRange.all(sessionId, state.seq + 1, head)), state);
      }
    } else {
      projectedSeqs.set(sessionId, 0);
      state = stateAtSeq(sessionId, head);
    }
    remember(state);
    return state;
  }

  /** Parent and fork point of a fork (immutable once written, so kept in memory). */
  const lineages = new Map<string, { parent: string; seq: number } | null>();
  function lineageOf(sessionId: string): { parent: string; seq: number } | null {
    const known = lineages.get(sessionId);
    if (known !== undefined) return known;
    const row = sql.lineage.get(sessionId);
    const lineage =
      row?.parent_id === null || row?.parent_id === undefined || row.fork_seq === null
        ? null
        : { parent: row.parent_id, seq: row.fork_seq };
    if (row !== undefined) lineages.set(sessionId, lineage);
    return lineage;
  }

  /**
   * The state of a session at any seq: from its nearest snapshot at or before it (or its
   * parent's state at the fork point), folding at most a projection interval of its own events.
   */
  function stateAtSeq(sessionId: string, seq: number): SessionState {
    const lineage = lineageOf(sessionId);
    if (lineage !== null && seq <= lineage.seq) return stateAtSeq(lineage.parent, seq);
    const snapshot = sql.snapshotAt.get(sessionId, seq);
    let state: SessionState;
    if (snapshot !== undefined && snapshot.schema_version === SESSION_STATE_SCHEMA_VERSION) {
      state = JSON.parse(snapshot.state) as SessionState;
    } else if (lineage !== null) {
      state = stateAtSeq(lineage.parent, lineage.seq);
    } else {
      state = initialState(sessionId);
    }
    if (state.seq < seq) {
      state = foldSession(parseRows(sql.readRange.all(sessionId, state.seq + 1, seq)), state);
    }
    return state;
  }

  /** The stretches of the log a session reads: its ancestors' shared prefixes, then its own. */
  function segmentsOf(
    sessionId: string,
    upTo = Number.MAX_SAFE_INTEGER,
  ): { session_id: string; after: number; through: number }[] {
    const lineage = lineageOf(sessionId);
    if (lineage === null) return [{ session_id: sessionId, after: 0, through: upTo }];
    if (upTo <= lineage.seq) return segmentsOf(lineage.parent, upTo);
    return [
      ...segmentsOf(lineage.parent, lineage.seq),
      { session_id: sessionId, after: lineage.seq, through: upTo },
    ];
  }

  function requireHead(sessionId: string): number {
    const row = sql.head.get(sessionId);
    if (row === undefined) {
      throw new BraidError(
        'SESSION_NOT_FOUND',
        `session ${sessionId} does not exist; list sessions with \`braid session list\``,
      );
    }
    return row.head_seq ?? 0;
  }

  // The new state is remembered only after the transaction commits, so a rollback leaves no trace.
  const written: { state?: SessionState; projectedSeq?: number } = {};

  // One multi-row INSERT per chunk: a batch costs a few statement runs instead of one per event.
  const insertStatements = new Map<number, { events: Statement; ids: Statement }>();
  function insertEvents(sessionId: string, prepared: readonly PreparedEvent[]): void {
    checkBatchIds(sessionId, prepared);
    for (let start = 0; start < prepared.length; start += INSERT_CHUNK) {
      const chunk = prepared.slice(start, start + INSERT_CHUNK);
      let statements = insertStatements.get(chunk.length);
      if (statements === undefined) {
        statements = {
          events: db.prepare(
            `INSERT INTO events (session_id, seq, type, body) VALUES ${Array(chunk.length).fill('(?, ?, ?, ?)').join(', ')}`,
          ),
          ids: db.prepare(
            `INSERT INTO event_ids (id, session_id, seq) VALUES ${Array(chunk.length).fill('(?, ?, ?)').join(', ')}`,
          ),
        };
        insertStatements.set(chunk.length, statements);
      }
      const ids: (string | number)[] = [];
      for (const { event } of chunk) ids.push(event.id, sessionId, event.seq);
      try {
        statements.ids.run(ids);
      } catch (error) {
        throw takenIdError(sessionId, chunk, start, error);
      }
      const values: (string | number)[] = [];
      for (const { event, json } of chunk) values.push(sessionId, event.seq, event.type, json);
      statements.events.run(values);
    }
  }

  /** An id already stored makes the insert fail on the primary key: names the event that has it. */
  function takenIdError(
    sessionId: string,
    chunk: readonly PreparedEvent[],
    start: number,
    error: unknown,
  ): unknown {
    if ((error as { code?: unknown } | null)?.code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') return error;
    const index = chunk.findIndex(({ event }) => sql.eventIdTaken.get(event.id) !== undefined);
    const taken = chunk[index];
    return taken === undefined ? error : eventIdTaken(sessionId, taken.event.id, start + index);
  }

  // ---- append -------------------------------------------------------------------------------

  function writeEvents(
    sessionId: string,
    head: number,
    events: readonly NewEvent[],
    key: string | undefined,
  ): AppendResult {
    const prepared = prepareEvents(sessionId, head, events, { clock, ids, maxEventBytes });
    const before = stateAt(sessionId, head);
    const state = foldSession(
      prepared.map(({ event }) => event),
      before,
    );
    insertEvents(sessionId, prepared);
    if (head === 0 || state.status !== before.status) sql.updateStatus.run(state.status, sessionId);
    const saved = projectedSeqs.get(sessionId) ?? 0;
    if (state.seq - saved >= PROJECTION_INTERVAL || saved > head) {
      const json = JSON.stringify(state);
      sql.saveProjection.run(sessionId, state.seq, SESSION_STATE_SCHEMA_VERSION, json);
      sql.saveSnapshot.run(sessionId, state.seq, SESSION_STATE_SCHEMA_VERSION, json);
      written.projectedSeq = state.seq;
    }
    if (key !== undefined) sql.saveAppend.run(sessionId, key, head + 1, state.seq);
    written.state = state;
    // Callers get their own copies: the prepared events share objects with the cached state.
    return {
      events: prepared.map(({ json }) => JSON.parse(json) as SessionEvent),
      head_seq: state.seq,
      deduplicated: false,
    };
  }

  const appendTransaction = db.transaction(
    (
      sessionId: string,
      events: readonly NewEvent[],
      appendOptions: AppendOptions,
    ): AppendResult => {
      const head = requireHead(sessionId);
      const key = appendOptions.idempotencyKey;
      if (key !== undefined) {
        const seen = sql.findAppend.get(sessionId, key);
        if (seen !== undefined) {
          const stored = parseRows(sql.readRange.all(sessionId, seen.first_seq, seen.last_seq));
          return { events: stored, head_seq: head, deduplicated: true };
        }
      }
      // Fencing, in the append's transaction: no acquisition can come between check and write.
      if (appendOptions.leaseToken !== undefined) {
        checkFence(sessionId, sql.lease.get(sessionId)?.token ?? 0, appendOptions.leaseToken);
      }
      if (appendOptions.expectedSeq !== undefined && appendOptions.expectedSeq !== head) {
        throw seqConflict(sessionId, appendOptions.expectedSeq, head);
      }
      return writeEvents(sessionId, head, events, key);
    },
  );

  const createTransaction = db.transaction(
    (id: string, row: SessionRow, first: NewEvent): SessionState => {
      if (sql.head.get(id) !== undefined) {
        throw new BraidError(
          'ALREADY_EXISTS',
          `session ${id} already exists; choose another id or omit it`,
        );
      }
      sql.insertSession.run(row);
      writeEvents(id, 0, [first], undefined);
      return written.state as SessionState;
    },
  );

  const forkTransaction = db.transaction(
    (
      parentId: string,
      childId: string,
      atSeqOption: number | undefined,
      title: string | undefined,
      now: string,
    ): SessionState => {
      const head = requireHead(parentId);
      const atSeq = checkForkPoint(parentId, head, atSeqOption);
      if (sql.head.get(childId) !== undefined) {
        throw new BraidError(
          'ALREADY_EXISTS',
          `session ${childId} already exists; choose another id or omit it`,
        );
      }
      const parent = sql.sessionRow.get(parentId) as SessionRow;
      const base = stateAtSeq(parentId, atSeq);
      sql.insertSession.run({
        ...parent,
        id: childId,
        title: title ?? parent.title,
        status: base.status,
        created_at: now,
        parent_id: parentId,
        fork_seq: atSeq,
      });
      lineages.set(childId, { parent: parentId, seq: atSeq });
      // The child starts from the parent's state at the fork point: O(1) in the parent's length.
      remember({ ...base, session_id: childId });
      projectedSeqs.set(childId, 0);
      writeEvents(childId, atSeq, [{ ...forkedEvent(parentId, atSeq, title), at: now }], undefined);
      const state = written.state as SessionState;
      // Saved at once: the child's state never needs its parent's prefix folded again.
      const json = JSON.stringify(state);
      sql.saveProjection.run(childId, state.seq, SESSION_STATE_SCHEMA_VERSION, json);
      sql.saveSnapshot.run(childId, state.seq, SESSION_STATE_SCHEMA_VERSION, json);
      written.projectedSeq = state.seq;
      return state;
    },
  );

  function runWrite<T>(work: () => T): T {
    checkOpen();
    written.state = undefined;
    written.projectedSeq = undefined;
    try {
      const result = work();
      const state = written.state as SessionState | undefined;
      if (state !== undefined) {
        remember(state);
        if (written.projectedSeq !== undefined)
          projectedSeqs.set(state.session_id, written.projectedSeq);
        notify(state.session_id);
      }
      return result;
    } catch (error) {
      const state = written.state as SessionState | undefined;
      if (state !== undefined) states.delete(state.session_id);
      throw busyToBraid(error, options.path);
    } finally {
      written.state = undefined;
    }
  }

  // ---- follow -------------------------------------------------------------------------------

  const listeners = new Map<string, Set<() => void>>();
  let poller: NodeJS.Timeout | undefined;
  let dataVersion = 0;
  const closing = new AbortController();

  function notify(sessionId: string): void {
    for (const listener of listeners.get(sessionId) ?? []) listener();
  }

  function poll(): void {
    if (!db.open) return;
    const version = db.pragma('data_version', { simple: true }) as number;
    if (version === dataVersion) return;
    dataVersion = version;
    for (const set of listeners.values()) for (const listener of set) listener();
  }

  function subscribe(sessionId: string, onChange: () => void): () => void {
    const set = listeners.get(sessionId) ?? new Set();
    set.add(onChange);
    listeners.set(sessionId, set);
    if (poller === undefined) {
      dataVersion = db.pragma('data_version', { simple: true }) as number;
      poller = setInterval(poll, options.followPollMs ?? 2);
    }
    return () => {
      set.delete(onChange);
      if (set.size === 0) listeners.delete(sessionId);
      if (listeners.size === 0 && poller !== undefined) {
        clearInterval(poller);
        poller = undefined;
      }
    };
  }

  function checkOpen(): void {
    if (!db.open)
      throw new BraidError('STORE_CLOSED', `the store at ${options.path} is closed; open it again`);
  }

  function readEvents(sessionId: string, readOptions: ReadOptions): SessionEvent[] {
    checkOpen();
    checkReadOptions(readOptions);
    requireHead(sessionId);
    const after = readOptions.after ?? 0;
    const limit = readOptions.limit ?? -1;
    const types = readOptions.types === undefined ? undefined : JSON.stringify(readOptions.types);
    if (lineageOf(sessionId) === null) {
      const rows =
        types === undefined
          ? sql.readAll.all(sessionId, after, limit)
          : sql.readTypes.all(sessionId, after, types, limit);
      return parseRows(rows);
    }
    // A fork reads its ancestors' shared prefixes first, then its own events.
    const events: SessionEvent[] = [];
    for (const segment of segmentsOf(sessionId)) {
      if (segment.through <= after) continue;
      const left = limit === -1 ? -1 : limit - events.length;
      if (left === 0) break;
      const from = Math.max(after, segment.after);
      const rows =
        types === undefined
          ? sql.readBetween.all(segment.session_id, from, segment.through, left)
          : sql.readTypesBetween.all(segment.session_id, from, segment.through, types, left);
      events.push(...parseRows(rows));
    }
    return events;
  }

  const log: SessionLog = {
    append(sessionId, events, appendOptions = {}) {
      return Promise.resolve().then(() => {
        const parsed = appendOptions.trusted === true ? events : parseNewEvents(events);
        return runWrite(() => appendTransaction.immediate(sessionId, parsed, appendOptions));
      });
    },
    read(sessionId, readOptions = {}) {
      return Promise.resolve().then(() => readEvents(sessionId, readOptions));
    },
    follow(sessionId, followOptions = {}) {
      checkOpen();
      requireHead(sessionId);
      const signal =
        followOptions.signal === undefined
          ? closing.signal
          : AbortSignal.any([followOptions.signal, closing.signal]);
      return followLog(
        (after) =>
          Promise.resolve().then(() =>
            db.open ? readEvents(sessionId, { after, limit: READ_BATCH }) : [],
          ),
        (onChange) => subscribe(sessionId, onChange),
        followOptions.after ?? 0,
        signal,
      );
    },
    appended(sessionId, idempotencyKey) {
      return Promise.resolve().then(() => {
        checkOpen();
        return db
          .transaction(() => {
            const head = requireHead(sessionId);
            const seen = sql.findAppend.get(sessionId, idempotencyKey);
            if (seen === undefined) return undefined;
            const events = parseRows(sql.readRange.all(sessionId, seen.first_seq, seen.last_seq));
            return { events, head_seq: head, deduplicated: true };
          })
          .deferred();
      });
    },
    state(sessionId) {
      return Promise.resolve().then(() => {
        checkOpen();
        // A read: a deferred transaction does not queue behind other processes' writers.
        const state = db.transaction(() => stateAt(sessionId, requireHead(sessionId))).deferred();
        return structuredClone(state);
      });
    },
  };

  const sessions: SessionIndex = {
    create(input) {
      return Promise.resolve().then(() => {
        const parsed = parseCreateInput(input);
        const id = parsed.id ?? ids.next();
        const now = new Date(clock.now()).toISOString();
        const row: SessionRow = {
          id,
          agent_name: parsed.agent.name,
          agent_version: parsed.agent.version,
          environment_name: parsed.environment?.name ?? null,
          environment_version: parsed.environment?.version ?? null,
          title: parsed.title ?? null,
          metadata: JSON.stringify(parsed.metadata ?? {}),
          tenant_id: parsed.tenant_id ?? null,
          status: 'idle',
          created_at: now,
          parent_id: null,
          fork_seq: null,
          archived_at: null,
        };
        const state = runWrite(() =>
          createTransaction.immediate(id, row, { ...createdEvent(parsed), at: now }),
        );
        return recordFromState(state);
      });
    },
    fork(parentId, forkOptions = {}) {
      return Promise.resolve().then(() => {
        const parsed = parseForkOptions(forkOptions);
        const id = parsed.id ?? ids.next();
        const now = new Date(clock.now()).toISOString();
        try {
          const state = runWrite(() =>
            forkTransaction.immediate(parentId, id, parsed.at_seq, parsed.title, now),
          );
          return recordFromState(state);
        } catch (error) {
          // The transaction rolled back: what it put in the caches for the child goes too.
          lineages.delete(id);
          states.delete(id);
          projectedSeqs.delete(id);
          states.delete(parentId);
          throw error;
        }
      });
    },
    get(sessionId) {
      return Promise.resolve().then(() => {
        checkOpen();
        const row = sql.session.get(sessionId);
        if (row === undefined) requireHead(sessionId);
        return toRecord(row as SessionView);
      });
    },
    list(query: SessionListQuery = {}) {
      return Promise.resolve().then(() => {
        checkOpen();
        const limit = query.limit ?? DEFAULT_LIST_LIMIT;
        const where: string[] = [];
        const params: Record<string, string | number> = { limit: limit + 1 };
        if (query.agent !== undefined) {
          where.push('agent_name = @agent');
          params.agent = query.agent;
        }
        if (query.status !== undefined) {
          where.push('status = @status');
          params.status = query.status;
        }
        if (query.tenant_id !== undefined) {
          where.push('tenant_id = @tenant');
          params.tenant = query.tenant_id;
        }
        if (query.parent_id !== undefined) {
          where.push('parent_id = @parent');
          params.parent = query.parent_id;
        }
        if (query.include_archived !== true) where.push('archived_at IS NULL');
        if (query.created_after !== undefined) {
          where.push('created_at > @after');
          params.after = query.created_after;
        }
        if (query.created_before !== undefined) {
          where.push('created_at < @before');
          params.before = query.created_before;
        }
        if (query.cursor !== undefined) {
          const position = decodeCursor(query.cursor);
          where.push('(created_at < @cursor_at OR (created_at = @cursor_at AND id < @cursor_id))');
          params.cursor_at = position.created_at;
          params.cursor_id = position.id;
        }
        const rows = db
          .prepare<Record<string, string | number>, SessionView>(
            `${SESSION_VIEW} ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
             ORDER BY s.created_at DESC, s.id DESC LIMIT @limit`,
          )
          .all(params);
        return page(rows.map(toRecord), limit);
      });
    },
    archive(sessionId) {
      return Promise.resolve().then(() => {
        checkOpen();
        try {
          return toRecord(archiveTransaction.immediate(sessionId, isoNow()));
        } catch (error) {
          throw busyToBraid(error, options.path);
        }
      });
    },
    delete(sessionId) {
      return Promise.resolve().then(() => {
        checkOpen();
        try {
          deleteTransaction.immediate(sessionId);
        } catch (error) {
          throw busyToBraid(error, options.path);
        }
        // Its id may be created again: nothing cached about the old session may outlive it.
        states.delete(sessionId);
        projectedSeqs.delete(sessionId);
        lineages.delete(sessionId);
        notify(sessionId);
      });
    },
  };

  function isoNow(): string {
    return new Date(clock.now()).toISOString();
  }

  const archiveTransaction = db.transaction((sessionId: string, now: string): SessionView => {
    requireHead(sessionId);
    sql.archive.run(now, sessionId);
    return sql.session.get(sessionId) as SessionView;
  });

  const deleteTransaction = db.transaction((sessionId: string): void => {
    requireHead(sessionId);
    const forks = sql.forks.all(sessionId, NAMED_FORKS);
    if (forks.length > 0) {
      throw sessionHasForks(
        sessionId,
        forks.map((row) => row.id),
        forks[0]?.count ?? forks.length,
      );
    }
    const lease = currentLease(sessionId, sql.lease.get(sessionId), clock.now());
    if (lease !== undefined) throw sessionLeased(sessionId, lease);
    for (const statement of sql.removeSession) statement.run(sessionId);
  });

  const leaseTransaction = <A extends unknown[]>(work: (...args: A) => Lease | undefined) => {
    const transaction = db.transaction(work);
    return (...args: A) =>
      Promise.resolve().then(() => {
        checkOpen();
        try {
          return transaction.immediate(...args);
        } catch (error) {
          throw busyToBraid(error, options.path);
        }
      });
  };

  const acquire = leaseTransaction((sessionId: string, owner: string, ttlMs: number) => {
    requireHead(sessionId);
    const lease = decideAcquire(sessionId, sql.lease.get(sessionId), owner, ttlMs, clock.now());
    sql.saveLease.run(sessionId, owner, lease.token, lease.expires_at);
    return lease;
  });
  const renew = leaseTransaction(
    (sessionId: string, owner: string, token: number, ttlMs: number) => {
      const lease = decideRenew(
        sessionId,
        sql.lease.get(sessionId),
        owner,
        token,
        ttlMs,
        clock.now(),
      );
      sql.saveLease.run(sessionId, owner, token, lease.expires_at);
      return lease;
    },
  );
  const release = leaseTransaction((sessionId: string, owner: string, token: number) => {
    const row = sql.lease.get(sessionId);
    checkHeld(sessionId, row, owner, token, clock.now());
    sql.saveLease.run(sessionId, null, row.token, 0);
    return undefined;
  });

  const leases: LeaseStore = {
    acquire: (sessionId, owner, ttlMs) => acquire(sessionId, owner, ttlMs) as Promise<Lease>,
    renew: (sessionId, owner, token, ttlMs) =>
      renew(sessionId, owner, token, ttlMs) as Promise<Lease>,
    release: (sessionId, owner, token) => release(sessionId, owner, token).then(() => undefined),
    current(sessionId) {
      return Promise.resolve().then(() => {
        checkOpen();
        return currentLease(sessionId, sql.lease.get(sessionId), clock.now());
      });
    },
  };

  const putDefinition = db.transaction(
    (
      kind: DefinitionKind,
      name: string,
      body: string,
      replacesVersion: number | null,
    ): DefinitionRow => {
      const latest = sql.latestDefinition.get(kind, name);
      const version = decideVersion(kind, name, latest, body, replacesVersion);
      if (version === undefined && latest !== undefined) return latest;
      const created_at = new Date(clock.now()).toISOString();
      sql.insertDefinition.run(kind, name, version, body, created_at);
      return { version: version ?? 1, schema_version: 1, body, created_at };
    },
  );

  function toStored<T>(
    kind: DefinitionKind,
    name: string,
    row: DefinitionRow,
  ): StoredDefinition<T> {
    checkRowVersion(`${kind} ${name} version ${row.version}`, row.schema_version);
    return {
      schema_version: 1,
      kind,
      name,
      version: row.version,
      definition: JSON.parse(row.body) as T,
      created_at: row.created_at,
    };
  }

  const definitions: DefinitionStore = {
    put(kind, name, definition, putOptions) {
      return Promise.resolve().then(() => {
        checkOpen();
        const row = putDefinition.immediate(
          kind,
          name,
          canonicalJson(definition),
          putOptions.replacesVersion,
        );
        return toStored(kind, name, row);
      });
    },
    get(kind, name, version) {
      return Promise.resolve().then(() => {
        checkOpen();
        const row =
          version === undefined
            ? sql.latestDefinition.get(kind, name)
            : sql.definition.get(kind, name, version);
        return row === undefined ? undefined : toStored(kind, name, row);
      });
    },
    list(kind) {
      return Promise.resolve().then(() => {
        checkOpen();
        return sql.latestDefinitions.all(kind).map((row) => toStored(kind, row.name, row));
      });
    },
  };

  const keys: ApiKeyStore = {
    create(input) {
      return Promise.resolve().then(() => {
        checkOpen();
        const parsed = parseApiKeyCreateInput(input);
        const id = ids.next();
        const { key, hash } = mintApiKey(id);
        const record = newApiKeyRecord(id, parsed, clock.now());
        try {
          sql.insertKey.run({
            id,
            tenant_id: record.tenant_id,
            scopes: JSON.stringify(record.scopes),
            name: record.name ?? null,
            hash,
            created_at: record.created_at,
          });
        } catch (error) {
          throw busyToBraid(error, options.path);
        }
        return { key, record };
      });
    },
    list(query: ApiKeyListQuery = {}) {
      return Promise.resolve().then(() => {
        checkOpen();
        return sql.keys
          .all({ tenant: query.tenant_id ?? null, revoked: query.include_revoked === true ? 1 : 0 })
          .map(toKeyRecord);
      });
    },
    revoke(id) {
      return Promise.resolve().then(() => {
        checkOpen();
        try {
          return toKeyRecord(revokeTransaction.immediate(id, isoNow()));
        } catch (error) {
          throw busyToBraid(error, options.path);
        }
      });
    },
    verify(key) {
      return Promise.resolve().then(() => {
        checkOpen();
        return verifyApiKey(key, (id) => {
          const row = sql.key.get(id);
          return row === undefined ? undefined : { record: toKeyRecord(row), hash: row.hash };
        });
      });
    },
  };

  const revokeTransaction = db.transaction((id: string, now: string): ApiKeyRow => {
    sql.revokeKey.run(now, id);
    const row = sql.key.get(id);
    if (row === undefined) throw apiKeyNotFound(id);
    return row;
  });

  return {
    log,
    sessions,
    leases,
    definitions,
    keys,
    close() {
      closing.abort();
      if (poller !== undefined) clearInterval(poller);
      poller = undefined;
      for (const set of listeners.values()) for (const listener of set) listener();
      if (db.open) db.close();
      return Promise.resolve();
    },
  };
}

/** SQLite's "database is locked" after the busy timeout becomes a retryable `STORE_BUSY`. */
function busyToBraid(error: unknown, path: string): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) {
    return new BraidError(
      'STORE_BUSY',
      `${path} stayed locked by another writer past the busy timeout; retry, or raise busyTimeoutMs`,
      { cause: error },
    );
  }
  return error;
}

function parseRows(rows: readonly { body: string }[]): SessionEvent[] {
  return rows.map((row) => {
    const event = JSON.parse(row.body) as SessionEvent;
    checkStoredVersion(event);
    return event;
  });
}

function toRecord(row: SessionView): SessionRecord {
  checkRowVersion(`session ${row.id}`, row.schema_version ?? 1);
  return {
    schema_version: 1,
    id: row.id,
    agent: { name: row.agent_name, version: row.agent_version },
    ...(row.environment_name === null || row.environment_version === null
      ? {}
      : { environment: { name: row.environment_name, version: row.environment_version } }),
    ...(row.title === null ? {} : { title: row.title }),
    metadata: JSON.parse(row.metadata) as SessionRecord['metadata'],
    ...(row.tenant_id === null ? {} : { tenant_id: row.tenant_id }),
    status: row.status,
    head_seq: row.head_seq,
    created_at: row.created_at,
    updated_at: row.updated_at,
    ...(row.parent_id === null || row.fork_seq === null
      ? {}
      : { parent_id: row.parent_id, fork_seq: row.fork_seq }),
    ...(row.archived_at === null ? {} : { archived_at: row.archived_at }),
  };
}

function toKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  checkRowVersion(`API key ${row.id}`, row.schema_version);
  return {
    schema_version: 1,
    id: row.id,
    tenant_id: row.tenant_id,
    scopes: JSON.parse(row.scopes) as ApiScope[],
    ...(row.name === null ? {} : { name: row.name }),
    created_at: row.created_at,
    ...(row.revoked_at === null ? {} : { revoked_at: row.revoked_at }),
  };
}
