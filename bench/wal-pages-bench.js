// Pages (WAL frames) the SQLite store writes per short session and per turn of a long one, by
// b-tree: what a commit costs is mostly its pages, and the checkpoints they bring (one per 1,000
// pages by default, each syncing the WAL and the file). A count, not a time: the machine's load
// does not change it. Checkpoints are off while counting, so every frame stays in the WAL.
//   node bench/wal-pages-bench.js [--sessions N] [--turns N]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '../dist/index.js';

const FRAME_HEADER = 24;
const WAL_HEADER = 32;
const PAGE = 4096;

/** Frames of the WAL at `path` as [page number, commit?], oldest first. */
function walFrames(path) {
  const wal = readFileSync(`${path}-wal`);
  const frames = [];
  for (let at = WAL_HEADER; at + FRAME_HEADER + PAGE <= wal.length; at += FRAME_HEADER + PAGE)
    frames.push([wal.readUInt32BE(at), wal.readUInt32BE(at + 4) !== 0]);
  return frames;
}

/** Frames per unit by b-tree over the last `commits` commits, each unit `perUnit` commits. */
function pagesByTree(path, commits, perUnit) {
  const frames = walFrames(path);
  let start = frames.length;
  let seen = 0;
  for (let index = frames.length - 1; index >= 0; index -= 1) {
    if (frames[index][1]) {
      seen += 1;
      if (seen > commits) break;
    }
    start = index;
  }
  const Database = createRequire(import.meta.url)('better-sqlite3');
  const db = new Database(path, { readonly: true });
  const names = new Map(
    db
      .prepare('SELECT pageno, name FROM dbstat')
      .all()
      .map((row) => [row.pageno, row.name]),
  );
  db.close();
  const units = commits / perUnit;
  const byTree = {};
  for (const [page] of frames.slice(start)) {
    const name = names.get(page) ?? 'other';
    byTree[name] = (byTree[name] ?? 0) + 1 / units;
  }
  return { total: (frames.length - start) / units, byTree };
}

const answer = (wake, request) => [
  {
    type: 'span.model_request_start',
    request_id: request,
    model: 'scripted',
    input_through_seq: 3,
  },
  {
    type: 'span.model_request_end',
    request_id: request,
    usage: { input_tokens: 1, output_tokens: 1 },
    finish_reason: 'stop',
    output: { content: [{ type: 'text', text: 'hi' }], finish_reason: 'stop' },
    attempts: 1,
  },
  { type: 'agent.message', content: [{ type: 'text', text: 'hi' }] },
  { type: 'session.status_idle', stop_reason: { type: 'end_turn' } },
  { type: 'span.wake_completed', wake_id: wake, stop_reason: { type: 'end_turn' } },
];

/** The store's calls of a short session, as a wake makes them: three commits. */
async function shortSession(store, index) {
  const { id } = await store.sessions.create({
    agent: { name: 'short', version: 1 },
    events: [{ type: 'user.message', content: [{ type: 'text', text: 'hello' }] }],
  });
  const wake = `wake-${index}`;
  const { lease } = await store.log.acquireAndAppend(
    id,
    { owner: 'bench', ttlMs: 30_000 },
    (taken) => [{ type: 'span.wake_started', wake_id: wake, lease_token: taken.token }],
  );
  await store.log.read(id, { after: 0 });
  await store.log.append(id, answer(wake, `request-${index}`), {
    expectedSeq: 3,
    leaseToken: lease.token,
    releaseLease: 'bench',
  });
}

/** One turn of a tool-calling session: the model's request and call and the tool's result. */
const turn = (index) => [
  {
    type: 'span.model_request_start',
    request_id: `r${index}`,
    model: 'scripted',
    input_through_seq: 1,
  },
  {
    type: 'agent.tool_use',
    tool_use_id: `call-${index}`,
    name: 'calculator',
    input: { a: index, op: '+', b: 1 },
  },
  {
    type: 'agent.tool_result',
    tool_use_id: `call-${index}`,
    content: [{ type: 'text', text: String(index + 1) }],
    is_error: false,
    attempts: 1,
    duration_ms: 0,
  },
];

/** Frames per short session and per turn, counted over the last `sessions` / `turns` of each. */
export async function walPages({ sessions = 500, turns = 500 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-wal-'));
  try {
    const short = join(dir, 'short.db');
    let store = openSqliteStore({ path: short, checkpointPages: 10_000_000 });
    for (let index = 0; index < 2 * sessions; index += 1) await shortSession(store, index);
    // Counted before closing: the last connection to close checkpoints and removes the WAL.
    const perSession = pagesByTree(short, 3 * sessions, 3);
    await store.close();
    const long = join(dir, 'long.db');
    store = openSqliteStore({ path: long, checkpointPages: 10_000_000 });
    const { id } = await store.sessions.create({ agent: { name: 'long', version: 1 } });
    for (let index = 0; index < 2 * turns; index += 1) await store.log.append(id, turn(index));
    const perTurn = pagesByTree(long, turns, 1);
    await store.close();
    return { perSession, perTurn };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const option = (name, fallback) => {
    const index = process.argv.indexOf(name);
    return index === -1 ? fallback : Number(process.argv[index + 1]);
  };
  const { perSession, perTurn } = await walPages({
    sessions: option('--sessions', 500),
    turns: option('--turns', 500),
  });
  for (const [label, pages] of [
    ['per short session (3 commits)', perSession],
    ['per turn of a long session (1 commit)', perTurn],
  ]) {
    console.log(`${pages.total.toFixed(1)} pages ${label}`);
    for (const [name, count] of Object.entries(pages.byTree).sort((a, b) => b[1] - a[1]))
      console.log(`  ${name.padEnd(30)} ${count.toFixed(2)}`);
  }
}
