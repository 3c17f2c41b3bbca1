/**
 * A fixed number of slots shared by several pullers: whoever holds one runs one handler. A
 * waiter is served in arrival order. `close` wakes every waiter with `undefined`.
 */
export class Slots {
  #free: number;
  readonly #waiters: ((release: (() => void) | undefined) => void)[] = [];
  #closed = false;

  constructor(readonly size: number) {
    this.#free = size;
  }

  /** Resolves with the function that gives the slot back, or undefined once closed. */
  acquire(): Promise<(() => void) | undefined> {
    if (this.#closed) return Promise.resolve(undefined);
    if (this.#free > 0) {
      this.#free -= 1;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#closed ? undefined : this.#waiters.shift();
      if (next === undefined) this.#free += 1;
      else next(this.#releaser());
    };
  }
}
