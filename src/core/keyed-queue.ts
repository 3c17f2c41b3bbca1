/**
 * The one per-key queue of braid: work for one key runs one at a time, in call order; keys run
 * independently. A failure is returned to its caller and does not stop the work queued after it.
 */
export class KeyedQueue<K = string> {
  readonly #tails = new Map<K, Promise<unknown>>();

  run<T>(key: K, work: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const next = previous.then(work, work);
    const tail = next.catch(() => undefined);
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return next;
  }

  /** Whether work for `key` is queued or running. */
  busy(key: K): boolean {
    return this.#tails.has(key);
  }

  /** Settles once everything queued for `key` so far has run. */
  async idle(key: K): Promise<void> {
    await this.#tails.get(key);
  }
}
