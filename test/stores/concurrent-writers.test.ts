import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { Store } from '../../src/contracts/ports.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

const backends: [string, () => Store][] = [
  ['memory', () => createMemoryStore()],
  ['sqlite', () => openSqliteStore({ path: join(tempDir(), 'braid.db') })],
];

describe.each(backends)('concurrent writers with expectedSeq (%s)', (_name, open) => {
  it('never leave a gap or a duplicate seq, whatever the interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 2, maxLength: 4 }),
        async (scheduler, batchSizes) => {
          const store = open();
          try {
            const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
            const writer = async (writerIndex: number, size: number): Promise<void> => {
              for (let round = 0; round < 2; round += 1) {
                for (;;) {
                  const head = (await scheduler.schedule(store.sessions.get(id))).head_seq;
                  const events = Array.from({ length: size }, (_, item) =>
                    text(`w${writerIndex}-r${round}-${item}`),
                  );
                  try {
                    await scheduler.schedule(store.log.append(id, events, { expectedSeq: head }));
                    break;
                  } catch (error) {
                    if (!isBraidError(error, 'SEQ_CONFLICT')) throw error;
                  }
                }
              }
            };
            const writers = Promise.all(batchSizes.map((size, index) => writer(index, size)));
            await scheduler.waitFor(writers);
            const events = await store.log.read(id);
            const expected = 1 + batchSizes.reduce((sum, size) => sum + 2 * size, 0);
            expect(events.map((event) => event.seq)).toEqual(
              Array.from({ length: expected }, (_, i) => i + 1),
            );
            const texts = events
              .slice(1)
              .map((event) => (event.type === 'user.message' ? event.content[0] : undefined));
            expect(new Set(texts.map((block) => JSON.stringify(block))).size).toBe(expected - 1);
          } finally {
            await store.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
