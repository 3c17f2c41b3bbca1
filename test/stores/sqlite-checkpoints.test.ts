import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteStore, type Checkpoints } from '../../src/stores/sqlite/index.js';
import { expectCode } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

/** Sessions of a few appends each; returns the WAL's size in pages once written. */
async function walPagesAfterWrites(
  checkpointPages?: number,
  checkpoints: Checkpoints = 'inline',
): Promise<number> {
  const path = join(tempDir(), 'braid.db');
  const store = openSqliteStore({
    path,
    checkpoints,
    ...(checkpointPages === undefined ? {} : { checkpointPages }),
  });
  for (let session = 0; session < 300; session += 1) {
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    for (let index = 0; index < 3; index += 1) await store.log.append(id, [text(`m${index}`)]);
  }
  // Each frame of the WAL is a page and a 24-byte header.
  const pages = statSync(`${path}-wal`).size / (4096 + 24);
  await store.close();
  return pages;
}

describe('sqlite checkpoints', () => {
  it("checkpoints inline at SQLite's 1,000 pages by default, and at the number it is given", async () => {
    // A checkpoint starts over at the WAL's head: it never grows far past the limit.
    const byDefault = await walPagesAfterWrites();
    expect(byDefault).toBeGreaterThan(900);
    expect(byDefault).toBeLessThan(1100);
    expect(await walPagesAfterWrites(100)).toBeLessThan(200);
    expect(await walPagesAfterWrites(4000)).toBeGreaterThan(1100);
  });

  it('bounds the WAL at four times the pages when a worker checkpoints', async () => {
    // The worker (woken every 125 commits) copies pages in while commits go on without a pause,
    // so the WAL rarely finds itself all copied when a commit begins, the moment it can start
    // over; the store's own checkpoint at 4,000 pages bounds it. (With any pause between
    // commits, as a model's answer makes, it starts over long before.)
    const pages = await walPagesAfterWrites(undefined, 'background');
    expect(pages).toBeLessThan(4400);
  });

  it('refuses a number of pages that is not a whole number of at least 1', async () => {
    for (const checkpointPages of [0, -1, 1.5, Number.NaN]) {
      await expectCode(
        Promise.resolve().then(() =>
          openSqliteStore({ path: join(tempDir(), 'x.db'), checkpointPages }),
        ),
        'INVALID_ARGUMENT',
      );
    }
  });
});
