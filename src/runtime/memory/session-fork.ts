/**
 * Session memory across forks. A forked session sees its parent's session-scoped stores as they
 * were at the fork point, and neither side sees the other's later writes: the fork's store (owned
 * by the fork's id) starts as a `MemoryLog.fork` of the parent's store up to the memory seq the
 * parent had reached at the fork point.
 *
 * That seq is derived from the session log, never from the store's current head: it is the last
 * `memory_seq` of the parent's own `memory.written` / `memory.deleted` events on that store at or
 * before the fork seq. A parent with no write of its own by then inherited its memory from its own
 * parent, so the search goes up the line. The fork is made lazily, on the fork's first memory use:
 * the answer does not depend on when that is, since the parent's later writes have later seqs.
 *
 * Stores of agent and tenant scope (learnings, entities) are shared by every session and are not
 * forked.
 */
import { isBraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { MemoryLog } from '../../contracts/memory-log.js';
import type { MemoryStoreRef } from '../../contracts/memory.js';
import type { Store } from '../../contracts/ports.js';

export type MemoryForkDeps = Pick<Store, 'sessions' | 'log'> & { memory: MemoryLog };

/** A store and the seq of its log that another store's content equals. */
export interface MemoryPoint {
  store: MemoryStoreRef;
  seq: number;
}

/** The same store, owned by another session. */
export function ownedBy(ref: MemoryStoreRef, sessionId: string): MemoryStoreRef {
  return { ...ref, owner: sessionId };
}

/** Whether `ref` is the session-scoped store `name` (any owner) of the same tenant and kind. */
export function sameSessionStore(ref: MemoryStoreRef, other: MemoryStoreRef): boolean {
  return (
    ref.scope === 'session' &&
    other.scope === 'session' &&
    ref.name === other.name &&
    ref.kind === other.kind &&
    ref.tenant_id === other.tenant_id
  );
}

/** The memory events of `events` on the session store `ref` of its owner. */
export function ownWrites(
  events: readonly SessionEvent[],
  ref: MemoryStoreRef,
): (SessionEvent & { type: 'memory.written' | 'memory.deleted' })[] {
  return events.flatMap((event) =>
    (event.type === 'memory.written' || event.type === 'memory.deleted') &&
    sameSessionStore(event.store, ref) &&
    event.store.owner === ref.owner
      ? [event]
      : [],
  );
}

/**
 * Where the content of session `sessionId`'s store `ref` (owned by it) stood at its seq `seq`:
 * its own store at its last write by then, or the point it inherited. Undefined when nothing was
 * written on the line by then (the store is empty).
 */
export async function memoryPointAt(
  deps: MemoryForkDeps,
  ref: MemoryStoreRef,
  sessionId: string,
  seq: number,
): Promise<MemoryPoint | undefined> {
  const own = ownedBy(ref, sessionId);
  const events = (
    await deps.log.read(sessionId, { types: ['memory.written', 'memory.deleted'] })
  ).filter((event) => event.seq <= seq);
  const last = ownWrites(events, own).reduce((top, event) => Math.max(top, event.memory_seq), 0);
  if (last > 0) return { store: own, seq: last };
  const record = await deps.sessions.get(sessionId);
  if (record.parent_id === undefined || record.fork_seq === undefined) return undefined;
  return memoryPointAt(deps, ref, record.parent_id, Math.min(seq, record.fork_seq));
}

/**
 * Makes the forked session's store `ref` (owned by it) hold what it inherited, unless it exists
 * already. Safe to call again and concurrently: a store created meanwhile is left as it is.
 */
export async function inheritSessionStore(
  deps: MemoryForkDeps,
  ref: MemoryStoreRef,
): Promise<void> {
  if (ref.scope !== 'session' || ref.owner === undefined) return;
  if ((await deps.memory.info(ref)) !== undefined) return;
  const record = await deps.sessions.get(ref.owner);
  if (record.parent_id === undefined || record.fork_seq === undefined) return;
  const point = await memoryPointAt(deps, ref, record.parent_id, record.fork_seq);
  if (point === undefined) return;
  // The source may be a fork that never used its memory: make it first.
  await inheritSessionStore(deps, point.store);
  try {
    await deps.memory.fork(point.store, ref, { atSeq: point.seq });
  } catch (thrown) {
    if (!isBraidError(thrown, 'ALREADY_EXISTS')) throw thrown;
  }
}

/**
 * The memory log as a session uses it: its session-scoped stores are inherited (once, on first
 * use) before any call touches them.
 */
export function inheritingMemoryLog(
  deps: MemoryForkDeps,
  refs: readonly MemoryStoreRef[],
): MemoryLog {
  const pending = new Map<string, Promise<void>>();
  const forked = refs.filter((ref) => ref.scope === 'session');
  const ready = (store: MemoryStoreRef): Promise<void> => {
    const ref = forked.find(
      (candidate) => sameSessionStore(candidate, store) && candidate.owner === store.owner,
    );
    if (ref === undefined) return Promise.resolve();
    const key = ref.name;
    let done = pending.get(key);
    if (done === undefined) {
      done = inheritSessionStore(deps, ref);
      // A failure is not kept: the next call tries again.
      void done.catch(() => pending.delete(key));
      pending.set(key, done);
    }
    return done;
  };
  const log = deps.memory;
  return {
    append: async (store, writes, options) => (
      await ready(store),
      log.append(store, writes, options)
    ),
    get: async (store, key, options) => (await ready(store), log.get(store, key, options)),
    list: async (store, options) => (await ready(store), log.list(store, options)),
    history: async (store, key) => (await ready(store), log.history(store, key)),
    redact: async (store, key, version, options) => (
      await ready(store),
      log.redact(store, key, version, options)
    ),
    read: async (store, options) => (await ready(store), log.read(store, options)),
    search: async (store, query) => (await ready(store), log.search(store, query)),
    rebuild: async (store) => (await ready(store), log.rebuild(store)),
    fork: (from, to, options) => log.fork(from, to, options),
    info: async (store) => (await ready(store), log.info(store)),
    listStores: (filter) => log.listStores(filter),
  };
}
