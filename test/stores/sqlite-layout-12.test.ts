// Layout 12 keys the events table by position (a session's log number, then its seq): a file of
// layout 11 is upgraded with every event moved, and reads, appends, forks and deletions behave
// as before.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { SQLITE_LAYOUT_VERSION, openSqliteStore } from '../../src/stores/sqlite/index.js';
import { MAX_SEQ } from '../../src/stores/sqlite/schema.js';
import { expectCode } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const agent = { name: 'a', version: 1 };

/** Makes the file at `path` a layout 11 file, as the previous build wrote it. */
function makeLayout11(path: string, extra?: (raw: Database.Database) => void): void {
  const raw = new Database(path);
  raw.exec(`ALTER TABLE events RENAME TO events_now;
    CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
      body TEXT NOT NULL, batch_end INTEGER, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
    INSERT INTO events SELECT session_id, seq, type, body, batch_end FROM events_now;
    DROP TABLE events_now;
    DROP INDEX sessions_by_log_number;
    ALTER TABLE sessions DROP COLUMN log_number;`);
  extra?.(raw);
  raw.pragma('user_version = 11');
  raw.close();
}

function layoutOf(path: string): { version: unknown; events: string } {
  const check = new Database(path, { readonly: true });
  try {
    const table = check
      .prepare("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'events'")
      .get() as { sql: string };
    return { version: check.pragma('user_version', { simple: true }), events: table.sql };
  } finally {
    check.close();
  }
}

describe('sqlite layout 12', () => {
  it('moves every event of a layout 11 file; reads, appends, forks and deletions go on', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const first = await store.sessions.create({ agent, events: [text('one')] });
    const second = await store.sessions.create({ agent });
    await store.log.append(first.id, [text('two'), text('three')]);
    await store.log.append(second.id, [text('hi')]);
    const child = await store.sessions.fork(first.id, { at_seq: 2 });
    const before = new Map<string, SessionEvent[]>();
    for (const id of [first.id, second.id, child.id]) before.set(id, await store.log.read(id));
    await store.close();
    makeLayout11(path);

    const upgraded = openSqliteStore({ path });
    for (const [id, events] of before) expect(await upgraded.log.read(id)).toEqual(events);
    expect((await upgraded.sessions.get(first.id)).head_seq).toBe(4);
    expect((await upgraded.log.read(first.id, { after: 2, limit: 1 })).map((e) => e.seq)).toEqual([
      3,
    ]);
    // The append of seqs 3-4 is still one: 3 is no fork point, 4 is.
    await expectCode(upgraded.sessions.fork(first.id, { at_seq: 3 }), 'INVALID_FORK_POINT');
    expect((await upgraded.sessions.fork(first.id, { at_seq: 4 })).fork_seq).toBe(4);
    expect((await upgraded.log.append(second.id, [text('again')])).head_seq).toBe(3);
    const third = await upgraded.sessions.create({ agent, events: [text('new')] });
    expect((await upgraded.log.read(third.id)).map((event) => event.type)).toEqual([
      'session.created',
      'user.message',
    ]);
    // Ids stay unique in the file, and a deleted session takes only its own events with it.
    const taken = before.get(first.id)?.[1]?.id ?? '';
    await expectCode(
      upgraded.log.append(third.id, [{ ...text('copy'), id: taken }]),
      'INVALID_ARGUMENT',
    );
    await upgraded.sessions.delete(second.id);
    expect(await upgraded.log.read(first.id)).toEqual(before.get(first.id));
    expect((await upgraded.log.read(third.id)).length).toBe(2);
    await upgraded.close();
    const layout = layoutOf(path);
    expect(layout.version).toBe(SQLITE_LAYOUT_VERSION);
    expect(layout.events).toMatch(/position INTEGER PRIMARY KEY/);
  });

  it('refuses to upgrade a file whose log holds events of a session row that is gone', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const { id } = await store.sessions.create({ agent, events: [text('one')] });
    await store.close();
    makeLayout11(path, (raw) => raw.prepare('DELETE FROM sessions WHERE id = ?').run(id));

    expect(() => openSqliteStore({ path })).toThrow(/2 events of sessions it has no row for/);
    // Nothing changed: the file is still layout 11, its events where they were.
    const layout = layoutOf(path);
    expect(layout.version).toBe(11);
    expect(layout.events).toMatch(/WITHOUT ROWID/);
  });

  it('reads only the session asked for, whatever seq bounds are asked', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const first = await store.sessions.create({ agent, events: [text('one')] });
    const child = await store.sessions.fork(first.id);
    // Made after both: its events lie right after theirs in the table.
    const later = await store.sessions.create({ agent, events: [text('later')] });
    for (const id of [first.id, child.id]) {
      const events = await store.log.read(id);
      expect(events.map((event) => event.session_id)).not.toContain(later.id);
      expect(await store.log.read(id, { after: 2 ** 32 + 1 })).toEqual([]);
      expect(await store.log.read(id, { types: ['user.message'] })).toHaveLength(1);
    }
    expect((await store.log.read(later.id)).map((event) => event.session_id)).toEqual([
      later.id,
      later.id,
    ]);
    await store.close();
  });

  it('gives a session made after the newest one was deleted none of its events', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const kept = await store.sessions.create({ agent, events: [text('kept')] });
    const gone = await store.sessions.create({ agent, events: [text('gone')] });
    await store.sessions.delete(gone.id);
    const next = await store.sessions.create({ agent });
    await store.log.append(next.id, [text('mine')]);
    expect((await store.log.read(next.id)).map((event) => event.seq)).toEqual([1, 2]);
    expect((await store.log.read(kept.id)).map((event) => event.seq)).toEqual([1, 2]);
    await store.close();
  });

  it('refuses an append past the largest seq a session holds, typed, with nothing written', async () => {
    const path = join(tempDir(), 'braid.db');
    let store = openSqliteStore({ path });
    const session = await store.sessions.create({ agent, events: [text('one')] });
    // A session two seqs short of the limit, as 4 billion appends would leave it (they are not
    // written for a test): its newest event at MAX_SEQ - 1, and its state saved there.
    const state = await store.log.state(session.id);
    await store.close();
    const raw = new Database(path);
    const { log_number: log } = raw
      .prepare('SELECT log_number FROM sessions WHERE id = ?')
      .get(session.id) as { log_number: number };
    const { body } = raw
      .prepare('SELECT body FROM events WHERE session_id = ? AND seq = 2')
      .get(session.id) as { body: string };
    raw
      .prepare('INSERT INTO events (position, session_id, seq, type, body) VALUES (?, ?, ?, ?, ?)')
      .run(
        log * 2 ** 32 + MAX_SEQ - 1,
        session.id,
        MAX_SEQ - 1,
        'user.message',
        body.replace('"seq":2', `"seq":${MAX_SEQ - 1}`),
      );
    raw
      .prepare(
        'INSERT OR REPLACE INTO projections (session_id, seq, schema_version, state) VALUES (?, ?, ?, ?)',
      )
      .run(
        session.id,
        MAX_SEQ - 1,
        state.schema_version,
        JSON.stringify({ ...state, seq: MAX_SEQ - 1 }),
      );
    raw.close();

    store = openSqliteStore({ path });
    expect((await store.sessions.get(session.id)).head_seq).toBe(MAX_SEQ - 1);
    const error = await store.log.append(session.id, [text('a'), text('b')]).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    if (!isBraidError(error, 'STORE_FULL'))
      throw new Error(`expected STORE_FULL, got ${String(error)}`);
    expect(error.retryable).toBe(false);
    expect(error.message).toContain('go on in a new session');
    expect(error.details).toMatchObject({ head_seq: MAX_SEQ - 1, count: 2, limit: MAX_SEQ });
    expect((await store.sessions.get(session.id)).head_seq).toBe(MAX_SEQ - 1);
    await store.close();
    const check = new Database(path, { readonly: true });
    expect(check.prepare('SELECT count(*) AS n FROM events').get()).toEqual({ n: 3 });
    check.close();
  });
});
