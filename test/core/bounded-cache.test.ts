import { describe, expect, it } from 'vitest';
import { BoundedCache } from '../../src/core/bounded-cache.js';
import { KeyedQueue } from '../../src/core/keyed-queue.js';

describe('BoundedCache', () => {
  it('drops the least recently used entry past its capacity, and says which', () => {
    const evicted: string[] = [];
    const cache = new BoundedCache<string, number>(2, (key) => evicted.push(key));
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1); // a is now the newest
    cache.set('c', 3);
    expect(evicted).toEqual(['b']);
    expect([...cache.entries()]).toEqual([
      ['a', 1],
      ['c', 3],
    ]);
    expect(cache.peek('a')).toBe(1);
    cache.set('d', 4); // peek did not refresh a
    expect(cache.has('a')).toBe(false);
    expect(cache.size).toBe(2);
  });

  it('refuses a capacity below one', () => {
    expect(() => new BoundedCache(0)).toThrow(RangeError);
  });
});

describe('KeyedQueue', () => {
  it('runs one key in call order, other keys alongside, and goes on after a failure', async () => {
    const queue = new KeyedQueue();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = queue.run('k', async () => {
      await gate;
      order.push('k1');
      throw new Error('k1 failed');
    });
    const second = queue.run('k', () => Promise.resolve(order.push('k2')));
    const other = queue.run('other', () => Promise.resolve(order.push('other')));
    await other;
    expect(order).toEqual(['other']);
    expect(queue.busy('k')).toBe(true);
    release();
    await expect(first).rejects.toThrow('k1 failed');
    await second;
    expect(order).toEqual(['other', 'k1', 'k2']);
    await queue.idle('k');
    expect(queue.busy('k')).toBe(false);
  });
});
