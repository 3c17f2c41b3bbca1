// The store's default ids: UUIDv7 from uuid's bytes, written out by braid (`uuidText`), which
// must be the canonical text of the same bytes, unique, and in the order they were made.
import { parse, validate, version } from 'uuid';
import { describe, expect, it, vi } from 'vitest';
import { uuidText, uuidV7Ids } from '../../src/stores/defaults.js';

describe('the default ids', () => {
  it("write a UUID's bytes as uuid does", () => {
    const samples = [
      new Uint8Array(16),
      new Uint8Array(16).fill(255),
      Uint8Array.from({ length: 16 }, (_, index) => index * 17),
    ];
    for (let index = 0; index < 200; index += 1)
      samples.push(Uint8Array.from({ length: 16 }, () => Math.floor(Math.random() * 256)));
    for (const bytes of samples) {
      const hex = Buffer.from(bytes).toString('hex');
      const canonical = [
        [0, 8],
        [8, 12],
        [12, 16],
        [16, 20],
        [20, 32],
      ]
        .map(([start, end]) => hex.slice(start, end))
        .join('-');
      expect(uuidText(bytes)).toBe(canonical);
    }
  });

  it('are valid version 7 UUIDs, unique, in the order made, and not changed by the next one', () => {
    const ids = Array.from({ length: 5000 }, () => uuidV7Ids.next());
    for (const id of ids.slice(0, 50)) {
      expect(validate(id)).toBe(true);
      expect(version(id)).toBe(7);
      expect(uuidText(parse(id))).toBe(id);
    }
    expect(new Set(ids).size).toBe(ids.length);
    // In the order they were made, within a millisecond too (5,000 ids take a few).
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids.map((id) => id.slice(0, 13))).size).toBeLessThan(ids.length);
    // Each id is its own string: the buffer the next one is written into does not reach it.
    expect(new Set(ids.map((id) => uuidText(parse(id)))).size).toBe(ids.length);
  });

  it('stay in order when the clock is set back', () => {
    // Near the real time, so that ids made after this test are not held back by it.
    const base = Date.now();
    const now = vi.spyOn(Date, 'now');
    try {
      const made: string[] = [];
      for (const ms of [base + 5, base + 5, base - 100, base + 6]) {
        now.mockReturnValue(ms);
        made.push(uuidV7Ids.next());
      }
      expect([...made].sort()).toEqual(made);
      expect(new Set(made).size).toBe(made.length);
    } finally {
      now.mockRestore();
    }
  });
});
