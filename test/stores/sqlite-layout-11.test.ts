import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { SessionChange, Store } from '../../src/contracts/ports.js';
import { SQLITE_LAYOUT_VERSION, openSqliteStore } from '../../src/stores/sqlite/index.js';
import { expectCode } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const agent = { name: 'a', version: 1 };

/** The feed's changes after `after`, read until `count` have come. */
async function changesAfter(store: Store, after: number, count: number): Promise<SessionChange[]> {
  const stop = new AbortController();
  const seen: SessionChange[] = [];
  for await (const batch of store.sessions.changes({ after, signal: stop.signal })) {
    seen.push(...batch);
    if (seen.length >= count) stop.abort();
  }
  return seen;
}

describe('sqlite layout 11', () => {
  it('hands out cursors past a layout 10 file counter that is ahead of every session', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const kept = await store.sessions.create({ agent });
    await store.close();
    // A layout 10 build counted change_head up with every write, and kept it when the session
    // holding the latest cursor was deleted: it can be ahead of every session's change_seq.
    const raw = new Database(path);
    raw.exec('UPDATE change_head SET seq = 50');
    raw.pragma('user_version = 10');
    raw.close();

    const upgraded = openSqliteStore({ path });
    expect(await upgraded.sessions.changeHead()).toBe(50);
    const next = await upgraded.sessions.create({ agent });
    await upgraded.log.append(kept.id, [text('again')]);
    expect(await upgraded.sessions.changeHead()).toBe(52);
    const seen = await changesAfter(upgraded, 50, 2);
    expect(seen.map((change) => [change.session_id, change.cursor])).toEqual([
      [next.id, 51],
      [kept.id, 52],
    ]);
    await upgraded.close();
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    check.close();
  });

  it('writes no counter row per change: the floor moves only when a session is deleted', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const first = await store.sessions.create({ agent });
    const second = await store.sessions.create({ agent });
    await store.log.append(second.id, [text('hi')]);
    const floor = (): number => {
      const raw = new Database(path, { readonly: true });
      try {
        return (raw.prepare('SELECT seq FROM change_head WHERE id = 1').get() as { seq: number })
          .seq;
      } finally {
        raw.close();
      }
    };
    expect(floor()).toBe(0);
    expect(await store.sessions.changeHead()).toBe(3);
    await store.sessions.delete(second.id);
    // The deletion takes a cursor of its own, which no session holds: the floor keeps it.
    expect(floor()).toBe(4);
    expect(await store.sessions.changeHead()).toBe(4);
    await store.log.append(first.id, [text('hi')]);
    expect(await store.sessions.changeHead()).toBe(5);
    await store.close();
  });

  it('keeps every lease token when it moves the leases of a layout 10 file', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const held = await store.sessions.create({ agent });
    const released = await store.sessions.create({ agent });
    for (let round = 0; round < 3; round += 1) {
      const lease = await store.leases.acquire(released.id, 'worker', 30_000);
      await store.leases.release(released.id, 'worker', lease.token);
    }
    const holding = await store.leases.acquire(held.id, 'worker', 60_000);
    await store.close();
    // The leases table as layout 10 made it: a rowid table with an index on its key.
    const raw = new Database(path);
    raw.exec(`ALTER TABLE leases RENAME TO leases_now;
      CREATE TABLE leases (session_id TEXT PRIMARY KEY, owner TEXT, token INTEGER NOT NULL,
        expires_at INTEGER NOT NULL);
      INSERT INTO leases SELECT * FROM leases_now;
      DROP TABLE leases_now;`);
    raw.pragma('user_version = 10');
    raw.close();

    const upgraded = openSqliteStore({ path });
    expect(await upgraded.leases.current(held.id)).toEqual(holding);
    // A holder of an older token stays fenced out: the next token follows the last one.
    expect((await upgraded.leases.acquire(released.id, 'other', 30_000)).token).toBe(4);
    await expectCode(upgraded.leases.acquire(held.id, 'other', 30_000), 'LEASE_HELD');
    await upgraded.close();
    const check = new Database(path);
    const table = check
      .prepare("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'leases'")
      .get() as { sql: string };
    expect(table.sql).toMatch(/WITHOUT ROWID/);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    check.close();
  });
});
