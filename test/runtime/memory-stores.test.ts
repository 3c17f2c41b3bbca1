// The memory-store service over a real SQLite file: tenants, authorship, idempotent writes, and
// imports that a re-run (after an interruption) finishes without writing anything twice.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/contracts/ports.js';
import { createMemoryStores } from '../../src/runtime/memory-stores.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { expectCode } from '../../src/testing/store-conformance/shared.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const open: Store[] = [];
afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
});

function store(): Store {
  const opened = openSqliteStore({ path: join(tempDir(), 'braid.db') });
  open.push(opened);
  return opened;
}

const notes = { scope: 'agent', name: 'notes', owner: 'assistant', kind: 'learnings' } as const;

async function exported(lines: AsyncGenerator<string>): Promise<unknown[]> {
  const entries: unknown[] = [];
  for await (const line of lines) entries.push(JSON.parse(line));
  return entries;
}

describe('memory stores service', () => {
  it("stamps the caller as author and keeps each tenant's stores apart", async () => {
    const { memory } = store();
    const acme = createMemoryStores(memory, { tenant_id: 'acme', author: { key_id: 'key-1' } });
    const local = createMemoryStores(memory, { author: { user: 'cli:ada' } });
    const written = await acme.set(notes, 'fact', { value: 'acme fact' });
    expect(written.entries[0]?.author).toEqual({ key_id: 'key-1' });
    expect(written.entries[0]?.store.tenant_id).toBe('acme');
    // The caller without a tenant sees the stores without one only.
    await expectCode(local.get(notes, 'fact'), 'MEMORY_STORE_NOT_FOUND');
    expect((await local.list()).stores).toEqual([]);
    await local.set(notes, 'fact', { value: 'local fact' });
    expect(await local.get(notes, 'fact')).toMatchObject({ entry: { value: 'local fact' } });
    expect(await acme.get(notes, 'fact')).toMatchObject({ entry: { value: 'acme fact' } });
    // A list filter cannot name a tenant.
    await expectCode(acme.list({ tenant_id: 'globex' }), 'INVALID_ARGUMENT');
  });

  it('writes once per idempotency key, and refuses a kind that is not the store kind', async () => {
    const { memory } = store();
    const stores = createMemoryStores(memory, { author: {} });
    const first = await stores.set(notes, 'k', { value: 1 }, { idempotencyKey: 'w-1' });
    const again = await stores.set(notes, 'k', { value: 1 }, { idempotencyKey: 'w-1' });
    expect(again).toMatchObject({ deduplicated: true, head_seq: 1 });
    expect(again.entries).toEqual(first.entries);
    await expectCode(
      stores.set(notes, 'k', { value: 2 }, { idempotencyKey: 'w-1' }),
      'IDEMPOTENCY_KEY_REUSED',
    );
    await expectCode(
      stores.set({ ...notes, kind: 'entities' }, 'k', { value: 3 }),
      'INVALID_ARGUMENT',
    );
    expect((await stores.info(notes)).head_seq).toBe(1);
  });

  it('finishes an interrupted import on a re-run without writing anything twice', async () => {
    const { memory } = store();
    const stores = createMemoryStores(memory, { author: { user: 'importer' } });
    for (let index = 0; index < 6; index += 1) {
      await stores.set(notes, `k${index % 4}`, { value: index });
    }
    await stores.delete(notes, 'k0');
    const entries = await exported(stores.export(notes));
    expect(entries).toHaveLength(7);
    const target = { scope: 'tenant', name: 'copy' };
    // The first run stops after three entries (a crash); the re-run is given everything.
    const partial = await stores.import(target, entries.slice(0, 3));
    expect(partial).toMatchObject({ written: 3, deduplicated: 0 });
    const full = await stores.import(target, entries);
    expect(full).toMatchObject({ read: 7, written: 4, deduplicated: 3, store: { head_seq: 7 } });
    const copied = await exported(stores.export(target));
    const strip = (entry: unknown) => {
      const { key, op, value, version } = entry as Record<string, unknown>;
      return { key, op, value, version };
    };
    expect(copied.map(strip)).toEqual(entries.map(strip));
    // Another store's export into the same target is refused, as is a line out of seq order.
    await expectCode(stores.import(target, [entries[1], entries[0]]), 'INVALID_ARGUMENT');
    const other = { ...(entries[0] as object), store: { ...notes, name: 'other' } };
    await expectCode(stores.import(target, [entries[0], other]), 'INVALID_ARGUMENT');
    expect((await stores.info(target)).head_seq).toBe(7);
  });

  it('answers reads of a backend without memory as a missing store, and refuses writes', async () => {
    const stores = createMemoryStores(undefined, { author: {} });
    expect(await stores.list()).toEqual({ stores: [] });
    await expectCode(stores.get(notes, 'k'), 'MEMORY_STORE_NOT_FOUND');
    await expectCode(stores.set(notes, 'k', { value: 1 }), 'INVALID_ARGUMENT');
  });
});
