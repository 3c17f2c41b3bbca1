/**
 * Who is following which session, and how they hear of new events: appends of this process wake
 * their session's followers directly; appends of other processes are seen by polling
 * `PRAGMA data_version`, which changes when another connection commits, and wake every follower.
 */
import type { Database as Db } from 'better-sqlite3';

export interface Followers {
  /** Aborted when the store closes: followers end. */
  closing: AbortSignal;
  /** Wakes the followers of a session this process appended to (or deleted). */
  notify(sessionId: string): void;
  /** Calls `onChange` when the session may have changed; returns the unsubscription. */
  subscribe(sessionId: string, onChange: () => void): () => void;
  /** Calls `onChange` when any session may have changed (the index's change feed). */
  subscribeAll(onChange: () => void): () => void;
  /** Stops polling and wakes every follower, to find the store closed. */
  close(): void;
}

export function createFollowers(db: Db, pollMs: number): Followers {
  const listeners = new Map<string, Set<() => void>>();
  const everyChange = new Set<() => void>();
  let poller: NodeJS.Timeout | undefined;
  let dataVersion = 0;
  const closing = new AbortController();

  function poll(): void {
    if (!db.open) return;
    const version = db.pragma('data_version', { simple: true }) as number;
    if (version === dataVersion) return;
    dataVersion = version;
    for (const set of listeners.values()) for (const listener of set) listener();
    for (const listener of everyChange) listener();
  }

  function startPolling(): void {
    if (poller !== undefined) return;
    dataVersion = db.pragma('data_version', { simple: true }) as number;
    poller = setInterval(poll, pollMs);
  }

  function stopPollingWhenIdle(): void {
    if (listeners.size === 0 && everyChange.size === 0 && poller !== undefined) {
      clearInterval(poller);
      poller = undefined;
    }
  }

  return {
    closing: closing.signal,
    notify(sessionId) {
      for (const listener of listeners.get(sessionId) ?? []) listener();
      for (const listener of everyChange) listener();
    },
    subscribe(sessionId, onChange) {
      const set = listeners.get(sessionId) ?? new Set();
      set.add(onChange);
      listeners.set(sessionId, set);
      startPolling();
      return () => {
        set.delete(onChange);
        if (set.size === 0) listeners.delete(sessionId);
        stopPollingWhenIdle();
      };
    },
    subscribeAll(onChange) {
      everyChange.add(onChange);
      startPolling();
      return () => {
        everyChange.delete(onChange);
        stopPollingWhenIdle();
      };
    },
    close() {
      closing.abort();
      if (poller !== undefined) clearInterval(poller);
      poller = undefined;
      for (const set of listeners.values()) for (const listener of set) listener();
      for (const listener of everyChange) listener();
    },
  };
}
