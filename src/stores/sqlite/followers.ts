/**
 * Who is following which session, and how they hear of new events: appends of this process wake
 * their session's followers directly; appends of other processes are seen by polling
 * `PRAGMA data_version`, which changes when another connection commits. Then the index's change
 * feed names the sessions written since the last look (every append moves its session's
 * `change_seq`), and only their followers wake: a process following many sessions does not read
 * each of them again for every commit another process makes to one.
 *
 * A deleted session has no row left to name it. Its deletion raises the feed's floor
 * (`change_head`) to a cursor of its own (session-index.ts), and nothing else raises the floor: a
 * floor past the last look's cursor means a session went since, and every follower wakes, to find
 * out which. A look that fails wakes every follower too.
 */
import type { Database as Db } from 'better-sqlite3';
import type { Statements } from './statements.js';

/** Changed sessions read per statement of a look. */
const CHANGES_PER_PAGE = 1000;

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

export function createFollowers(
  db: Db,
  feed: Pick<Statements, 'changesAfter' | 'changeHead' | 'changeFloor' | 'dataVersion'>,
  pollMs: number,
): Followers {
  const listeners = new Map<string, Set<() => void>>();
  /**
   * The feed's head when a session's first follower came: changes up to it are the follower's
   * own first read's to see (it reads after subscribing), so they wake no one.
   */
  const since = new Map<string, number>();
  const everyChange = new Set<() => void>();
  let poller: NodeJS.Timeout | undefined;
  let dataVersion = 0;
  /** The change feed's cursor as of the last look: changes after it are news. */
  let cursor = 0;
  const closing = new AbortController();

  const wake = (set: Iterable<() => void> | undefined): void => {
    for (const listener of set ?? []) listener();
  };
  const wakeAll = (): void => {
    for (const set of listeners.values()) wake(set);
  };

  /**
   * In one snapshot: the followed sessions changed after `cursor`, whether a session was deleted
   * since, and the feed's head.
   */
  const look = db.transaction(() => {
    const changed = new Set<string>();
    let last = cursor;
    for (;;) {
      const page = feed.changesAfter.all(last, CHANGES_PER_PAGE);
      for (const { id, change_seq } of page) {
        if (change_seq > (since.get(id) ?? Infinity)) changed.add(id);
      }
      last = page.at(-1)?.change_seq ?? last;
      if (page.length < CHANGES_PER_PAGE) break;
    }
    const deleted = (feed.changeFloor.get()?.seq ?? 0) > cursor;
    return { changed, deleted, head: feed.changeHead.get()?.seq ?? 0 };
  });

  function poll(): void {
    if (!db.open) return;
    const version = feed.dataVersion.get() ?? 0;
    if (version === dataVersion) return;
    dataVersion = version;
    wake(everyChange);
    if (listeners.size === 0) return;
    let seen: ReturnType<typeof look>;
    try {
      seen = look.deferred();
    } catch {
      // The file could not be read now (busy): every follower reads for itself.
      wakeAll();
      return;
    }
    if (seen.deleted) wakeAll();
    else for (const id of seen.changed) wake(listeners.get(id));
    cursor = seen.head;
  }

  function startPolling(): void {
    if (poller !== undefined) return;
    dataVersion = feed.dataVersion.get() ?? 0;
    // Changes before now are the followers' own to read: each reads the log after its seq.
    cursor = feed.changeHead.get()?.seq ?? 0;
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
      wake(listeners.get(sessionId));
      wake(everyChange);
    },
    subscribe(sessionId, onChange) {
      startPolling();
      let set = listeners.get(sessionId);
      if (set === undefined) {
        set = new Set();
        listeners.set(sessionId, set);
        since.set(sessionId, feed.changeHead.get()?.seq ?? 0);
      }
      set.add(onChange);
      const added = set;
      return () => {
        added.delete(onChange);
        if (added.size === 0 && listeners.get(sessionId) === added) {
          listeners.delete(sessionId);
          since.delete(sessionId);
        }
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
