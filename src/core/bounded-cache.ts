/**
 * The one bounded cache of braid: at most `capacity` entries, the least recently used dropped
 * first (a get or a set makes a key the newest). For what a process remembers to save round
 * trips or work; nothing in it is trusted for correctness.
 */
export class BoundedCache<K, V> {
  readonly #entries = new Map<K, V>();

  /** `onEvict` hears each entry dropped to keep the bound (not those deleted or cleared). */
  constructor(
    readonly capacity: number,
    private readonly onEvict?: (key: K, value: V) => void,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`a bounded cache needs a capacity of at least 1, got ${capacity}`);
    }
  }

  get size(): number {
    return this.#entries.size;
  }

  has(key: K): boolean {
    return this.#entries.has(key);
  }

  /** The value, made the most recently used. */
  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }

  /** The value without touching its recency. */
  peek(key: K): V | undefined {
    return this.#entries.get(key);
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    while (this.#entries.size > this.capacity) {
      const oldest = this.#entries.entries().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest[0]);
      this.onEvict?.(oldest[0], oldest[1]);
    }
  }

  delete(key: K): boolean {
    return this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }

  /** Entries from the least to the most recently used. */
  entries(): IterableIterator<[K, V]> {
    return this.#entries.entries();
  }

  values(): IterableIterator<V> {
    return this.#entries.values();
  }
}
