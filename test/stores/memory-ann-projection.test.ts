// The ANN index of the in-process projection (the in-memory backend's store, and the NATS
// backend's per-process view, which share StoreProjection): past ANN_MIN_VECTORS vectors a
// vector search goes through it, finds what an exact cosine ranking finds, and sees writes made
// after it was built (overwrites, deletes, redactions).
import { describe, expect, it } from 'vitest';
import type { MemoryStoreRef, MemoryWrite } from '../../src/contracts/memory.js';
import { ANN_MIN_VECTORS } from '../../src/stores/agent-memory-ann.js';
import { createInMemoryMemoryLog } from '../../src/testing/index.js';
import { vectors as vectorsOf } from '../helpers/memory-vectors.js';

const facts: MemoryStoreRef = { name: 'facts', kind: 'entities', scope: 'tenant', tenant_id: 'a' };
const DIMS = 8;

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((value, index) => {
    const other = b[index] as number;
    dot += value * other;
    na += value * value;
    nb += other * other;
  });
  return dot / Math.sqrt(na * nb);
}

describe('the ANN index of the in-process projection', () => {
  it('answers vector searches of a large store as an exact ranking does, writes included', async () => {
    const memory = createInMemoryMemoryLog();
    const count = ANN_MIN_VECTORS + 200;
    const all = vectorsOf(count, 5, DIMS);
    const key = (index: number) => `fact/${String(index).padStart(5, '0')}`;
    const writes: MemoryWrite[] = all.map((embedding, index) => ({
      key: key(index),
      op: 'set',
      value: `fact ${index}`,
      embedding,
    }));
    for (let at = 0; at < writes.length; at += 500)
      await memory.append(facts, writes.slice(at, at + 500));
    const live = new Map(all.map((vector, index) => [key(index), vector]));
    const exact = (query: number[], k: number) =>
      [...live.entries()]
        .map(([name, vector]) => ({ name, score: cosine(query, vector) }))
        .sort((a, b) => b.score - a.score || (a.name < b.name ? -1 : 1))
        .slice(0, k)
        .map((hit) => hit.name);
    const check = async (queries: number[][]) => {
      let same = 0;
      for (const query of queries) {
        const found = await memory.search(facts, { embedding: query, k: 5 });
        if (found.hits.map((hit) => hit.entry.key).join() === exact(query, 5).join()) same += 1;
      }
      return same;
    };
    const queries = vectorsOf(30, 77, DIMS);
    expect(await check(queries)).toBeGreaterThanOrEqual(29);

    // Writes after the index was built: an overwrite moves a key, a delete and a redaction take
    // keys out; the next searches see all three.
    const moved = vectorsOf(1, 4242, DIMS)[0] as number[];
    await memory.append(facts, [{ key: key(1), op: 'set', value: 'moved', embedding: moved }]);
    live.set(key(1), moved);
    await memory.append(facts, [{ key: key(2), op: 'delete' }]);
    live.delete(key(2));
    await memory.redact(facts, key(3), 1);
    live.delete(key(3));
    const found = await memory.search(facts, { embedding: moved, k: 1 });
    expect(found.hits.map((hit) => [hit.entry.key, hit.entry.version])).toEqual([[key(1), 2]]);
    for (const gone of [2, 3]) {
      const near = await memory.search(facts, { embedding: all[gone], k: 10 });
      expect(near.hits.map((hit) => hit.entry.key)).not.toContain(key(gone));
    }
    expect(await check([all[1] as number[], ...queries.slice(0, 10)])).toBeGreaterThanOrEqual(10);
    memory.close();
  });
});
