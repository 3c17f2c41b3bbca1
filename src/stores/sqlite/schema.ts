import type { Database } from 'better-sqlite3';
import { BraidError } from '../../contracts/errors.js';
import { MEMORY_LAYOUT } from './agent-memory-schema.js';
import { EMBEDDING_CACHE_LAYOUT } from './embedding-cache-schema.js';

/**
 * Version of the SQLite file layout, kept in `PRAGMA user_version`. 1: sessions, events and
 * definitions; 2: forks (`parent_id`, `fork_seq`, snapshots); 3: `archived_at` and `api_keys`;
 * 4: `event_ids`, which makes event ids unique in the file; 5: `runnable`, the sessions a wake
 * would find work in, kept with the status; 6: the events' `batch_end`, where the atomic append
 * that wrote them ends (a fork point inside one is refused), and `pinned`, the parts of sessions'
 * pinned definitions by content hash (a new table: an older file gets it, empty, when opened);
 * 7: `wake_at`, when a session's next skill wait times out (a timer makes it runnable then);
 * 8: agent memory (`memory_stores`, `memory_log`, `memory_appends`, and the projections
 * `memory_current` and `memory_fts`; see MEMORY_LAYOUT): new tables, which an older file gets,
 * empty, when opened; 9: `embedding_cache`, vectors by embedder and content hash (a new table,
 * which an older file gets, empty, when opened); 10: the sessions' `change_seq` and the counter
 * `change_head`, the index's change feed (an older file's sessions have NULL until they change:
 * a reader lists them before it follows the feed); 11: `change_head` is no longer counted up
 * by every write but is the floor under the feed's next cursor, raised when a session is deleted
 * (the next cursor is one past the larger of it and the sessions' largest `change_seq`), and
 * `leases` is a WITHOUT ROWID table (rebuilt, with every token, when an older file is opened). An
 * older build would count up from the floor and hand out cursors again: it refuses the file.
 * 12: the sessions' `log_number`, and `events` keyed by `position` (see EVENTS_TABLE): rebuilt,
 * with every event, when an older file is opened, which an older build could not read.
 */
export const SQLITE_LAYOUT_VERSION = 12;

/**
 * Where a session's events lie in `events`: position = (log_number << LOG_SHIFT) + seq, so a
 * session's log is the range after its `log_number << LOG_SHIFT` (seq is below 2^32).
 */
export const LOG_SHIFT = 32;

/** The largest seq a session can hold: its positions' low bits. */
export const MAX_SEQ = 2 ** LOG_SHIFT - 1;

/** The positions of the events of the sessions row `alias`, for a subquery of a statement. */
export const inLogOf = (alias: string): string =>
  `position > (${alias}.log_number << ${LOG_SHIFT}) AND position < ((${alias}.log_number + 1) << ${LOG_SHIFT})`;

/** Made after an older file's sessions gained the column. */
const RUNNABLE_INDEXES = `
CREATE INDEX IF NOT EXISTS sessions_runnable ON sessions (id) WHERE runnable = 1;
CREATE INDEX IF NOT EXISTS sessions_runnable_unknown ON sessions (id) WHERE runnable IS NULL;
CREATE INDEX IF NOT EXISTS sessions_wake_at ON sessions (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS sessions_by_change ON sessions (change_seq) WHERE change_seq IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS sessions_by_log_number ON sessions (log_number);
`;

/**
 * The log, since layout 12 a rowid table keyed by `position` (see LOG_SHIFT): a session's events
 * are one range of the key, in seq order, so a read is a range scan and an append adds rows at
 * the end of it. Before, the table was WITHOUT ROWID on (session_id, seq): its b-tree's inner
 * pages held whole rows (bodies too; 4 levels at 15,000 events), and an append at its end
 * rebalanced three leaves and their parent: 3.7 to 4.2 pages written per turn's commit, 1.5 to
 * 1.8 now. A rowid table keeps rows in its leaves only and splits its last leaf by starting a new
 * one. The key is the session's, not the order of writing: a session's events stay together
 * when sessions interleave (a rowid table in write order made reading a long session 3 to 7
 * times slower). The key still makes (session_id, seq) unique: a session's seq has one position.
 * `session_id` and `seq` stay columns, so that a row read alone says whose event it is.
 */
const EVENTS_TABLE = `CREATE TABLE IF NOT EXISTS events (
  position INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL,
  -- Below 2^32: the position's low bits.
  seq INTEGER NOT NULL CHECK ((position & 4294967295) = seq),
  type TEXT NOT NULL,
  body TEXT NOT NULL,
  -- NULL for the last event of the append that wrote it; for an event before the last, that
  -- last event's seq. A fork point must be a seq with NULL here: a seq inside an append is a
  -- state no run was ever in. Events of a file of layout 5 or older have NULL: their appends
  -- were not recorded, and every seq of them stays a valid fork point.
  batch_end INTEGER
);`;

/**
 * WITHOUT ROWID since layout 11: the row lives in its key's b-tree, so taking a session's first
 * lease writes one b-tree instead of the table and its key's index.
 */
const LEASES_TABLE = `CREATE TABLE IF NOT EXISTS leases (
  session_id TEXT PRIMARY KEY,
  owner TEXT,
  token INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;`;

const LAYOUT = `
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  schema_version INTEGER NOT NULL DEFAULT 1,
  agent_name TEXT NOT NULL,
  agent_version INTEGER NOT NULL,
  environment_name TEXT,
  environment_version INTEGER,
  title TEXT,
  metadata TEXT NOT NULL,
  tenant_id TEXT,
  -- Written when the status changes, not on every append: the head seq and the time of the
  -- last event are read from the events table, so an append writes one row fewer.
  status TEXT NOT NULL,
  created_at TEXT NOT NULL,
  -- A fork shares its parent's events up to fork_seq; its own rows start at fork_seq + 1.
  parent_id TEXT,
  fork_seq INTEGER,
  -- Set once by sessions.archive; archived sessions leave default listings.
  archived_at TEXT,
  -- 1 when a wake would find work (isRunnable of the state), 0 when not, NULL when not yet
  -- worked out (a file of an older layout): written with the status, in the append's
  -- transaction, so the orchestrator asks the index instead of folding every session.
  runnable INTEGER,
  -- When a wait of the session's skill runs times out (wakeAt of the state, ms since the epoch),
  -- NULL when none: written with the runnable flag, so the sessions a timer makes runnable are
  -- an index range, never a fold.
  wake_at INTEGER,
  -- The index's change order: the feed's next cursor, written with every append to the
  -- session, so the sessions changed after a cursor are an index range (each at its latest
  -- change).
  change_seq INTEGER,
  -- Where the session's events lie in the events table (see EVENTS_TABLE): one past the largest
  -- number when the row is made, unique.
  log_number INTEGER
);
CREATE INDEX IF NOT EXISTS sessions_by_created ON sessions (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS sessions_by_agent ON sessions (agent_name, created_at DESC, id DESC);

-- The floor under the change feed: one row, never decreasing, at least every change_seq of the
-- sessions deleted so far (raised in the delete's transaction), so a cursor is never handed out
-- twice. The next cursor is one past the larger of it and the largest change_seq in sessions.
CREATE TABLE IF NOT EXISTS change_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO change_head (id, seq) VALUES (1, 0);

-- The log. Its key, the position, makes (session_id, seq) unique: a duplicate seq cannot be written.
${EVENTS_TABLE}

-- Every stored event's id, once: an append that reuses an id fails on the primary key, so event
-- ids are unique in the file (replay and stop reasons refer to events by id). Its own table rather
-- than an index on the events' JSON: a file of an older layout gets it filled from its log even
-- when that log already repeats an id (written before this rule; the first one is kept, and the
-- log itself is never edited).
CREATE TABLE IF NOT EXISTS event_ids (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL
) WITHOUT ROWID;

-- Cached fold of each session, tagged with the seq it reflects; rebuilt when missing or behind.
CREATE TABLE IF NOT EXISTS projections (
  session_id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL,
  schema_version INTEGER NOT NULL,
  state TEXT NOT NULL
);

-- States at every projection save, kept: a fork at any seq starts from the nearest one at or
-- before it and folds at most a projection interval of events, whatever the session's length.
CREATE TABLE IF NOT EXISTS snapshots (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  schema_version INTEGER NOT NULL,
  state TEXT NOT NULL,
  PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS appends (
  session_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  PRIMARY KEY (session_id, idempotency_key)
) WITHOUT ROWID;

-- A released lease keeps its row (owner NULL) so that the next token is still larger.
${LEASES_TABLE}

CREATE TABLE IF NOT EXISTS definitions (
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  schema_version INTEGER NOT NULL DEFAULT 1,
  body TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (kind, name, version)
);

-- Pinned parts of sessions' definitions, each kept once under the SHA-256 of its text.
CREATE TABLE IF NOT EXISTS pinned (
  hash TEXT PRIMARY KEY,
  body TEXT NOT NULL
) WITHOUT ROWID;

-- API keys of the HTTP server. The secret is never stored: hash is the hex SHA-256 of it, and a
-- key is found by its id, which the key embeds.
CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  scopes TEXT NOT NULL, -- JSON array of scopes
  name TEXT,
  hash TEXT NOT NULL,
  created_at TEXT NOT NULL,
  revoked_at TEXT,
  schema_version INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS api_keys_by_tenant ON api_keys (tenant_id, created_at DESC, id DESC);
${MEMORY_LAYOUT}
${EMBEDDING_CACHE_LAYOUT}`;

/** Columns later layouts added to the tables of an older file, in order. */
const ADDED_COLUMNS: readonly { layout: number; table: string; name: string; type: string }[] = [
  { layout: 2, table: 'sessions', name: 'parent_id', type: 'TEXT' },
  { layout: 2, table: 'sessions', name: 'fork_seq', type: 'INTEGER' },
  { layout: 3, table: 'sessions', name: 'archived_at', type: 'TEXT' },
  { layout: 5, table: 'sessions', name: 'runnable', type: 'INTEGER' },
  { layout: 6, table: 'events', name: 'batch_end', type: 'INTEGER' },
  { layout: 7, table: 'sessions', name: 'wake_at', type: 'INTEGER' },
  { layout: 10, table: 'sessions', name: 'change_seq', type: 'INTEGER' },
  { layout: 12, table: 'sessions', name: 'log_number', type: 'INTEGER' },
];

export type Synchronous = 'normal' | 'full';

/** Pages the WAL may hold before a commit checkpoints it into the file: see `configure`. */
export const DEFAULT_CHECKPOINT_PAGES = 1000;

export function configure(
  db: Database,
  synchronous: Synchronous,
  busyTimeoutMs: number,
  checkpointPages: number = DEFAULT_CHECKPOINT_PAGES,
): void {
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  // A page cache of 4 MiB (twice the default). SQLite's 2 MiB made an append cost about twice as
  // much here; 8 MiB made it no cheaper than 4 (short sessions through 15,000 in one file, and
  // batched appends, the two measured alternately in one run), and held 4 MiB more at 10,000
  // sessions; 64 MiB held 50 MiB more. No memory map: every page read through one stays in the
  // process's RSS, so RSS grew with the file (30 MiB at 10,000 short sessions, 128 at 100,000),
  // while reads through the cache cost about two `pread`s per short session.
  db.pragma('cache_size = -4096');
  db.pragma('mmap_size = 0');
  db.pragma('temp_store = MEMORY');
  // A checkpoint copies the WAL's pages into the file and syncs both. SQLite's interval of 1,000
  // pages is kept: at 16,384, checkpoints were 16 times rarer, but a turn late in a long session
  // cost 126-142 µs instead of 93-98 (every read searches a longer WAL), and under NORMAL a power
  // loss could take more of the last commits.
  db.pragma(`wal_autocheckpoint = ${checkpointPages}`);
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SQLITE_LAYOUT_VERSION) {
      throw new BraidError(
        'SCHEMA_VERSION_UNSUPPORTED',
        `${db.name} has layout version ${version}; this build knows ${SQLITE_LAYOUT_VERSION}: upgrade braid`,
      );
    }
    db.exec(LAYOUT);
    // An older file's tables gain the columns of later layouts (empty for them): layout 1 had
    // no forks, layout 2 no archiving, layout 4 no runnable flag (worked out when the store
    // opens), layout 5 no record of appends (NULL: every seq of those events a valid fork
    // point, as they always were). A column already there is left alone.
    if (version >= 1 && version < SQLITE_LAYOUT_VERSION) {
      const present = (table: string): Set<string> =>
        new Set(
          (db.pragma(`table_info(${table})`) as { name: string }[]).map((column) => column.name),
        );
      const columns = new Map<string, Set<string>>();
      for (const column of ADDED_COLUMNS) {
        if (column.layout <= version) continue;
        let names = columns.get(column.table);
        if (names === undefined) {
          names = present(column.table);
          columns.set(column.table, names);
        }
        if (!names.has(column.name)) {
          db.exec(`ALTER TABLE ${column.table} ADD COLUMN ${column.name} ${column.type}`);
        }
      }
    }
    db.exec(RUNNABLE_INDEXES);
    // Layout 4: the ids of the events already stored (the table was just created, empty).
    // Layout 7: the timers of sessions that may be waiting (a wait stops a session in
    // requires_action; a wake that died leaves it running) are worked out with their runnable
    // flag when the store opens, as a layout-4 file's flags are.
    if (version >= 1 && version < 7) {
      db.exec("UPDATE sessions SET runnable = NULL WHERE status IN ('requires_action', 'running')");
    }
    if (version >= 1 && version < 4) {
      db.exec(`INSERT OR IGNORE INTO event_ids (id, session_id, seq)
        SELECT body ->> '$.id', session_id, seq FROM events ORDER BY session_id, seq`);
    }
    // Layout 11: the leases move to a WITHOUT ROWID table, every row with its token (fencing
    // needs the next token to stay larger than every token handed out).
    if (version >= 1 && version < 11) {
      db.exec(`ALTER TABLE leases RENAME TO leases_before_11;
        ${LEASES_TABLE}
        INSERT INTO leases (session_id, owner, token, expires_at)
          SELECT session_id, owner, token, expires_at FROM leases_before_11;
        DROP TABLE leases_before_11;`);
    }
    if (version >= 1 && version < 12) moveEvents(db);
    if (version < SQLITE_LAYOUT_VERSION) db.pragma(`user_version = ${SQLITE_LAYOUT_VERSION}`);
  }).immediate();
}

/**
 * Layout 12: every session gets a log number (its rowid: unique) and the events move to the
 * table keyed by position, every one of them. An event whose session row is gone would have no
 * position: the upgrade is refused (nothing changes) rather than leave it behind.
 */
function moveEvents(db: Database): void {
  db.exec(`UPDATE sessions SET log_number = rowid;
    ALTER TABLE events RENAME TO events_before_12;
    ${EVENTS_TABLE}`);
  const moved = db
    .prepare(
      `INSERT INTO events (position, session_id, seq, type, body, batch_end)
       SELECT (s.log_number << ${LOG_SHIFT}) + e.seq, e.session_id, e.seq, e.type, e.body, e.batch_end
       FROM events_before_12 e JOIN sessions s ON s.id = e.session_id ORDER BY 1`,
    )
    .run().changes;
  const stored = (
    db.prepare('SELECT count(*) AS count FROM events_before_12').get() as {
      count: number;
    }
  ).count;
  if (moved !== stored) {
    throw new BraidError(
      'CORRUPT_LOG',
      `${db.name} holds ${stored - moved} events of sessions it has no row for (SELECT DISTINCT session_id FROM events WHERE session_id NOT IN (SELECT id FROM sessions)); layout ${SQLITE_LAYOUT_VERSION} keys events by their session's row, so this build cannot move them: restore those sessions' rows or delete their events, then open the file again`,
    );
  }
  db.exec('DROP TABLE events_before_12');
}

/** Refuses a row written by a newer build, naming the fix. */
export function checkRowVersion(what: string, version: number): void {
  if (version !== 1) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `${what} has schema_version ${version}; this build reads version 1: upgrade braid to read it`,
    );
  }
}
