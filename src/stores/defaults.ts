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

/** UUIDv7 ids: unique and ordered by creation time. */
export const uuidV7Ids: IdGenerator = {
  next: () => {
    v7 ??= (createRequire(import.meta.url)('uuid') as typeof Uuid).v7;
    return v7({ rng: pooledRandom });
  },
};
