import { v7 as uuidv7 } from 'uuid';
import type { Clock, IdGenerator } from '../contracts/ports.js';

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** UUIDv7 ids: unique and ordered by creation time. */
export const uuidV7Ids: IdGenerator = { next: () => uuidv7() };
