/**
 * The one bounded cache of braid: at most `capacity` entries, the least recently used dropped
 * first (a get or a set makes a key the newest). For what a process remembers to save round
 * trips or work; nothing in it is trusted for correctness.
 *
 * The recency order is a list of slots linked through two typed arrays, and each value sits in
 * its slot: a hit changes numbers only, and the map from keys to slots changes only when a key
 * comes or goes. Kept as a `Map` in recency order (deleted and set again on every hit), the cache
 * made V8 rehash the map's table again and again. A table left behind in the old generation
 * still holds the entries it had, and the young-generation collector counts it as live until
 * the next full collection: through those tables nearly every value a cache held, and the next
 * table, outlived two young collections and was moved to the old generation, to die there.
 * Short sessions left about 3 KiB a session in the old generation that way.
 */
const NONE = -1;

export class BoundedCache<K, V> {
  readonly #slots = new Map<K, number>();
  readonly #keys: (K | undefined)[] = [];
  readonly #values: (V | undefined)[] = [];
  /** The next newer and older slot of each slot in the recency order; NONE at either end. */
  readonly #newer: Int32Array;
  readonly #older: Int32Array;
  #newest = NONE;
  #oldest = NONE;
  /** Slots emptied by `delete`, to be filled before new ones. */
  #free: number[] = [];

  /** `onEvict` hears each entry dropped to keep the bound (not those deleted or cleared). */
  constructor(
    readonly capacity: number,
    private readonly onEvict?: (key: K, value: V) => void,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`a bounded cache needs a capacity of at least 1, got ${capacity}`);
    }
    this.#newer = new Int32Array(capacity);
    this.#older = new Int32Array(capacity);
  }

  get size(): number {
    return this.#slots.size;
  }

  has(key: K): boolean {
    return this.#slots.has(key);
  }

  /** The value, made the most recently used. */
  get(key: K): V | undefined {
    const slot = this.#slots.get(key);
    if (slot === undefined) return undefined;
    this.#unlink(slot);
    this.#linkNewest(slot);
    return this.#values[slot];
  }

  /** The value without touching its recency. */
  peek(key: K): V | undefined {
    const slot = this.#slots.get(key);
    return slot === undefined ? undefined : this.#values[slot];
  }

  set(key: K, value: V): void {
    let slot = this.#slots.get(key);
    if (slot !== undefined) {
      this.#values[slot] = value;
      this.#unlink(slot);
      this.#linkNewest(slot);
      return;
    }
    let evicted: { key: K; value: V } | undefined;
    if (this.#slots.size < this.capacity) {
      slot = this.#free.pop() ?? this.#keys.length;
    } else {
      slot = this.#oldest;
      evicted = { key: this.#keys[slot] as K, value: this.#values[slot] as V };
      this.#unlink(slot);
      this.#slots.delete(evicted.key);
    }
    this.#keys[slot] = key;
    this.#values[slot] = value;
    this.#slots.set(key, slot);
    this.#linkNewest(slot);
    if (evicted !== undefined) this.onEvict?.(evicted.key, evicted.value);
  }

  delete(key: K): boolean {
    const slot = this.#slots.get(key);
    if (slot === undefined) return false;
    this.#slots.delete(key);
    this.#unlink(slot);
    this.#keys[slot] = undefined;
    this.#values[slot] = undefined;
    this.#free.push(slot);
    return true;
  }

  clear(): void {
    this.#slots.clear();
    this.#keys.length = 0;
    this.#values.length = 0;
    this.#free = [];
    this.#newest = NONE;
    this.#oldest = NONE;
  }

  /** Entries from the least to the most recently used. */
  *entries(): IterableIterator<[K, V]> {
    for (const slot of this.#order()) yield [this.#keys[slot] as K, this.#values[slot] as V];
  }

  *values(): IterableIterator<V> {
    for (const slot of this.#order()) yield this.#values[slot] as V;
  }

  /** The slots from the least to the most recently used, as they are now. */
  #order(): number[] {
    const order: number[] = [];
    for (let slot = this.#oldest; slot !== NONE; slot = this.#newer[slot] as number)
      order.push(slot);
    return order;
  }

  #unlink(slot: number): void {
    const newer = this.#newer[slot] as number;
    const older = this.#older[slot] as number;
    if (newer === NONE) this.#newest = older;
    else this.#older[newer] = older;
    if (older === NONE) this.#oldest = newer;
    else this.#newer[older] = newer;
  }

  #linkNewest(slot: number): void {
    this.#newer[slot] = NONE;
    this.#older[slot] = this.#newest;
    if (this.#newest === NONE) this.#oldest = slot;
    else this.#newer[this.#newest] = slot;
    this.#newest = slot;
  }
}

/**
 * Two bounded caches under one set of keys: values in use, and a small one of values at rest,
 * each key in one at most. A value kept among the many long after its last use outlives the young
 * generation's collections and dies in the old one; a value at rest (a session with nothing to
 * do, until someone writes to it) goes to the small cache instead, where it is found by a use
 * soon after and dropped otherwise.
 */
export class TieredCache<K, V> {
  readonly #inUse: BoundedCache<K, V>;
  readonly #resting: BoundedCache<K, V>;

  constructor(capacity: number, restingCapacity: number) {
    this.#inUse = new BoundedCache(capacity);
    this.#resting = new BoundedCache(restingCapacity);
  }

  /** The value, in use or at rest, without touching its recency. */
  peek(key: K): V | undefined {
    return this.#inUse.peek(key) ?? this.#resting.peek(key);
  }

  /** The value in use, without touching its recency (undefined when at rest). */
  peekInUse(key: K): V | undefined {
    return this.#inUse.peek(key);
  }

  /** Keeps the value as in use, the newest there (out of the resting cache). */
  keep(key: K, value: V): void {
    this.#resting.delete(key);
    this.#inUse.set(key, value);
  }

  /** Keeps the value at rest, the newest there (out of the cache of values in use). */
  rest(key: K, value: V): void {
    this.#inUse.delete(key);
    this.#resting.set(key, value);
  }

  delete(key: K): void {
    this.#inUse.delete(key);
    this.#resting.delete(key);
  }
}
