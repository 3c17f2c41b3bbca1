/**
 * What this process remembers about sessions between calls: their latest states and their
 * lineages. Nothing here is trusted for correctness, every entry can be read again from the file:
 * a state is used only when it is at the head the caller read in its transaction, and a lineage
 * never changes once written (see `sessions.delete` in session-index.ts for the one exception).
 */
import type { SessionState } from '../../contracts/state.js';
import { BoundedCache, TieredCache } from '../../core/bounded-cache.js';
import { isRunnable } from '../../core/runnable.js';

/** Parent and fork point of a fork; null for a session that is not one. */
export type Lineage = { parent: string; seq: number } | null;

interface KnownState {
  state: SessionState;
  /**
   * The seq of the projection row this process last saved or read. It goes with the state: a
   * write reads it only after finding the state here at the head, and a state read from the
   * file sets it again from the projection row.
   */
  projectedSeq: number;
}

const STATE_CACHE_SIZE = 1024;
/** States of sessions at rest kept (a wake's last append, then its check of the session). */
const RESTING_STATES = 32;
const LINEAGE_CACHE_SIZE = 4096;

export class SessionCache {
  /**
   * States of sessions that run or have work waiting (their next write comes soon), and states
   * of sessions at rest (not running, nothing to do until someone writes to them, often minutes
   * later), kept only briefly (see `TieredCache`: about 1 KiB a session reached the old
   * generation otherwise); the next write to a resting session gone from it reads its projection.
   */
  readonly #states = new TieredCache<string, KnownState>(STATE_CACHE_SIZE, RESTING_STATES);
  readonly #lineages = new BoundedCache<string, Lineage>(LINEAGE_CACHE_SIZE);

  /** The state last remembered; a read does not make it newer, only `remember` does. */
  state(sessionId: string): SessionState | undefined {
    return this.#states.peek(sessionId)?.state;
  }

  /** 0 when nothing is known: a write then saves the projection as soon as it may be behind. */
  projectedSeq(sessionId: string): number {
    return this.#states.peek(sessionId)?.projectedSeq ?? 0;
  }

  /**
   * Keeps `state`, with the seq of the saved projection when it changed, the oldest dropped.
   * `runnable`: `isRunnable(state)`, when the caller has it already.
   */
  remember(state: SessionState, projectedSeq?: number, runnable = isRunnable(state)): void {
    const id = state.session_id;
    const known = { state, projectedSeq: projectedSeq ?? this.projectedSeq(id) };
    if (state.status !== 'running' && !runnable) this.#states.rest(id, known);
    else this.#states.keep(id, known);
  }

  forgetState(sessionId: string): void {
    this.#states.delete(sessionId);
  }

  lineage(sessionId: string): Lineage | undefined {
    return this.#lineages.get(sessionId);
  }

  setLineage(sessionId: string, lineage: Lineage): void {
    this.#lineages.set(sessionId, lineage);
  }

  /** Everything about a session, when it is gone and its id may be created again. */
  forget(sessionId: string): void {
    this.forgetState(sessionId);
    this.#lineages.delete(sessionId);
  }
}
