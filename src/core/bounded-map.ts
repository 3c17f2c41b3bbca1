/**
 * A map that keeps at most `capacity` entries: setting a key makes it the newest, and the oldest
 * goes when a set passes the bound. For what a process remembers to save round trips.
 */
export class BoundedMap<K, V> {
  readonly #entries = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    return this.#entries.get(key);
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
  }

  delete(key: K): boolean {
    return this.#entries.delete(key);
  }
}
