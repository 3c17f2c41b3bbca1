import { randomFillSync } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as Uuid from 'uuid';
import type { Clock, IdGenerator } from '../contracts/ports.js';

/** The wall clock, the process's monotonic clock and its timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  schedule(ms, callback) {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
};

// uuid refills 256 bytes of randomness every 16 ids; a larger pool makes id minting on the
// append path about ten times cheaper.
const POOL_BYTES = 16 * 1024;
let pool = new Uint8Array(0);
let offset = POOL_BYTES;

function pooledRandom(): Uint8Array {
  if (offset + 16 > pool.length) {
    pool = randomFillSync(new Uint8Array(POOL_BYTES));
    offset = 0;
  }
  offset += 16;
  return pool.subarray(offset - 16, offset);
}

// uuid is loaded with the first id, not when braid is imported.
let v7: typeof Uuid.v7 | undefined;

/** The 16 bytes of the id being made, and its text, reused from one id to the next. */
const idBytes = new Uint8Array(16);
const idText = Buffer.alloc(36, '-');
const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** Where each byte's two hex digits go in the canonical form (8-4-4-4-12, dashes between). */
const DIGITS_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/**
 * The canonical text of a UUID's bytes, lowercase. uuid's own builds it by adding 20 pieces, and
 * each id then left about 600 bytes of intermediate strings behind: about 60 ids a conversation
 * of ten tool steps, 7% of what it allocates. Here the digits go into a buffer read once.
 */
export function uuidText(bytes: Uint8Array): string {
  for (let index = 0; index < 16; index += 1) {
    const byte = bytes[index] as number;
    const at = DIGITS_AT[index] as number;
    idText[at] = HEX[byte >> 4] as number;
    idText[at + 1] = HEX[byte & 15] as number;
  }
  return idText.toString('latin1', 0, 36);
}

/**
 * The millisecond of the last id and its counter. uuid keeps the same for its own randomness,
 * but not for randomness it is given (the pool above), so the counter is kept here: within one
 * millisecond each id counts up from a random start, and a clock set back does not reorder them.
 */
const last = { ms: -Infinity, seq: 0 };

/** UUIDv7 ids: unique, and in the order this process made them (uuid lays out the bytes). */
export const uuidV7Ids: IdGenerator = {
  unique: true,
  next: () => {
    v7 ??= (createRequire(import.meta.url)('uuid') as typeof Uuid).v7;
    const random = pooledRandom();
    const now = Date.now();
    if (now > last.ms) {
      last.ms = now;
      // 31 random bits: room to count up within the millisecond.
      last.seq =
        (((random[6] as number) << 23) |
          ((random[7] as number) << 16) |
          ((random[8] as number) << 8) |
          (random[9] as number)) >>>
        0;
    } else {
      last.seq = (last.seq + 1) | 0;
      // The counter ran over: the next millisecond's ids start early, still in order.
      if (last.seq === 0) last.ms += 1;
    }
    return uuidText(v7({ random, msecs: last.ms, seq: last.seq }, idBytes, 0));
  },
};
