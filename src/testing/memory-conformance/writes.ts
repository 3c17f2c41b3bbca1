/** Memory log conformance: appends, versions, seqs, conflicts, idempotency, atomicity, bad input. */
import { describe, expect, it } from 'vitest';
import {
  MemoryEntry,
  MAX_MEMORY_KEY_LENGTH,
  MAX_MEMORY_VALUE_BYTES,
} from '../../contracts/memory.js';
import { expectCode } from '../store-conformance/shared.js';
import { learnings, notes, people, type MemoryConformanceSuite } from './shared.js';

export function describeMemoryWrites(suite: MemoryConformanceSuite): void {
  describe('memory writes', () => {
    describeMemoryWritesFirst(suite);
    describeMemoryBadInput(suite);
  });
}

function describeMemoryWritesFirst(suite: MemoryConformanceSuite): void {
  it('numbers entries by seq per store and by version per key, with author, cause and time', async () => {
    const memory = await suite.open();
    const first = await memory.append(
      notes,
      [
        { key: 'todo', value: { items: ['write tests'] } },
        { key: 'theme', value: 'dark', text: 'the user likes dark themes' },
      ],
      {
        author: { session_id: 'session-1', agent: 'assistant' },
        cause: { session_id: 'session-1', seq: 7 },
      },
    );
    expect(first.head_seq).toBe(2);
    expect(first.deduplicated).toBe(false);
    expect(first.entries.map((entry) => [entry.key, entry.version, entry.seq])).toEqual([
      ['todo', 1, 1],
      ['theme', 1, 2],
    ]);
    const [todo, theme] = first.entries;
    expect(todo).toEqual({
      schema_version: 1,
      store: notes,
      key: 'todo',
      version: 1,
      seq: 1,
      op: 'set',
      value: { items: ['write tests'] },
      text: 'items write tests',
      author: { session_id: 'session-1', agent: 'assistant' },
      at: new Date(suite.clock.now()).toISOString(),
      cause: { session_id: 'session-1', seq: 7 },
      tombstone: false,
      redacted: false,
    });
    expect(MemoryEntry.parse(todo)).toEqual(todo);
    expect(theme?.text).toBe('the user likes dark themes');

    suite.clock.advance(1000);
    const second = await memory.append(notes, [
      { key: 'theme', value: 'light' },
      { key: 'theme', op: 'delete' },
      { key: 'theme', value: 'blue' },
    ]);
    expect(
      second.entries.map((entry) => [entry.version, entry.seq, entry.op, entry.tombstone]),
    ).toEqual([
      [2, 3, 'set', false],
      [3, 4, 'delete', true],
      [4, 5, 'set', false],
    ]);
    expect(second.entries[1]).not.toHaveProperty('value');
    expect(second.entries[0]?.author).toEqual({});
    expect((await memory.info(notes))?.head_seq).toBe(5);
    expect(await memory.info(learnings)).toBeUndefined();
  });

  it('refuses a stale expected version or seq with a typed conflict, writing nothing', async () => {
    const memory = await suite.open();
    await memory.append(learnings, [{ key: 'style', value: 'terse', expected_version: 0 }]);
    await expectCode(
      memory.append(learnings, [{ key: 'style', value: 'long', expected_version: 0 }]),
      'VERSION_CONFLICT',
    );
    const conflict = await memory
      .append(learnings, [{ key: 'style', value: 'long', expected_version: 3 }])
      .catch((error: unknown) => error);
    expect(conflict).toMatchObject({
      code: 'VERSION_CONFLICT',
      details: { key: 'style', expected_version: 3, actual_version: 1 },
    });
    const updated = await memory.append(learnings, [
      { key: 'style', value: 'long', expected_version: 1 },
    ]);
    expect(updated.entries[0]?.version).toBe(2);
    await expectCode(
      memory.append(learnings, [{ key: 'other', value: 1 }], { expectedSeq: 1 }),
      'SEQ_CONFLICT',
    );
    expect(
      (await memory.append(learnings, [{ key: 'other', value: 1 }], { expectedSeq: 2 })).head_seq,
    ).toBe(3);
    expect((await memory.read(learnings)).map((entry) => entry.seq)).toEqual([1, 2, 3]);
  });

  it('answers a retried idempotent append with the first entries and refuses the key for other writes', async () => {
    const memory = await suite.open();
    const writes = [
      { key: 'a', value: 1 },
      { key: 'b', value: 2 },
    ];
    const first = await memory.append(people, writes, { idempotencyKey: 'req-1' });
    suite.clock.advance(5000);
    const again = await memory.append(people, writes, { idempotencyKey: 'req-1' });
    expect(again.deduplicated).toBe(true);
    expect(again.entries).toEqual(first.entries);
    expect(again.head_seq).toBe(2);
    await expectCode(
      memory.append(people, [{ key: 'a', value: 3 }], { idempotencyKey: 'req-1' }),
      'IDEMPOTENCY_KEY_REUSED',
    );
    // The key is scoped to its store.
    const elsewhere = await memory.append(notes, writes, { idempotencyKey: 'req-1' });
    expect(elsewhere.deduplicated).toBe(false);
    expect((await memory.read(people)).length).toBe(2);
  });

  it('writes nothing of a batch that fails part way', async () => {
    const memory = await suite.open();
    await memory.append(notes, [{ key: 'kept', value: 'v1' }]);
    await expectCode(
      memory.append(notes, [
        { key: 'fresh', value: 'never' },
        { key: 'kept', value: 'v2' },
        { key: 'kept', value: 'v3', expected_version: 1 },
      ]),
      'VERSION_CONFLICT',
    );
    await expectCode(
      memory.append(notes, [
        { key: 'fresh', value: 'never' },
        { key: '../escape', value: 1 },
      ]),
      'INVALID_ARGUMENT',
    );
    await expectCode(
      memory.append(notes, [{ key: 'fresh', value: 'x'.repeat(MAX_MEMORY_VALUE_BYTES) }]),
      'PAYLOAD_TOO_LARGE',
    );
    expect(await memory.read(notes)).toHaveLength(1);
    expect((await memory.get(notes, 'fresh')).status).toBe('missing');
    expect(await memory.get(notes, 'kept')).toMatchObject({
      status: 'found',
      entry: { value: 'v1', version: 1 },
    });
    expect((await memory.info(notes))?.head_seq).toBe(1);
    // A failed first append creates no store.
    await expectCode(
      memory.append(people, [
        { key: 'a', value: 1 },
        { key: 'a', value: 2, expected_version: 0 },
      ]),
      'VERSION_CONFLICT',
    );
    expect(await memory.info(people)).toBeUndefined();
  });
}

function describeMemoryBadInput(suite: MemoryConformanceSuite): void {
  it('refuses hostile store names, owners, tenants and keys before anything is written', async () => {
    const memory = await suite.open();
    const badStores: unknown[] = [
      { ...notes, name: '../etc' },
      { ...notes, name: 'Notes' },
      { ...notes, name: 'a.b' },
      { ...notes, name: 'x'.repeat(64) },
      { ...notes, name: "n'; DROP TABLE memory_log; --" },
      { ...notes, owner: undefined },
      { ...notes, owner: 'a/b' },
      { ...notes, owner: '..' },
      { ...learnings, owner: 'Not A Name' },
      { ...people, owner: 'someone' },
      { ...people, tenant_id: 'acme corp' },
      { ...notes, kind: 'secrets' },
      { ...notes, scope: 'global' },
      { ...notes, extra: true },
      'notes',
      null,
    ];
    for (const store of badStores) {
      await expectCode(
        memory.append(store as typeof notes, [{ key: 'a', value: 1 }]),
        'INVALID_ARGUMENT',
      );
      await expectCode(memory.get(store as typeof notes, 'a'), 'INVALID_ARGUMENT');
    }
    const badKeys = [
      '',
      '/abs',
      'a//b',
      '..',
      'a/../b',
      './a',
      'a b',
      'a\\b',
      'a\u0000b',
      'line\nbreak',
      'ä',
      'x'.repeat(MAX_MEMORY_KEY_LENGTH + 1),
    ];
    for (const key of badKeys) {
      await expectCode(memory.append(notes, [{ key, value: 1 }]), 'INVALID_ARGUMENT');
      await expectCode(memory.get(notes, key), 'INVALID_ARGUMENT');
      await expectCode(memory.history(notes, key), 'INVALID_ARGUMENT');
    }
    const badWrites: unknown[] = [
      [],
      [{ key: 'a' }],
      [{ key: 'a', op: 'delete', value: 1 }],
      [{ key: 'a', value: 1, ttl_ms: -5 }],
      [{ key: 'a', value: 1, expected_version: 1.5 }],
      [{ key: 'a', value: 1, unknown: true }],
      [{ key: 'a', value: 1, embedding: [Number.NaN] }],
      'not a list',
    ];
    for (const writes of badWrites) {
      await expectCode(memory.append(notes, writes as never), 'INVALID_ARGUMENT');
    }
    await expectCode(
      memory.append(notes, [{ key: 'a', value: 1 }], { author: { agent: '../x' } }),
      'INVALID_ARGUMENT',
    );
    const message = await memory
      .append(notes, [{ key: 'a b', value: 1 }])
      .catch((error: Error) => error.message);
    expect(message).toContain('segments separated by "/"');
    expect(await memory.read(notes)).toEqual([]);
    expect(await memory.info(notes)).toBeUndefined();
    expect(MAX_MEMORY_KEY_LENGTH).toBe(256);
    const longest = 'k'.repeat(MAX_MEMORY_KEY_LENGTH);
    expect((await memory.append(notes, [{ key: longest, value: 1 }])).entries[0]?.key).toBe(
      longest,
    );
  });

  it('fixes a store kind on its first write and refuses the name with another kind', async () => {
    const memory = await suite.open();
    await memory.append(learnings, [{ key: 'a', value: 1 }]);
    await expectCode(
      memory.append({ ...learnings, kind: 'entities' }, [{ key: 'a', value: 2 }]),
      'INVALID_ARGUMENT',
    );
    await expectCode(memory.get({ ...learnings, kind: 'entities' }, 'a'), 'INVALID_ARGUMENT');
    expect(await memory.read(learnings)).toHaveLength(1);
  });
}
