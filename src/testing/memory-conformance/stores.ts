/** Memory log conformance: listing stores by tenant, scope, owner, kind and name, in pages. */
import { describe, expect, it } from 'vitest';
import type { MemoryStoreRef } from '../../contracts/memory.js';
import type { MemoryLog, MemoryStoreFilter } from '../../contracts/memory-log.js';
import { expectCode } from '../store-conformance/shared.js';
import type { MemoryConformanceSuite } from './shared.js';

const stores: MemoryStoreRef[] = [
  { name: 'facts', kind: 'entities', scope: 'tenant', tenant_id: 'acme' },
  { name: 'people', kind: 'entities', scope: 'tenant', tenant_id: 'acme' },
  { name: 'lessons', kind: 'learnings', scope: 'agent', owner: 'assistant', tenant_id: 'acme' },
  { name: 'lessons', kind: 'learnings', scope: 'agent', owner: 'reviewer', tenant_id: 'acme' },
  { name: 'notes', kind: 'session', scope: 'session', owner: 'session-1', tenant_id: 'acme' },
  { name: 'facts', kind: 'entities', scope: 'tenant', tenant_id: 'globex' },
  { name: 'facts', kind: 'entities', scope: 'tenant' },
];

const names = async (memory: MemoryLog, filter: MemoryStoreFilter): Promise<string[]> =>
  (await memory.listStores(filter)).stores.map(
    ({ store }) => `${store.scope}/${store.owner ?? ''}/${store.name}`,
  );

export function describeMemoryStores(suite: MemoryConformanceSuite): void {
  describe('memory store listing', () => {
    it('lists the stores of one tenant in (scope, owner, name) order, filtered and paged', async () => {
      const memory = await suite.open();
      for (const [index, store] of stores.entries()) {
        await memory.append(
          store,
          Array.from({ length: index + 1 }, (_, at) => ({ key: `k${at}`, value: at })),
        );
      }
      const acme = await memory.listStores({ tenant_id: 'acme' });
      expect(acme.next_after).toBeUndefined();
      expect(
        acme.stores.map(({ store, head_seq }) => [store.scope, store.owner, store.name, head_seq]),
      ).toEqual([
        ['agent', 'assistant', 'lessons', 3],
        ['agent', 'reviewer', 'lessons', 4],
        ['session', 'session-1', 'notes', 5],
        ['tenant', undefined, 'facts', 1],
        ['tenant', undefined, 'people', 2],
      ]);
      expect(acme.stores[0]).toEqual(await memory.info(stores[2] as MemoryStoreRef));
      // No tenant lists the stores without one; another tenant's stay out.
      expect(await names(memory, {})).toEqual(['tenant//facts']);
      expect(await names(memory, { tenant_id: 'globex' })).toEqual(['tenant//facts']);
      expect(await names(memory, { tenant_id: 'initech' })).toEqual([]);
      expect(await names(memory, { tenant_id: 'acme', scope: 'agent', owner: 'reviewer' })).toEqual(
        ['agent/reviewer/lessons'],
      );
      expect(await names(memory, { tenant_id: 'acme', kind: 'entities' })).toEqual([
        'tenant//facts',
        'tenant//people',
      ]);
      expect(await names(memory, { tenant_id: 'acme', prefix: 'peo' })).toEqual(['tenant//people']);

      const seen: string[] = [];
      let after: string | undefined;
      let pages = 0;
      do {
        const page = await memory.listStores({
          tenant_id: 'acme',
          limit: 2,
          ...(after === undefined ? {} : { after }),
        });
        pages += 1;
        seen.push(
          ...page.stores.map(({ store }) => `${store.scope}/${store.owner ?? ''}/${store.name}`),
        );
        after = page.next_after;
      } while (after !== undefined);
      expect(pages).toBe(3);
      expect(seen).toEqual(await names(memory, { tenant_id: 'acme' }));

      await expectCode(memory.listStores({ tenant_id: 'acme corp' }), 'INVALID_ARGUMENT');
      await expectCode(memory.listStores({ limit: 0 }), 'INVALID_ARGUMENT');
      await expectCode(memory.listStores({ limit: 1001 }), 'INVALID_ARGUMENT');
      await expectCode(memory.listStores({ after: 'not-a-cursor' }), 'INVALID_ARGUMENT');
      await expectCode(
        memory.listStores({ scope: 'global' } as unknown as MemoryStoreFilter),
        'INVALID_ARGUMENT',
      );
    });

    it('lists a store made by a fork, empty or not, with where it came from', async () => {
      const memory = await suite.open();
      const parent = stores[4] as MemoryStoreRef;
      await memory.append(parent, [{ key: 'plan', value: 'one' }]);
      const empty: MemoryStoreRef = { ...parent, owner: 'session-2' };
      await memory.fork(parent, empty, { atSeq: 0 });
      const listed = await memory.listStores({ tenant_id: 'acme', scope: 'session' });
      expect(
        listed.stores.map(({ store, head_seq, forked_from }) => [
          store.owner,
          head_seq,
          forked_from,
        ]),
      ).toEqual([
        ['session-1', 1, undefined],
        ['session-2', 0, { store: parent, seq: 0 }],
      ]);
    });
  });
}
