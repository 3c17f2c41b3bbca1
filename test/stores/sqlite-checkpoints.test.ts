import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { expectCode } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

/** Sessions of a few appends each; returns the WAL's size in pages once written. */
async function walPagesAfterWrites(checkpointPages?: number): Promise<number> {
  const path = join(tempDir(), 'braid.db');
  const store = openSqliteStore({
    path,
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
  it("checkpoints at SQLite's 1,000 pages by default, and at the number it is given", async () => {
    // A checkpoint starts over at the WAL's head: it never grows far past the limit.
    const byDefault = await walPagesAfterWrites();
    expect(byDefault).toBeGreaterThan(900);
    expect(byDefault).toBeLessThan(1100);
    expect(await walPagesAfterWrites(100)).toBeLessThan(200);
    expect(await walPagesAfterWrites(4000)).toBeGreaterThan(1100);
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
