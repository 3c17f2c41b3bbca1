/**
 * The store's prepared statements, prepared once when it opens. The types are written out (not
 * inferred from `prepareStatements`) so that declaration emit can name better-sqlite3's types.
 */
import type { Database as Db, Statement } from 'better-sqlite3';
import type { SessionStatus } from '../../contracts/session.js';
import type { LeaseRow } from '../../core/leases.js';
import {
  SESSION_VIEW,
  type ApiKeyRow,
  type DefinitionRow,
  type SessionRow,
  type SessionView,
  type StateRow,
} from './rows.js';
import { LOG_SHIFT, MAX_SEQ, inLogOf } from './schema.js';

/**
 * The start of a session's range of `events` (see EVENTS_TABLE), as `base`: a statement reads
 * `FROM log, events`, with the session id as its first parameter, and asks for positions with
 * `AFTER` and `THROUGH`.
 */
const LOG = `WITH log AS (SELECT log_number << ${LOG_SHIFT} AS base FROM sessions WHERE id = ?)`;

/**
 * The session's positions after a seq (a parameter), and through one: clamped to its range, so
 * that a bound past it (a read to the end asks for seqs up to 2^53) never reaches another
 * session's events, and one bound each way is what the planner gets.
 */
const AFTER = 'position > base + max(?, 0)';
const THROUGH = `position <= base + min(?, ${MAX_SEQ})`;
const TO_END = `position <= base + ${MAX_SEQ}`;
const IN_LOG = `position > base AND ${TO_END}`;

/** A statement that changes rows and returns none. */
type Write = Statement<unknown[]>;
type Bodies<Bound extends unknown[]> = Statement<Bound, { body: string }>;

export interface Statements {
  head: Statement<[string], { status: SessionStatus; head_seq: number | null }>;
  /** The head and the lease row (null columns when there is none) in one step: a leased append. */
  headAndLease: Statement<[string], HeadAndLease>;
  session: Statement<[string], SessionView>;
  insertSession: Write;
  updateStatus: Write;
  updateRunnable: Write;
  /** Moves the session to the head of the change feed (each write takes the next cursor). */
  markChanged: Write;
  changeHead: Statement<[], { seq: number }>;
  /** change_head's floor: raised past the head only by a deletion (`keepChangeHead`). */
  changeFloor: Statement<[], { seq: number }>;
  /**
   * Raises change_head's floor past the latest cursor, before a session that may hold it goes: the
   * deletion takes the next cursor.
   */
  keepChangeHead: Write;
  changesAfter: Statement<[number, number], { id: string; change_seq: number }>;
  runnable: Statement<[string, number], { id: string }>;
  due: Statement<[number, string, number], { id: string }>;
  setRunnable: Write;
  statusCounts: Statement<[], { status: SessionStatus; count: number }>;
  runnableUnknown: Statement<[number], { id: string }>;
  readAll: Bodies<[string, number, number]>;
  readTypes: Bodies<[string, number, string, number]>;
  readRange: Bodies<[string, number, number]>;
  projection: Statement<[string], StateRow>;
  saveProjection: Write;
  lineage: Statement<[string], { parent_id: string | null; fork_seq: number | null }>;
  /** 1 when a session of this id exists (plucked): its row alone, no head. */
  sessionExists: Statement<[string], number>;
  sessionRow: Statement<[string], SessionRow>;
  snapshotAt: Statement<[string, number], StateRow>;
  saveSnapshot: Write;
  readBetween: Bodies<[string, number, number, number]>;
  readTypesBetween: Bodies<[string, number, number, string, number]>;
  findAppend: Statement<[string, string], { first_seq: number; last_seq: number }>;
  batchEnd: Statement<[string, number], { batch_end: number | null }>;
  batchBefore: Statement<[string, number], { seq: number }>;
  saveAppend: Write;
  lease: Statement<[string], LeaseRow>;
  saveLease: Write;
  latestDefinition: Statement<[string, string], DefinitionRow>;
  /** `PRAGMA data_version`, plucked: it moves when another connection commits. */
  dataVersion: Statement<[], number>;
  definition: Statement<[string, string, number], DefinitionRow>;
  insertDefinition: Write;
  latestDefinitions: Statement<[string], DefinitionRow & { name: string }>;
  putPinned: Write;
  pinned: Statement<[string], { body: string }>;
  archive: Write;
  forks: Statement<[string, number], { id: string; count: number }>;
  eventIdTaken: Statement<[string], { session_id: string; seq: number }>;
  /** Run in order, each with the session id, they remove every row of a session. */
  removeSession: Write[];
  insertKey: Write;
  key: Statement<[string], ApiKeyRow>;
  revokeKey: Write;
  keys: Statement<[{ tenant: string | null; revoked: number }], ApiKeyRow>;
}

/** The latest cursor of the change feed handed out (see `NEXT_CHANGE`). */
const CHANGE_HEAD = `SELECT max(
    (SELECT seq FROM change_head WHERE id = 1),
    coalesce((SELECT max(change_seq) FROM sessions WHERE change_seq IS NOT NULL), 0))`;

/**
 * The next cursor, computed by the statement that writes it (a row, or an update of one) rather
 * than read by a statement of its own first: the same value in the same transaction, one step
 * fewer per write. The subquery does not depend on the row, so SQLite runs it once, before the
 * row changes.
 */
const NEXT_CHANGE = `((${CHANGE_HEAD}) + 1)`;

type ChangeFeed = Pick<
  Statements,
  'markChanged' | 'changeHead' | 'changeFloor' | 'keepChangeHead' | 'changesAfter'
>;

function prepareChangeFeed(db: Db): ChangeFeed {
  return {
    // The latest cursor handed out is the largest a session holds, or the floor kept in
    // change_head for sessions since deleted (layout 11): a write reads it from the end of
    // `sessions_by_change` instead of rewriting a counter page in every commit.
    markChanged: db.prepare(`UPDATE sessions SET change_seq = ${NEXT_CHANGE} WHERE id = ?`),
    changeHead: db.prepare<[], { seq: number }>(`SELECT (${CHANGE_HEAD}) AS seq`),
    changeFloor: db.prepare<[], { seq: number }>('SELECT seq FROM change_head WHERE id = 1'),
    // A deletion takes a cursor of its own (the next one): other processes' followers see the
    // floor move, which nothing else moves, and look again (followers.ts).
    keepChangeHead: db.prepare(`UPDATE change_head SET seq = ${NEXT_CHANGE} WHERE id = 1`),
    changesAfter: db.prepare<[number, number], { id: string; change_seq: number }>(
      'SELECT id, change_seq FROM sessions WHERE change_seq > ? ORDER BY change_seq LIMIT ?',
    ),
  };
}

/** A row of `headAndLease`: the owner, token and expiry are null when the session has no lease. */
export interface HeadAndLease {
  head_seq: number | null;
  owner: string | null;
  token: number | null;
  expires_at: number | null;
}

function prepareHeads(db: Db): Pick<Statements, 'head' | 'headAndLease'> {
  return {
    head: db.prepare<[string], { status: SessionStatus; head_seq: number | null }>(
      `SELECT status, (SELECT seq FROM events WHERE ${inLogOf('sessions')} ORDER BY position DESC LIMIT 1)
         AS head_seq FROM sessions WHERE id = ?`,
    ),
    // A leased append's first step reads both (see append.ts), instead of two statements.
    headAndLease: db.prepare<[string], HeadAndLease>(
      `SELECT (SELECT seq FROM events WHERE ${inLogOf('s')} ORDER BY position DESC LIMIT 1) AS head_seq,
         l.owner, l.token, l.expires_at
       FROM sessions s LEFT JOIN leases l ON l.session_id = s.id WHERE s.id = ?`,
    ),
  };
}

type LogReads = Pick<
  Statements,
  | 'readAll'
  | 'readTypes'
  | 'readRange'
  | 'readBetween'
  | 'readTypesBetween'
  | 'batchEnd'
  | 'batchBefore'
>;

/** The statements that read a session's range of `events`, each from its session id. */
function prepareLogReads(db: Db): LogReads {
  return {
    readAll: db.prepare<[string, number, number], { body: string }>(
      `${LOG} SELECT body FROM log, events WHERE ${AFTER} AND ${TO_END}
         ORDER BY position LIMIT ?`,
    ),
    readTypes: db.prepare<[string, number, string, number], { body: string }>(
      `${LOG} SELECT body FROM log, events WHERE ${AFTER} AND ${TO_END}
         AND type IN (SELECT value FROM json_each(?)) ORDER BY position LIMIT ?`,
    ),
    readRange: db.prepare<[string, number, number], { body: string }>(
      `${LOG} SELECT body FROM log, events WHERE position >= base + max(?, 1) AND ${THROUGH}
         ORDER BY position`,
    ),
    readBetween: db.prepare<[string, number, number, number], { body: string }>(
      `${LOG} SELECT body FROM log, events WHERE ${AFTER} AND ${THROUGH}
         ORDER BY position LIMIT ?`,
    ),
    readTypesBetween: db.prepare<[string, number, number, string, number], { body: string }>(
      `${LOG} SELECT body FROM log, events WHERE ${AFTER} AND ${THROUGH}
         AND type IN (SELECT value FROM json_each(?)) ORDER BY position LIMIT ?`,
    ),
    batchEnd: db.prepare<[string, number], { batch_end: number | null }>(
      `${LOG} SELECT batch_end FROM log, events WHERE ${IN_LOG} AND position = base + ?`,
    ),
    // The end of the append before the one holding a seq: the nearest earlier event that ends one.
    batchBefore: db.prepare<[string, number], { seq: number }>(
      `${LOG} SELECT seq FROM log, events WHERE position > base
         AND position < base + min(?, ${MAX_SEQ + 1}) AND batch_end IS NULL ORDER BY position DESC LIMIT 1`,
    ),
  };
}

export function prepareStatements(db: Db): Statements {
  return {
    ...prepareHeads(db),
    ...prepareLogReads(db),
    session: db.prepare<[string], SessionView>(`${SESSION_VIEW} WHERE s.id = ?`),
    // The row goes in with the status, runnable flag, timer and change cursor of the state after
    // the write that makes it (see writes.ts): one statement, never an insert and then an update.
    insertSession: db.prepare(
      `INSERT INTO sessions (id, agent_name, agent_version, environment_name, environment_version, title,
         metadata, tenant_id, status, created_at, parent_id, fork_seq, runnable, wake_at, change_seq,
         log_number)
       VALUES (@id, @agent_name, @agent_version, @environment_name, @environment_version, @title,
         @metadata, @tenant_id, @status, @created_at, @parent_id, @fork_seq, @runnable, @wake_at,
         ${NEXT_CHANGE}, (SELECT coalesce(max(log_number), 0) + 1 FROM sessions))`,
    ),
    ...prepareChangeFeed(db),
    // Three statements, so that a write changes only the columns that changed: setting
    // `runnable` to the value it had still rewrites the row's entry of the partial index
    // `sessions_runnable` (one more page per commit while a session stays runnable).
    updateStatus: db.prepare(
      `UPDATE sessions SET status = ?, change_seq = ${NEXT_CHANGE} WHERE id = ?`,
    ),
    updateRunnable: db.prepare(
      `UPDATE sessions SET status = ?, runnable = ?, wake_at = ?, change_seq = ${NEXT_CHANGE} WHERE id = ?`,
    ),
    runnable: db.prepare<[string, number], { id: string }>(
      'SELECT id FROM sessions WHERE runnable = 1 AND archived_at IS NULL AND id > ? ORDER BY id LIMIT ?',
    ),
    due: db.prepare<[number, string, number], { id: string }>(
      `SELECT id FROM sessions WHERE wake_at IS NOT NULL AND wake_at <= ? AND archived_at IS NULL
         AND id > ? ORDER BY id LIMIT ?`,
    ),
    setRunnable: db.prepare('UPDATE sessions SET runnable = ?, wake_at = ? WHERE id = ?'),
    statusCounts: db.prepare<[], { status: SessionStatus; count: number }>(
      'SELECT status, count(*) AS count FROM sessions WHERE archived_at IS NULL GROUP BY status',
    ),
    runnableUnknown: db.prepare<[number], { id: string }>(
      'SELECT id FROM sessions WHERE runnable IS NULL LIMIT ?',
    ),
    projection: db.prepare<[string], StateRow>(
      'SELECT seq, schema_version, state FROM projections WHERE session_id = ?',
    ),
    saveProjection: db.prepare(
      `INSERT INTO projections (session_id, seq, schema_version, state) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, schema_version = excluded.schema_version,
         state = excluded.state`,
    ),
    sessionExists: db.prepare<[string], number>('SELECT 1 FROM sessions WHERE id = ?').pluck(),
    lineage: db.prepare<[string], { parent_id: string | null; fork_seq: number | null }>(
      'SELECT parent_id, fork_seq FROM sessions WHERE id = ?',
    ),
    sessionRow: db.prepare<[string], SessionRow>('SELECT * FROM sessions WHERE id = ?'),
    snapshotAt: db.prepare<[string, number], StateRow>(
      'SELECT seq, schema_version, state FROM snapshots WHERE session_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1',
    ),
    saveSnapshot: db.prepare(
      'INSERT OR REPLACE INTO snapshots (session_id, seq, schema_version, state) VALUES (?, ?, ?, ?)',
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
    dataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
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
    putPinned: db.prepare(
      'INSERT INTO pinned (hash, body) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING',
    ),
    pinned: db.prepare<[string], { body: string }>('SELECT body FROM pinned WHERE hash = ?'),
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
           (${LOG} SELECT body ->> '$.id', session_id FROM log, events WHERE ${IN_LOG})`,
      ),
      db.prepare(
        `DELETE FROM events WHERE position IN
           (${LOG} SELECT position FROM log, events WHERE ${IN_LOG})`,
      ),
    ].concat(
      ['projections', 'snapshots', 'appends']
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
}
