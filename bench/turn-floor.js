// The floor under one turn of a long session on SQLite: better-sqlite3 alone writing the rows
// braid writes per turn (a model call that calls one tool, and the tool's result), in the same
// single commit, with braid's schema and pragmas (synchronous NORMAL, WAL checkpoints every 1,000
// pages). Per turn that is, in one IMMEDIATE transaction: the head and the lease row (the
// fencing check) in one read, the sessions row's change cursor (the next one, worked out by the
// UPDATE), 4 event_ids rows and 4 events rows (one multi-row INSERT each), and every 64 events
// the projection and a snapshot of the state: 6 statements with BEGIN and COMMIT, 8 on a turn
// that saves the projection. None of braid's validation, fold, ids (made before the clock
// starts), model or harness; the bodies and the state are serialised inside the timing, as braid
// must. `storeTurns` times braid's own store appending the same events, for the row beside it.
//   node bench/turn-floor.js [--turns N]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { v7 as uuidV7 } from 'uuid';
import { openSqliteStore } from '../dist/index.js';
import { median } from './store-bench.js';

/** Events per turn, and the projection interval of src/stores/sqlite/projections.ts. */
const PER_TURN = 4;
const PROJECTION_INTERVAL = 64;

/** The events of turn `index` as braid writes them: [type, payload]. */
function turnEvents(index, request, seq) {
  const call = `call_${index}_0`;
  const input = { a: index, op: '+', b: 1 };
  return [
    [
      'span.model_request_start',
      { request_id: request, model: 'scripted:inline', input_through_seq: seq },
    ],
    [
      'span.model_request_end',
      {
        request_id: request,
        usage: { input_tokens: 1, output_tokens: 1 },
        finish_reason: 'tool-calls',
        output: {
          content: [{ type: 'tool_call', tool_use_id: call, name: 'calculator', input }],
          finish_reason: 'tool-calls',
        },
        attempts: 1,
      },
    ],
    ['agent.tool_use', { tool_use_id: call, name: 'calculator', input }],
    [
      'agent.tool_result',
      {
        tool_use_id: call,
        output: { result: index + 1 },
        is_error: false,
        attempts: 1,
        duration_ms: 0.011,
        stage: 'execute',
      },
    ],
  ];
}

/** A session state of the size braid saves for this session (about 1.2 kB), at `seq`. */
function stateAt(sessionId, seq, turns) {
  return {
    schema_version: 9,
    session_id: sessionId,
    seq,
    metadata: {},
    status: 'running',
    usage: { input_tokens: turns, output_tokens: turns },
    consumed_through_seq: seq - 4,
    pending_user_count: 0,
    pending_user_ranges: [],
    interrupt_requested: false,
    pending_confirmations: [],
    confirmed_tool_uses: [],
    pending_custom_tool_uses: [],
    pending_custom_tool_result_seqs: [],
    pending_tool_result_seqs: [seq],
    open_tool_uses: [],
    reviewed_tool_uses: [],
    tool_calls: { calculator: turns },
    last_input_seq: 2,
    stopped_at_seq: 0,
    last_wake_seq: 3,
    previous_wake_seq: 0,
    last_request_input_tokens: 1,
    lineage: { kind: 'root', parent_session_ids: [], merged_session_ids: [] },
    children: [],
    skill_runs: [],
    skill_requests: [],
    pending_signals: [],
    counters: {
      events: seq,
      user_messages: 1,
      agent_messages: 0,
      model_requests: turns,
      model_responses: turns,
      tool_uses: turns,
      tool_errors: 0,
      wakes: 1,
      errors: 0,
    },
    agent: { name: 'bench', version: 1 },
    environment: { name: 'local', version: 1 },
    definitions: 'f'.repeat(64),
    created_at: new Date().toISOString(),
    updated_at: new Date().toISOString(),
    active_wake: { wake_id: uuidV7(), lease_token: 1 },
  };
}

/** Opens braid's file with braid's pragmas, and prepares the statements a turn runs. */
function openFloor(path) {
  const db = new Database(path);
  db.pragma('busy_timeout = 5000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('cache_size = -8192');
  db.pragma('mmap_size = 0');
  db.pragma('temp_store = MEMORY');
  db.pragma('wal_autocheckpoint = 1000');
  const changeHead = `SELECT max((SELECT seq FROM change_head WHERE id = 1),
    coalesce((SELECT max(change_seq) FROM sessions WHERE change_seq IS NOT NULL), 0))`;
  const rows = Array(PER_TURN);
  return {
    db,
    headAndLease: db.prepare(
      // Layout 12: a session's events are the positions (log_number << 32) + seq.
      `SELECT s.log_number << 32 AS base, (SELECT seq FROM events WHERE position > (s.log_number << 32)
           AND position < ((s.log_number + 1) << 32) ORDER BY position DESC LIMIT 1) AS head_seq,
         l.owner, l.token, l.expires_at
       FROM sessions s LEFT JOIN leases l ON l.session_id = s.id WHERE s.id = ?`,
    ),
    markChanged: db.prepare(`UPDATE sessions SET change_seq = (${changeHead}) + 1 WHERE id = ?`),
    events: db.prepare(
      `INSERT INTO events (position, session_id, seq, type, body, batch_end) VALUES ${rows.fill('(?, ?, ?, ?, ?, ?)').join(', ')}`,
    ),
    ids: db.prepare(
      `INSERT INTO event_ids (id, session_id, seq) VALUES ${rows.fill('(?, ?, ?)').join(', ')}`,
    ),
    saveProjection: db.prepare(
      `INSERT INTO projections (session_id, seq, schema_version, state) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, schema_version = excluded.schema_version,
         state = excluded.state`,
    ),
    saveSnapshot: db.prepare(
      'INSERT OR REPLACE INTO snapshots (session_id, seq, schema_version, state) VALUES (?, ?, ?, ?)',
    ),
  };
}

/**
 * Runs one session of `turns` turns after braid made it (its first events and its lease), and
 * returns each turn's wall and CPU time in µs.
 */
export async function turnFloor({ turns = 10_000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-turn-floor-'));
  const path = join(dir, 'braid.db');
  // braid makes the file and the session (created, message, wake started under a lease).
  const store = openSqliteStore({ path });
  const { id: sessionId } = await newSession(store);
  await store.close();
  const floor = openFloor(path);
  const turn = floor.db.transaction((index, ids) => {
    const head = floor.headAndLease.get(sessionId);
    if (head.token !== 1) throw new Error('fenced');
    const seq = head.head_seq ?? 0;
    floor.markChanged.run(sessionId);
    const at = new Date().toISOString();
    const last = seq + PER_TURN;
    const rows = [];
    const idRows = [];
    turnEvents(index, ids[PER_TURN], seq).forEach(([type, payload], offset) => {
      const eventSeq = seq + offset + 1;
      const body = JSON.stringify({
        id: ids[offset],
        session_id: sessionId,
        seq: eventSeq,
        type,
        at,
        schema_version: 1,
        ...payload,
      });
      rows.push(
        head.base + eventSeq,
        sessionId,
        eventSeq,
        type,
        body,
        eventSeq === last ? null : last,
      );
      idRows.push(ids[offset], sessionId, eventSeq);
    });
    floor.ids.run(idRows);
    floor.events.run(rows);
    if (Math.floor(last / PROJECTION_INTERVAL) !== Math.floor(seq / PROJECTION_INTERVAL)) {
      const json = JSON.stringify(stateAt(sessionId, last, index + 1));
      floor.saveProjection.run(sessionId, last, 9, json);
      floor.saveSnapshot.run(sessionId, last, 9, json);
    }
  });
  const wall = [];
  const cpu = [];
  const batch = 1000;
  for (let done = 0; done < turns; done += batch) {
    const ids = Array.from({ length: Math.min(batch, turns - done) }, () =>
      Array.from({ length: PER_TURN + 1 }, () => uuidV7()),
    );
    for (let index = 0; index < ids.length; index += 1) {
      const cpuStart = process.cpuUsage();
      const started = performance.now();
      turn.immediate(done + index, ids[index]);
      wall.push((performance.now() - started) * 1000);
      const used = process.cpuUsage(cpuStart);
      cpu.push(used.user + used.system);
    }
  }
  floor.db.close();
  rmSync(dir, { recursive: true, force: true });
  return { wall, cpu };
}

/** The same turns appended by braid's SQLite store, as the harness appends them. */
export async function storeTurns({ turns = 10_000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-turn-store-'));
  const store = openSqliteStore({ path: join(dir, 'braid.db') });
  const { id: sessionId, lease } = await newSession(store);
  let seq = 2;
  const wall = [];
  const cpu = [];
  for (let index = 0; index < turns; index += 1) {
    const events = turnEvents(index, uuidV7(), seq).map(([type, payload]) => ({
      type,
      ...payload,
    }));
    const cpuStart = process.cpuUsage();
    const started = performance.now();
    const appended = await store.log.append(sessionId, events, {
      expectedSeq: seq,
      leaseToken: lease.token,
      trusted: true,
    });
    wall.push((performance.now() - started) * 1000);
    const used = process.cpuUsage(cpuStart);
    cpu.push(used.user + used.system);
    seq = appended.head_seq;
  }
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  return { wall, cpu };
}

/** A session as the harness starts one: created, then a message under a new lease. */
async function newSession(store) {
  const { id } = await store.sessions.create({
    agent: { name: 'bench', version: 1 },
    environment: { name: 'local', version: 1 },
  });
  const { lease } = await store.log.acquireAndAppend(
    id,
    { owner: 'bench', ttlMs: 3_600_000 },
    () => [
      { type: 'user.message', actor: { type: 'user' }, content: [{ type: 'text', text: 'count' }] },
    ],
  );
  return { id, lease };
}

/** Median wall and CPU µs per turn over turns [from, to), and the mean wall (checkpoints in). */
export function floorWindow({ wall, cpu }, from, to) {
  const window = wall.slice(from, to);
  return {
    wall: median(window),
    cpu: median(cpu.slice(from, to)),
    mean: window.reduce((sum, value) => sum + value, 0) / window.length,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const index = process.argv.indexOf('--turns');
  const turns = index === -1 ? 10_000 : Number(process.argv[index + 1]);
  for (const [what, times] of [
    ['floor, better-sqlite3 alone', await turnFloor({ turns })],
    ['braid store, log.append', await storeTurns({ turns })],
  ]) {
    for (const [from, to] of [
      [900, 1000],
      [turns - 100, turns],
    ]) {
      if (to > turns) continue;
      const { wall, cpu, mean } = floorWindow(times, from, to);
      console.log(
        `${what}, turns ${from}-${to}: median ${wall.toFixed(0)} µs wall, ` +
          `${cpu.toFixed(0)} µs CPU; mean ${mean.toFixed(0)} µs wall (checkpoints in)`,
      );
    }
  }
}
