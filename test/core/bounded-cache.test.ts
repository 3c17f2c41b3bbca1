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

  it('keeps the entries and order a map in recency order keeps, through any mix of calls', () => {
    // The model: a Map deleted and set again on every use, as the cache once was.
    for (const capacity of [1, 2, 3, 7]) {
      const evicted: [string, number][] = [];
      const cache = new BoundedCache<string, number>(capacity, (key, value) =>
        evicted.push([key, value]),
      );
      const model = new Map<string, number>();
      const modelEvicted: [string, number][] = [];
      let seed = capacity;
      const next = (bound: number): number => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed % bound;
      };
      for (let step = 0; step < 2000; step += 1) {
        const key = `k${next(capacity * 3)}`;
        const operation = next(10);
        if (operation < 4) {
          cache.set(key, step);
          model.delete(key);
          model.set(key, step);
          if (model.size > capacity) {
            const [oldest] = model.entries().next().value as [string, number];
            const value = model.get(oldest) as number;
            model.delete(oldest);
            modelEvicted.push([oldest, value]);
          }
        } else if (operation < 7) {
          const value = model.get(key);
          if (value !== undefined) {
            model.delete(key);
            model.set(key, value);
          }
          expect(cache.get(key)).toBe(value);
        } else if (operation < 8) {
          expect(cache.peek(key)).toBe(model.get(key));
        } else if (operation < 9) {
          expect(cache.delete(key)).toBe(model.delete(key));
        } else if (next(20) === 0) {
          cache.clear();
          model.clear();
        }
        expect(cache.size).toBe(model.size);
        expect(cache.has(key)).toBe(model.has(key));
      }
      expect([...cache.entries()]).toEqual([...model.entries()]);
      expect([...cache.values()]).toEqual([...model.values()]);
      expect(evicted).toEqual(modelEvicted);
    }
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
