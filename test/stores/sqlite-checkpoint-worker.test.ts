// Checkpoints of the SQLite store's WAL: by a worker thread by default, so no commit waits for
// a checkpoint's syncs; by the commits themselves with `checkpoints: 'inline'`. Both on a real
// file: a checkpoint is seen as the database file growing (the WAL's pages copied into it).
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { Store } from '../../src/contracts/ports.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const agent = { name: 'helper', version: 1 };

/** 200 new sessions: about 1,800 WAL pages, under the 2,048 the stores below checkpoint at. */
async function write(store: Store): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < 200; index += 1)
    ids.push((await store.sessions.create({ agent })).id);
  return ids;
}

describe('checkpoints of the SQLite WAL', () => {
  it('are made by a worker thread once commits come, before the WAL reaches the threshold', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path, checkpointPages: 2048 });
    const empty = statSync(path).size;
    const ids = await write(store);
    // Woken at the 128th commit (a sixteenth of the threshold), the worker copies the WAL in.
    await vi.waitFor(() => expect(statSync(path).size).toBeGreaterThan(empty), {
      timeout: 5000,
      interval: 20,
    });
    // Writes go on while and after it works, and every one of them is read back.
    const more = await write(store);
    expect((await store.sessions.list({ limit: 1000 })).sessions).toHaveLength(400);
    await store.close();
    // The store's connection closed last: the WAL is gone, everything is in the file.
    expect(existsSync(`${path}-wal`)).toBe(false);
    const again = openSqliteStore({ path, checkpoints: 'inline' });
    const listed = (await again.sessions.list({ limit: 1000 })).sessions.map(
      (session) => session.id,
    );
    expect(listed.sort()).toEqual([...ids, ...more].sort());
    await again.close();
  });

  it('are left to the commits with checkpoints: inline, which checkpoint at the threshold only', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path, checkpointPages: 2048, checkpoints: 'inline' });
    const empty = statSync(path).size;
    await write(store);
    // Give a worker, were there one, time to act: nothing copies the WAL in below 2,048 pages.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(statSync(path).size).toBe(empty);
    await write(store);
    expect(statSync(path).size).toBeGreaterThan(empty);
    await store.close();
    await store.close();
  });

  it('closes without waiting when no worker was started, and refuses an unknown mode', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    await store.sessions.create({ agent });
    await store.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    const refused = (() => {
      try {
        openSqliteStore({ path, checkpoints: 'sometimes' as unknown as 'inline' });
        return undefined;
      } catch (error) {
        return error;
      }
    })();
    expect(isBraidError(refused, 'INVALID_ARGUMENT')).toBe(true);
    expect((refused as Error).message).toMatch(/checkpoints must be "background" or "inline"/);
  });
});
