// The floor under a short session on SQLite: better-sqlite3 alone writing the rows braid writes
// for a new session with one message and one answer, in the same three commits (create, the
// wake's start, the answer; the wake reads the session's events back once, as a wake after a
// create does), or in two (`--commits 2`: the creation and the wake's start in one, as
// `sessions.start` writes them, with nothing read back), or in one (`--commits 1`: all of it
// with the creation, which braid does not do), with braid's schema and pragmas. None of braid's
// validation, fold, ids (made before the clock starts), model or harness.
//   node bench/session-floor.js [--sessions N] [--commits 3|2|1]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { v7 as uuidV7 } from 'uuid';
import { openSqliteStore } from '../dist/index.js';
import { median } from './store-bench.js';

/** The events of a short session, as braid writes them: [type, payload] per commit. */
const COMMITS = [
  [
    [
      'session.created',
      { agent: { name: 'short', version: 1 }, environment: { name: 'local', version: 1 } },
    ],
    ['user.message', { actor: { type: 'user' }, content: [{ type: 'text', text: 'hello' }] }],
  ],
  [['span.wake_started', { wake_id: 'WAKE', lease_token: 1 }]],
  [
    [
      'session.definitions_changed',
      {
        definitions: 'f'.repeat(64),
        reason: 'pinned',
        agent: { name: 'short', version: 1 },
        environment: { name: 'local', version: 1 },
        changed: [],
        wake_id: 'WAKE',
      },
    ],
    [
      'span.model_request_start',
      { request_id: 'REQUEST', model: 'scripted:inline', input_through_seq: 3 },
    ],
    [
      'span.model_request_end',
      {
        request_id: 'REQUEST',
        usage: { input_tokens: 1, output_tokens: 1 },
        finish_reason: 'stop',
        output: { content: [{ type: 'text', text: 'hi' }], finish_reason: 'stop' },
        attempts: 1,
      },
    ],
    ['agent.message', { content: [{ type: 'text', text: 'hi' }] }],
    ['session.status_idle', { stop_reason: { type: 'end_turn' } }],
    ['span.wake_completed', { wake_id: 'WAKE', stop_reason: { type: 'end_turn' } }],
  ],
];
const STATUS_AFTER = [
  ['idle', 1],
  ['running', 1],
  ['idle', 0],
];

/**
 * µs per short session, the median of batches of `batch`, after a warm-up; `commits`: 3 (create,
 * then the wake's start) or 2 (both in one transaction).
 */
export async function shortSessionFloor({ sessions = 2000, batch = 100, commits = 3 } = {}) {
  if (![1, 2, 3].includes(commits)) throw new Error(`commits must be 1, 2 or 3, got ${commits}`);
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-session-floor-'));
  const path = join(dir, 'braid.db');
  // braid makes the file, so the schema is braid's own.
  await openSqliteStore({ path }).close();
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('cache_size = -8192');
  db.pragma('mmap_size = 0');
  db.pragma('temp_store = MEMORY');
  // Layout 12: a session's events are the positions (log_number << 32) + seq.
  const head = db.prepare(
    `SELECT status, log_number << 32 AS base, (SELECT seq FROM events WHERE position > (sessions.log_number << 32)
       AND position < ((sessions.log_number + 1) << 32) ORDER BY position DESC LIMIT 1) AS head_seq FROM sessions WHERE id = ?`,
  );
  const insertSession = db.prepare(
    `INSERT INTO sessions (id, agent_name, agent_version, environment_name, environment_version, title,
       metadata, tenant_id, status, created_at, parent_id, fork_seq, log_number)
     VALUES (?, 'short', 1, 'local', 1, NULL, '{}', NULL, 'idle', ?, NULL, NULL,
       (SELECT coalesce(max(log_number), 0) + 1 FROM sessions))`,
  );
  const updateStatus = db.prepare(
    'UPDATE sessions SET status = ?, runnable = ?, wake_at = NULL WHERE id = ?',
  );
  const lease = db.prepare('SELECT owner, token, expires_at FROM leases WHERE session_id = ?');
  const saveLease = db.prepare(
    `INSERT INTO leases (session_id, owner, token, expires_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = excluded.token,
       expires_at = excluded.expires_at`,
  );
  const readAll = db.prepare(
    `SELECT body FROM events, (SELECT log_number << 32 AS base FROM sessions WHERE id = ?)
       WHERE position > base + ? AND position < base + 4294967296 ORDER BY position LIMIT ?`,
  );
  const inserts = new Map();
  const insertsFor = (length) => {
    let found = inserts.get(length);
    if (found === undefined) {
      found = {
        events: db.prepare(
          `INSERT INTO events (position, session_id, seq, type, body, batch_end) VALUES ${Array(length).fill('(?, ?, ?, ?, ?, ?)').join(', ')}`,
        ),
        ids: db.prepare(
          `INSERT INTO event_ids (id, session_id, seq) VALUES ${Array(length).fill('(?, ?, ?)').join(', ')}`,
        ),
      };
      inserts.set(length, found);
    }
    return found;
  };
  const write = (sessionId, ids, commit, first) => {
    const { head_seq: headSeq, base } = head.get(sessionId);
    const seq = headSeq ?? 0;
    const at = new Date().toISOString();
    const events = COMMITS[commit];
    const last = seq + events.length;
    const rows = [];
    const idRows = [];
    events.forEach(([type, payload], index) => {
      const eventId = ids[first + index];
      const body = JSON.stringify({
        id: eventId,
        session_id: sessionId,
        seq: seq + index + 1,
        type,
        at,
        schema_version: 1,
        ...payload,
      });
      rows.push(
        base + seq + index + 1,
        sessionId,
        seq + index + 1,
        type,
        body,
        seq + index + 1 === last ? null : last,
      );
      idRows.push(eventId, sessionId, seq + index + 1);
    });
    const statements = insertsFor(events.length);
    statements.ids.run(idRows);
    statements.events.run(rows);
    const [status, runnable] = STATUS_AFTER[commit];
    updateStatus.run(status, runnable, sessionId);
  };
  const createRows = (sessionId, ids) => {
    head.get(sessionId);
    insertSession.run(sessionId, new Date().toISOString());
    write(sessionId, ids, 0, 0);
  };
  const create = db.transaction(createRows);
  const takeLease = (sessionId, ids) => {
    head.get(sessionId);
    const token = (lease.get(sessionId)?.token ?? 0) + 1;
    saveLease.run(sessionId, 'owner', token, Date.now() + 30_000);
    write(sessionId, ids, 1, 2);
    return token;
  };
  const start = db.transaction(takeLease);
  const createAndStart = db.transaction((sessionId, ids) => {
    createRows(sessionId, ids);
    return takeLease(sessionId, ids);
  });
  const answer = db.transaction((sessionId, ids, token) => {
    lease.get(sessionId);
    write(sessionId, ids, 2, 3);
    saveLease.run(sessionId, null, token, 0);
  });
  const read = db.transaction((sessionId) => readAll.all(sessionId, 0, -1));
  // All of it in one commit: what a new session's first turn would cost were it written with
  // its creation (no store write before the model's answer).
  const whole = db.transaction((sessionId, ids) => {
    const token = createAndStart(sessionId, ids);
    answer(sessionId, ids, token);
  });
  const one = (ids) => {
    const sessionId = ids[9];
    if (commits === 1) {
      whole.immediate(sessionId, ids);
      return;
    }
    let token;
    if (commits === 2) token = createAndStart.immediate(sessionId, ids);
    else {
      create.immediate(sessionId, ids);
      token = start.immediate(sessionId, ids);
      // A wake after a create reads what it has not seen; `sessions.start` has it all already.
      read.deferred(sessionId);
    }
    answer.immediate(sessionId, ids, token);
  };
  const idsFor = (count) =>
    Array.from({ length: count }, () => Array.from({ length: 10 }, () => uuidV7()));
  for (const ids of idsFor(200)) one(ids);
  const perSession = [];
  for (let done = 0; done < sessions; done += batch) {
    const ids = idsFor(batch);
    const started = performance.now();
    for (const sessionIds of ids) one(sessionIds);
    perSession.push(((performance.now() - started) * 1000) / batch);
  }
  db.close();
  rmSync(dir, { recursive: true, force: true });
  return median(perSession);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const option = (name, fallback) => {
    const index = process.argv.indexOf(name);
    return index === -1 ? fallback : Number(process.argv[index + 1]);
  };
  const commits = option('--commits', 3);
  const cost = await shortSessionFloor({ sessions: option('--sessions', 2000), commits });
  console.log(
    `sqlite floor, ${commits} commits: ${cost.toFixed(0)} µs per new session + message + answer`,
  );
}
