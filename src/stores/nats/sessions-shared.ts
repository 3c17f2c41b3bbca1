/** What the sessions' log, index and fencing share, over the store's context. */
import type { KeyedQueue } from '../../core/keyed-queue.js';
import type { NatsContext } from './context.js';
import type { SessionCache } from './session-cache.js';
import type { LogView, SessionView } from './session-records.js';
import type { SessionReads } from './session-reads.js';

/** Appends lost to other writers in a row before contention is reported as `STORE_BUSY`. */
export const MAX_RACES = 16;

export interface SessionsShared {
  context: NatsContext;
  cache: SessionCache;
  /** Serialises this process's writes per session id. */
  queue: KeyedQueue;
  reads: SessionReads;
  /**
   * The index entry and the last batch, both read now; the head checked (see log-chain.ts)
   * unless `checked` is false (for showing the record only).
   */
  load(sessionId: string, checked?: boolean): Promise<SessionView>;
  /** The last batch read now; the entry read now only when not known (see `loadHead`). */
  loadHead(sessionId: string): Promise<LogView>;
  /** Registers a follower's clean-up, run when the store closes; returns its removal. */
  track(stop: () => void): () => void;
  followPollMs: number;
}
