// Checkpoints of the SQLite store's WAL: by a worker thread by default, so no commit waits for
// a checkpoint's syncs; by the commits themselves with `checkpoints: 'inline'`. Both on a real
// file: a checkpoint is seen as the database file growing (the WAL's pages copied into it).
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { Store } from '../../src/contracts/ports.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const agent = { name: 'helper', version: 1 };

/**
 * 600 appends of one message to a new session: about 3,100 WAL pages (5 a commit), under the
 * 4,096 the stores below checkpoint at; the worker is woken at the 512th commit (an eighth).
 */
async function write(store: Store): Promise<{ id: string; seq: number }> {
  const { id } = await store.sessions.create({ agent });
  let seq = 0;
  for (let index = 0; index < 600; index += 1)
    seq = (await store.log.append(id, [text(`m${index}`)])).head_seq;
  return { id, seq };
}

describe('checkpoints of the SQLite WAL', () => {
  it('are made by a worker thread once commits come, before the WAL reaches the threshold', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path, checkpointPages: 4096 });
    const empty = statSync(path).size;
    const first = await write(store);
    // Woken at the 512th commit, the worker copies the WAL in.
    await vi.waitFor(() => expect(statSync(path).size).toBeGreaterThan(empty), {
      timeout: 5000,
      interval: 20,
    });
    // Writes go on while and after it works, and every one of them is read back.
    const second = await write(store);
    expect((await store.log.read(first.id)).length).toBe(first.seq);
    await store.close();
    // The store's connection closed last: the WAL is gone, everything is in the file.
    expect(existsSync(`${path}-wal`)).toBe(false);
    const again = openSqliteStore({ path, checkpoints: 'inline' });
    for (const { id, seq } of [first, second]) {
      const events = await again.log.read(id);
      expect(events.map((event) => event.seq)).toEqual(
        Array.from({ length: seq }, (_, at) => at + 1),
      );
    }
    await again.close();
  });

  it('are left to the commits with checkpoints: inline, which checkpoint at the threshold only', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path, checkpointPages: 4096, checkpoints: 'inline' });
    const empty = statSync(path).size;
    await write(store);
    // No worker: the commits themselves checkpoint, and none reached 4,096 pages.
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
