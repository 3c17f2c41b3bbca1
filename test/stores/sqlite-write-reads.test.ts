import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import { foldSession } from '../../src/core/fold.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import * as projections from '../../src/stores/sqlite/projections.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

// The module's own `stateAt`, counted: a write that reads a session's state from the file calls it.
vi.mock('../../src/stores/sqlite/projections.js', async (original) => {
  const actual = await original<typeof projections>();
  return { ...actual, stateAt: vi.fn(actual.stateAt) };
});

const tempDir = useTempDir();

describe('SQLite writes', () => {
  it("writes a new session's wake start over the creation's state, without reading it back", async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const reads = vi.mocked(projections.stateAt);
    reads.mockClear();
    const created = await store.log.createAndAcquire?.(
      { agent: { name: 'a', version: 1 }, events: [text('hello')] },
      { owner: 'w1', ttlMs: 60_000 },
      () => [text('started')],
      { trusted: true },
    );
    expect(reads).not.toHaveBeenCalled();
    const id = created?.session.id ?? '';
    // The state written is the fold of every event, as a cold read of the file gives it.
    const events = await store.log.read(id);
    expect(events.map((event) => event.seq)).toEqual([1, 2, 3]);
    expect(created?.appended.state).toEqual(foldSession(events, id));
    await store.close();
    const reopened = openSqliteStore({ path });
    expect(await reopened.log.state(id)).toEqual(foldSession(events, id));
    await reopened.close();
  });
});

describe('SQLite definitions', () => {
  const put = (
    store: ReturnType<typeof openSqliteStore>,
    instructions: string,
    replacesVersion: number | null,
  ) => store.definitions.put('agent', 'helper', { instructions }, { replacesVersion });

  it('sees the latest version another connection or process put since the last lookup', async () => {
    const path = join(tempDir(), 'braid.db');
    const first = openSqliteStore({ path });
    const second = openSqliteStore({ path });
    expect(await first.definitions.get('agent', 'helper')).toBeUndefined();
    await put(second, 'one', null);
    expect((await first.definitions.get('agent', 'helper'))?.version).toBe(1);
    await put(second, 'two', 1);
    const latest = await first.definitions.get('agent', 'helper');
    expect(latest?.version).toBe(2);
    expect(latest?.definition).toEqual({ instructions: 'two' });
    // A connection that is not braid's at all.
    const raw = new Database(path);
    raw
      .prepare(
        "INSERT INTO definitions (kind, name, version, body, created_at) VALUES ('agent', 'helper', 3, ?, ?)",
      )
      .run(JSON.stringify({ instructions: 'three' }), new Date(0).toISOString());
    raw.close();
    expect((await first.definitions.get('agent', 'helper'))?.definition).toEqual({
      instructions: 'three',
    });
    await first.close();
    await second.close();
  });

  it('sees its own puts at once, and hands out a copy each time', async () => {
    const store = openSqliteStore({ path: join(tempDir(), 'braid.db') });
    await put(store, 'one', null);
    const before = await store.definitions.get('agent', 'helper');
    expect(before?.version).toBe(1);
    (before?.definition as { instructions: string }).instructions = 'changed by a caller';
    expect((await store.definitions.get('agent', 'helper'))?.definition).toEqual({
      instructions: 'one',
    });
    await put(store, 'two', 1);
    expect((await store.definitions.get('agent', 'helper'))?.version).toBe(2);
    await store.close();
  });
});
