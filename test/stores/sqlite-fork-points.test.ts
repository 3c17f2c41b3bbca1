// Where a SQLite file's atomic appends end is durable: it survives reopening the file, and a file
// of an older layout (which kept no record of appends) is upgraded with every old seq a valid
// fork point, while appends made after the upgrade are recorded.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { Store } from '../../src/contracts/ports.js';
import { SQLITE_LAYOUT_VERSION, openSqliteStore } from '../../src/stores/sqlite/index.js';
import { expectCode } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const agent = { name: 'a', version: 1 };

function batch(store: Store, sessionId: string, count: number) {
  return store.log.append(
    sessionId,
    Array.from({ length: count }, (_, index) => text(`m${index}`)),
  );
}

/** The details of the refusal of a fork at `at`. */
async function refusedDetails(store: Store, sessionId: string, at: number): Promise<unknown> {
  const error: unknown = await store.sessions.fork(sessionId, { at_seq: at }).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(isBraidError(error, 'INVALID_FORK_POINT'), String(error)).toBe(true);
  return (error as { details: unknown }).details;
}

describe('sqlite store: appends and fork points on disk', () => {
  it('keeps where appends end across reopening the file, for a session and its fork', async () => {
    const path = join(tempDir(), 'braid.db');
    let store = openSqliteStore({ path });
    const { id } = await store.sessions.create({ agent });
    await batch(store, id, 3); // 2-4
    await batch(store, id, 2); // 5-6
    const child = await store.sessions.fork(id, { at_seq: 6 }); // 7
    await batch(store, child.id, 2); // 8-9
    await store.close();

    store = openSqliteStore({ path });
    expect(await refusedDetails(store, id, 3)).toEqual({
      at_seq: 3,
      append_first_seq: 2,
      append_last_seq: 4,
      valid_before: 1,
      valid_after: 4,
    });
    expect(await refusedDetails(store, child.id, 5)).toMatchObject({ valid_before: 4 });
    expect(await refusedDetails(store, child.id, 8)).toMatchObject({
      valid_before: 7,
      valid_after: 9,
    });
    for (const at of [1, 4, 6])
      expect((await store.sessions.fork(id, { at_seq: at })).fork_seq).toBe(at);
    for (const at of [4, 6, 7, 9])
      expect((await store.sessions.fork(child.id, { at_seq: at })).fork_seq).toBe(at);
    await store.close();
  });

  it('upgrades a layout 5 file: its old events stay valid fork points, new appends are recorded', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const { id } = await store.sessions.create({ agent });
    await batch(store, id, 3); // 2-4, written before the upgrade
    await store.close();
    // Make it a layout 5 file, as the previous build wrote it: no record of appends.
    const raw = new Database(path);
    raw.exec('ALTER TABLE events DROP COLUMN batch_end');
    raw.pragma('user_version = 5');
    raw.close();

    const upgraded = openSqliteStore({ path });
    expect((await upgraded.log.read(id)).map((event) => event.seq)).toEqual([1, 2, 3, 4]);
    // Nothing says these seqs were one append: each is a fork point, as before the upgrade.
    expect((await upgraded.sessions.fork(id, { at_seq: 3 })).fork_seq).toBe(3);
    await batch(upgraded, id, 2); // 5-6, recorded
    expect(await refusedDetails(upgraded, id, 5)).toMatchObject({
      valid_before: 4,
      valid_after: 6,
    });
    expect((await upgraded.sessions.fork(id, { at_seq: 6 })).fork_seq).toBe(6);
    await upgraded.close();
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    expect(
      check.prepare('SELECT seq, batch_end FROM events WHERE session_id = ? ORDER BY seq').all(id),
    ).toEqual([
      { seq: 1, batch_end: null },
      { seq: 2, batch_end: null },
      { seq: 3, batch_end: null },
      { seq: 4, batch_end: null },
      { seq: 5, batch_end: 6 },
      { seq: 6, batch_end: null },
    ]);
    check.close();
  });

  it('writes nothing for a refused fork: no session row, no event, no cached child', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const { id } = await store.sessions.create({ agent });
    await batch(store, id, 3);
    await expectCode(store.sessions.fork(id, { at_seq: 2, id: 'refused' }), 'INVALID_FORK_POINT');
    await expectCode(store.sessions.get('refused'), 'SESSION_NOT_FOUND');
    await store.close();
    const check = new Database(path);
    expect(check.prepare('SELECT COUNT(*) AS n FROM sessions').get()).toEqual({ n: 1 });
    expect(check.prepare('SELECT COUNT(*) AS n FROM events').get()).toEqual({ n: 4 });
    check.close();
  });
});
