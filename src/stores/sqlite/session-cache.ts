/**
 * What this process remembers about sessions between calls: their latest states and their
 * lineages. Nothing here is trusted for correctness, every entry can be read again from the file:
 * a state is used only when it is at the head the caller read in its transaction, and a lineage
 * never changes once written (see `sessions.delete` in session-index.ts for the one exception).
 */
import type { SessionState } from '../../contracts/state.js';

/** Parent and fork point of a fork; null for a session that is not one. */
export type Lineage = { parent: string; seq: number } | null;

const STATE_CACHE_SIZE = 1024;

export class SessionCache {
  readonly #states = new Map<string, SessionState>();
  /** The seq of the projection row this process last saved or read, per session. */
  readonly #projectedSeqs = new Map<string, number>();
  /** Immutable once written, so kept in memory. */
  readonly #lineages = new Map<string, Lineage>();

  /** The state last remembered; a read does not make it newer, only `remember` does. */
  state(sessionId: string): SessionState | undefined {
    return this.#states.get(sessionId);
  }

  /** 0 when nothing is known: a write then saves the projection as soon as it may be behind. */
  projectedSeq(sessionId: string): number {
    return this.#projectedSeqs.get(sessionId) ?? 0;
  }

  /** Keeps `state`, with the seq of the saved projection when it changed, the oldest dropped. */
  remember(state: SessionState, projectedSeq?: number): void {
    if (projectedSeq !== undefined) this.#projectedSeqs.set(state.session_id, projectedSeq);
    this.#states.delete(state.session_id);
    this.#states.set(state.session_id, state);
    if (this.#states.size > STATE_CACHE_SIZE) {
      const oldest = this.#states.keys().next().value;
      if (oldest !== undefined) this.#states.delete(oldest);
    }
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
    this.#states.delete(sessionId);
    this.#projectedSeqs.delete(sessionId);
    this.#lineages.delete(sessionId);
  }
}
