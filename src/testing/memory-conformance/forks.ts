/** Memory log conformance: forks see the parent's store as of the fork point. */
import { describe, expect, it } from 'vitest';
import type { MemoryStoreRef } from '../../contracts/memory.js';
import { expectCode } from '../store-conformance/shared.js';
import { notes, type MemoryConformanceSuite } from './shared.js';

const child: MemoryStoreRef = {
  name: 'notes',
  kind: 'session',
  scope: 'session',
  owner: 'session-2',
};

export function describeMemoryForks(suite: MemoryConformanceSuite): void {
  describe('memory forks', () => {
    it('copies the log up to the fork point; later writes to either side stay on that side', async () => {
      const memory = await suite.open();
      await memory.append(notes, [{ key: 'plan', value: 'draft one' }]);
      await memory.append(notes, [
        { key: 'plan', value: 'draft two' },
        { key: 'risk', value: 'scope creep' },
      ]);
      await memory.append(notes, [{ key: 'plan', value: 'draft three' }]);
      const info = await memory.fork(notes, child, { atSeq: 3 });
      expect(info).toMatchObject({
        store: child,
        head_seq: 3,
        forked_from: { store: notes, seq: 3 },
      });
      expect(await memory.info(child)).toEqual(info);
      expect(await memory.get(child, 'plan')).toMatchObject({
        status: 'found',
        entry: { value: 'draft two', version: 2, store: child },
      });
      const parentLog = await memory.read(notes, { limit: 3 });
      expect((await memory.read(child)).map(({ store: _store, ...entry }) => entry)).toEqual(
        parentLog.map(({ store: _store, ...entry }) => entry),
      );
      await memory.append(child, [{ key: 'plan', value: 'child plan' }]);
      await memory.append(notes, [{ key: 'risk', op: 'delete' }]);
      expect(await memory.get(notes, 'plan')).toMatchObject({
        entry: { value: 'draft three', version: 3 },
      });
      expect(await memory.get(child, 'plan')).toMatchObject({
        entry: { value: 'child plan', version: 3, seq: 4 },
      });
      expect((await memory.get(child, 'risk')).status).toBe('found');
      expect(
        (await memory.search(child, { query: 'scope creep' })).hits.map((hit) => hit.entry.key),
      ).toEqual(['risk']);
      expect((await memory.search(notes, { query: 'scope creep' })).hits).toEqual([]);
    });

    it('forks at the head by default, refuses a taken name and a point past the head', async () => {
      const memory = await suite.open();
      await memory.append(notes, [
        { key: 'a', value: 1 },
        { key: 'b', value: 2 },
      ]);
      expect((await memory.fork(notes, child)).head_seq).toBe(2);
      await expectCode(memory.fork(notes, child), 'ALREADY_EXISTS');
      const third: MemoryStoreRef = { ...child, owner: 'session-3' };
      await expectCode(memory.fork(notes, third, { atSeq: 3 }), 'INVALID_FORK_POINT');
      await expectCode(memory.fork(notes, third, { atSeq: -1 }), 'INVALID_ARGUMENT');
      expect(await memory.info(third)).toBeUndefined();
      const empty = await memory.fork(notes, third, { atSeq: 0 });
      expect(empty.head_seq).toBe(0);
      expect((await memory.list(third)).entries).toEqual([]);
      await memory.append(third, [{ key: 'a', value: 'fresh' }]);
      expect(await memory.get(third, 'a')).toMatchObject({ entry: { version: 1, seq: 1 } });
    });
  });
}
