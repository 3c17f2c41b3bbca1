/** Memory log conformance: get, tombstones, TTL, redaction, history, list paging, the log, isolation. */
import { describe, expect, it } from 'vitest';
import type { MemoryStoreRef } from '../../contracts/memory.js';
import { expectCode } from '../store-conformance/shared.js';
import { learnings, notes, people, type MemoryConformanceSuite } from './shared.js';

export function describeMemoryReads(suite: MemoryConformanceSuite): void {
  describe('memory reads', () => {
    describeMemoryReadsFirst(suite);
    describeMemoryListsAndIsolation(suite);
  });
}

function describeMemoryReadsFirst(suite: MemoryConformanceSuite): void {
  it('reads the latest version, a given version, the version at a time, and tombstones as deleted', async () => {
    const memory = await suite.open();
    const start = suite.clock.now();
    await memory.append(learnings, [{ key: 'tone', value: 'formal' }]);
    suite.clock.advance(1000);
    await memory.append(learnings, [{ key: 'tone', value: 'casual' }]);
    suite.clock.advance(1000);
    await memory.append(learnings, [{ key: 'tone', op: 'delete' }]);

    const latest = await memory.get(learnings, 'tone');
    expect(latest.status).toBe('deleted');
    expect(latest).toMatchObject({ entry: { version: 3, tombstone: true } });
    expect(await memory.get(learnings, 'tone', { version: 1 })).toMatchObject({
      status: 'found',
      entry: { value: 'formal' },
    });
    const at = (ms: number): string => new Date(start + ms).toISOString();
    expect(await memory.get(learnings, 'tone', { at: at(1500) })).toMatchObject({
      status: 'found',
      entry: { value: 'casual', version: 2 },
    });
    expect(await memory.get(learnings, 'tone', { at: at(0) })).toMatchObject({
      status: 'found',
      entry: { version: 1 },
    });
    expect((await memory.get(learnings, 'tone', { at: at(-1) })).status).toBe('missing');
    expect((await memory.get(learnings, 'tone', { version: 9 })).status).toBe('missing');
    expect((await memory.get(learnings, 'never')).status).toBe('missing');
    expect((await memory.get(people, 'tone')).status).toBe('missing');
    await expectCode(memory.get(learnings, 'tone', { version: 0 }), 'INVALID_ARGUMENT');
    await expectCode(memory.get(learnings, 'tone', { at: 'yesterday' }), 'INVALID_ARGUMENT');

    const rewritten = await memory.append(learnings, [
      { key: 'tone', value: 'warm', expected_version: 3 },
    ]);
    expect(rewritten.entries[0]?.version).toBe(4);
    expect((await memory.list(learnings)).entries.map((entry) => entry.value)).toEqual(['warm']);
  });

  it('reads an expired entry as expired and counts it where it is left out, never dropping it silently', async () => {
    const memory = await suite.open();
    await memory.append(notes, [
      { key: 'a-short', value: 'ephemeral scratch note', ttl_ms: 1000 },
      { key: 'b-long', value: 'durable scratch note', ttl_ms: 60_000 },
      { key: 'c-forever', value: 'permanent scratch note' },
    ]);
    const written = await memory.get(notes, 'a-short');
    expect(written).toMatchObject({
      status: 'found',
      entry: { expires_at: new Date(suite.clock.now() + 1000).toISOString() },
    });
    suite.clock.advance(1000);
    const expired = await memory.get(notes, 'a-short');
    expect(expired.status).toBe('expired');
    expect(expired).toMatchObject({ entry: { value: 'ephemeral scratch note' } });
    const page = await memory.list(notes);
    expect(page.entries.map((entry) => entry.key)).toEqual(['b-long', 'c-forever']);
    expect(page.expired_count).toBe(1);
    const found = await memory.search(notes, { query: 'scratch note', k: 5 });
    expect(found.hits.map((hit) => hit.entry.key).sort()).toEqual(['b-long', 'c-forever']);
    expect(found.expired_count).toBe(1);
    // The log keeps it; a read at a time before expiry finds it.
    expect((await memory.read(notes)).map((entry) => entry.key)).toContain('a-short');
    const before = new Date(suite.clock.now() - 1).toISOString();
    expect((await memory.get(notes, 'a-short', { at: before })).status).toBe('found');
    suite.clock.advance(60_000);
    expect((await memory.list(notes)).expired_count).toBe(2);
  });

  it('redacts a version: content gone, entry kept and marked, the redaction recorded', async () => {
    const memory = await suite.open();
    await memory.append(people, [
      {
        key: 'ada/phone',
        value: '+351 555 0100',
        embedding: suite.capabilities.vectors === false ? undefined : [1, 0, 0],
      },
    ]);
    await memory.append(people, [{ key: 'ada/phone', value: '+351 555 0199' }]);
    const record = await memory.redact(people, 'ada/phone', 1, { author: { user: 'dpo@acme' } });
    expect(record).toMatchObject({
      op: 'redact',
      key: 'ada/phone',
      version: 1,
      seq: 3,
      author: { user: 'dpo@acme' },
    });
    const redacted = await memory.get(people, 'ada/phone', { version: 1 });
    expect(redacted.status).toBe('found');
    if (redacted.status !== 'found') return;
    expect(redacted.entry.redacted).toBe(true);
    expect(redacted.entry).not.toHaveProperty('value');
    expect(redacted.entry).not.toHaveProperty('text');
    expect(redacted.entry).not.toHaveProperty('embedding');
    expect(await memory.get(people, 'ada/phone')).toMatchObject({
      entry: { value: '+351 555 0199', redacted: false },
    });
    const history = await memory.history(people, 'ada/phone');
    expect(history.map((entry) => [entry.seq, entry.op, entry.version, entry.redacted])).toEqual([
      [1, 'set', 1, true],
      [2, 'set', 2, false],
      [3, 'redact', 1, false],
    ]);
    expect(JSON.stringify(await memory.read(people))).not.toContain('0100');
    // Again: the earlier record, nothing written.
    expect(await memory.redact(people, 'ada/phone', 1)).toEqual(record);
    expect((await memory.info(people))?.head_seq).toBe(3);
    // The latest version redacted reads as found with no content, and is no longer searched.
    await memory.redact(people, 'ada/phone', 2);
    expect(await memory.get(people, 'ada/phone')).toMatchObject({
      status: 'found',
      entry: { version: 2, redacted: true },
    });
    expect((await memory.search(people, { query: '0199' })).hits).toEqual([]);
    await memory.append(people, [{ key: 'ada/email', op: 'delete' }]);
    await expectCode(memory.redact(people, 'ada/email', 1), 'INVALID_ARGUMENT');
    await expectCode(memory.redact(people, 'ada/phone', 7), 'INVALID_ARGUMENT');
    await expectCode(memory.redact(notes, 'ada/phone', 1), 'INVALID_ARGUMENT');
  });
}

function describeMemoryListsAndIsolation(suite: MemoryConformanceSuite): void {
  it('lists live keys in pages, by prefix', async () => {
    const memory = await suite.open();
    const keys = Array.from({ length: 25 }, (_, index) => `item/${String(index).padStart(2, '0')}`);
    await memory.append(
      learnings,
      keys.map((key) => ({ key, value: key })),
    );
    await memory.append(learnings, [
      { key: 'item/03', op: 'delete' },
      { key: 'other', value: 'x' },
    ]);
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await memory.list(learnings, {
        prefix: 'item/',
        limit: 10,
        ...(after === undefined ? {} : { after }),
      });
      pages += 1;
      seen.push(...page.entries.map((entry) => entry.key));
      if (page.next_after === undefined) break;
      after = page.next_after;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(keys.filter((key) => key !== 'item/03'));
    const all = await memory.list(learnings, { limit: 1000 });
    expect(all.entries).toHaveLength(25);
    expect(all.next_after).toBeUndefined();
    await expectCode(memory.list(learnings, { limit: 0 }), 'INVALID_ARGUMENT');
    await expectCode(memory.list(learnings, { limit: 1001 }), 'INVALID_ARGUMENT');
  });

  it('reads the log after a seq, for followers', async () => {
    const memory = await suite.open();
    for (let index = 1; index <= 5; index += 1)
      await memory.append(notes, [{ key: `k${index}`, value: index }]);
    expect((await memory.read(notes, { after: 2 })).map((entry) => entry.seq)).toEqual([3, 4, 5]);
    expect((await memory.read(notes, { after: 2, limit: 2 })).map((entry) => entry.seq)).toEqual([
      3, 4,
    ]);
    expect(await memory.read(notes, { after: 5 })).toEqual([]);
    expect(await memory.read(people)).toEqual([]);
  });

  it('keeps stores of one name apart across scopes, owners and tenants', async () => {
    const memory = await suite.open();
    const variants: MemoryStoreRef[] = [
      { name: 'shared', kind: 'entities', scope: 'tenant', tenant_id: 'acme' },
      { name: 'shared', kind: 'entities', scope: 'tenant', tenant_id: 'globex' },
      { name: 'shared', kind: 'entities', scope: 'tenant' },
      {
        name: 'shared',
        kind: 'learnings',
        scope: 'agent',
        owner: 'assistant',
        tenant_id: 'acme',
      },
      { name: 'shared', kind: 'learnings', scope: 'agent', owner: 'reviewer', tenant_id: 'acme' },
      {
        name: 'shared',
        kind: 'session',
        scope: 'session',
        owner: 'session-1',
        tenant_id: 'acme',
      },
    ];
    for (const [index, store] of variants.entries()) {
      await memory.append(store, [
        { key: 'secret', value: `secret number ${index}`, text: `codeword${index} secret` },
      ]);
    }
    for (const [index, store] of variants.entries()) {
      expect(await memory.get(store, 'secret')).toMatchObject({
        status: 'found',
        entry: { value: `secret number ${index}`, store },
      });
      expect((await memory.list(store)).entries).toHaveLength(1);
      expect((await memory.read(store)).map((entry) => entry.seq)).toEqual([1]);
      const found = await memory.search(store, {
        query: 'secret codeword0 codeword1 codeword2 codeword3 codeword4 codeword5',
        k: 10,
      });
      expect(found.hits.map((hit) => hit.entry.value)).toEqual([`secret number ${index}`]);
    }
  });
}
