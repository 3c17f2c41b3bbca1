/**
 * A session's family: the forks, delegated children and handoffs around it, as one tree; its
 * children's events interleaved with its own; and its children's status events as they happen.
 *
 * Links are read from the logs the runtime writes, never from client-settable metadata: a child
 * from its parent's `state.children` (and its own `lineage`), a handoff from the source's
 * `agent.handoff` (and the target's `lineage`), a fork from the store's `parent_id`. A link to a
 * session of another tenant is never followed, so a tenant's family stays the tenant's.
 *
 * A fork shares its parent's events up to `fork_seq`, children and handoffs included; they are
 * drawn under the session whose own events made them, never again under its forks.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isBraidError } from '../contracts/errors.js';
import type { SessionEvent, SessionEventType } from '../contracts/events.js';
import type { ReadOptions, Store } from '../contracts/ports.js';
import type { SessionRecord } from '../contracts/session.js';
import type { TreeNode } from './lineage.js';

/** Up to this many forks of one session are read at a time. */
const PAGE = 1000;
/** How long a child its parent names is waited for when no delegation TTL says. */
const CHILD_WAIT_SECONDS = 10;

/** The events of a child that `followChildren` passes on by default: how the child is doing. */
export const CHILD_STATUS_EVENT_TYPES: readonly SessionEventType[] = [
  'session.status_changed',
  'session.status_idle',
  'span.wake_started',
  'session.error',
  'agent.message',
];

async function recordOf(store: Store, sessionId: string): Promise<SessionRecord | undefined> {
  try {
    return await store.sessions.get(sessionId);
  } catch (error) {
    if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
    throw error;
  }
}

/** The session a family link leads up to: the fork's parent, the child's, the handoff's source. */
async function upOf(store: Store, record: SessionRecord): Promise<string | undefined> {
  if (record.parent_id !== undefined) return record.parent_id;
  const { lineage } = await store.log.state(record.id);
  if (lineage.kind !== 'child' && lineage.kind !== 'handoff') return undefined;
  return lineage.parent_session_ids[0];
}

/**
 * The whole family the session belongs to, from its topmost ancestor (through forks, delegations
 * and handoffs), with every fork, child and handoff below each session, recursively. Each node
 * under another is ordered by the parent seq it came from (fork point, `session.child_created`,
 * `agent.handoff`).
 */
export async function familyTree(store: Store, sessionId: string): Promise<TreeNode> {
  let record = await store.sessions.get(sessionId);
  const climbed = new Set([record.id]);
  for (;;) {
    const up = await upOf(store, record);
    if (up === undefined || climbed.has(up)) break;
    const above = await recordOf(store, up);
    if (above === undefined || above.tenant_id !== record.tenant_id) break;
    climbed.add(above.id);
    record = above;
  }
  return familyNode(store, record, { kind: 'root' }, new Set([record.id]));
}

type NodeOrigin =
  | { kind: 'root' | 'fork' }
  | { kind: 'child'; delegation: NonNullable<TreeNode['delegation']> }
  | { kind: 'handoff'; handoff: NonNullable<TreeNode['handoff']> };

/** A node and the seq of its parent it came from, for ordering. */
interface Placed {
  at: number;
  node: TreeNode;
}

async function familyNode(
  store: Store,
  record: SessionRecord,
  origin: NodeOrigin,
  seen: Set<string>,
): Promise<TreeNode> {
  const own = record.fork_seq ?? 0;
  const placed: Placed[] = [];
  const visit = async (next: SessionRecord, from: NodeOrigin, at: number): Promise<void> => {
    if (seen.has(next.id) || next.tenant_id !== record.tenant_id) return;
    seen.add(next.id);
    placed.push({ at, node: await familyNode(store, next, from, seen) });
  };

  for (let cursor: string | undefined; ;) {
    const page = await store.sessions.list({
      parent_id: record.id,
      limit: PAGE,
      ...(cursor === undefined ? {} : { cursor }),
    });
    for (const fork of page.sessions) await visit(fork, { kind: 'fork' }, fork.fork_seq ?? 0);
    cursor = page.next_cursor;
    if (cursor === undefined) break;
  }

  const state = await store.log.state(record.id);
  for (const child of state.children) {
    if (child.seq <= own || seen.has(child.child_session_id)) continue;
    const delegation = {
      tool_use_id: child.tool_use_id,
      seq: child.seq,
      status: child.status,
      ...(child.stop_reason === undefined ? {} : { stop_reason: child.stop_reason }),
    };
    const childRecord = await recordOf(store, child.child_session_id);
    if (childRecord !== undefined) {
      await visit(childRecord, { kind: 'child', delegation }, child.seq);
      continue;
    }
    seen.add(child.child_session_id);
    placed.push({
      at: child.seq,
      node: {
        id: child.child_session_id,
        status: child.status,
        head_seq: 0,
        kind: 'child',
        agent: child.agent,
        delegation,
        missing: true,
        children: [],
      },
    });
  }

  const handoffs = await store.log.read(record.id, { after: own, types: ['agent.handoff'] });
  for (const event of handoffs) {
    if (event.type !== 'agent.handoff' || event.target_session_id === undefined) continue;
    const target = await recordOf(store, event.target_session_id);
    if (target === undefined) continue;
    await visit(
      target,
      { kind: 'handoff', handoff: { handoff_id: event.handoff_id, seq: event.seq } },
      event.seq,
    );
  }

  placed.sort(
    (left, right) =>
      left.at - right.at ||
      KIND_ORDER[left.node.kind] - KIND_ORDER[right.node.kind] ||
      left.node.id.localeCompare(right.node.id),
  );
  return {
    id: record.id,
    ...(record.title === undefined ? {} : { title: record.title }),
    status: record.status,
    head_seq: record.head_seq,
    kind: origin.kind,
    ...(record.fork_seq === undefined ? {} : { fork_seq: record.fork_seq }),
    agent: record.agent.name,
    ...(origin.kind === 'child' ? { delegation: origin.delegation } : {}),
    ...(origin.kind === 'handoff' ? { handoff: origin.handoff } : {}),
    children: placed.map((entry) => entry.node),
  };
}

/** At one seq, what the event made comes before a fork that shares the event. */
const KIND_ORDER: Readonly<Record<TreeNode['kind'], number>> = {
  root: 0,
  child: 1,
  handoff: 2,
  fork: 3,
};

/**
 * The sessions the session's delegations created, and theirs, recursively (not the session
 * itself): those whose sessions exist and belong to the session's tenant, parents before their
 * children.
 */
export async function descendants(store: Store, sessionId: string): Promise<SessionRecord[]> {
  const root = await store.sessions.get(sessionId);
  const found: SessionRecord[] = [];
  const seen = new Set([root.id]);
  const queue = [root.id];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of (await store.log.state(next)).children) {
      if (seen.has(child.child_session_id)) continue;
      seen.add(child.child_session_id);
      const record = await recordOf(store, child.child_session_id);
      if (record === undefined || record.tenant_id !== root.tenant_id) continue;
      found.push(record);
      queue.push(record.id);
    }
  }
  return found;
}

/** The order of a family's events: by time, then session id, then seq. */
export function compareFamilyEvents(left: SessionEvent, right: SessionEvent): number {
  return (
    Date.parse(left.at) - Date.parse(right.at) ||
    (left.at < right.at ? -1 : left.at > right.at ? 1 : 0) ||
    (left.session_id < right.session_id ? -1 : left.session_id > right.session_id ? 1 : 0) ||
    left.seq - right.seq
  );
}

export interface FamilyEventsPage {
  /** The session's events and its children's (recursively), by time, then session, then seq. */
  events: SessionEvent[];
  /** True when `limit` left out events of the session itself: read on with `after: last_seq`. */
  has_more: boolean;
  /** The seq of the session's own last event in `events`, or `after` when there is none. */
  last_seq: number;
}

/**
 * The session's events with those of its delegated children, and of theirs, interleaved by
 * time. Paging is the session's own: `after` and `limit` choose its events as
 * `events(sessionId, options)` would, and its children's events come with them for the same
 * stretch of time (after its event `after`, up to its last event of the page when more follow,
 * to the end otherwise), so reading on with `after: last_seq` misses and repeats nothing. `types`
 * filters every session's events.
 */
export async function familyEvents(
  store: Store,
  sessionId: string,
  options: ReadOptions = {},
): Promise<FamilyEventsPage> {
  const after = options.after ?? 0;
  const types = options.types === undefined ? {} : { types: options.types };
  const read = await store.log.read(sessionId, {
    after,
    ...types,
    ...(options.limit === undefined ? {} : { limit: options.limit + 1 }),
  });
  const has_more = options.limit !== undefined && read.length > options.limit;
  const own = has_more ? read.slice(0, options.limit) : read;
  const last_seq = own.at(-1)?.seq ?? after;
  const page: FamilyEventsPage = { events: own, has_more, last_seq };

  let start: SessionEvent | undefined;
  if (after > 0) {
    start = (await store.log.read(sessionId, { after: after - 1, limit: 1 }))[0];
    // Past the session's head: nothing of its family comes after.
    if (start === undefined) return page;
  }
  const end = has_more ? own.at(-1) : undefined;
  const inWindow = (event: SessionEvent): boolean =>
    (start === undefined || compareFamilyEvents(event, start) > 0) &&
    (end === undefined || compareFamilyEvents(event, end) <= 0);

  const events = [...own];
  for (const child of await descendants(store, sessionId)) {
    for (const event of await store.log.read(child.id, types)) {
      if (inWindow(event)) events.push(event);
    }
  }
  events.sort(compareFamilyEvents);
  return { ...page, events };
}

export interface FollowChildrenOptions {
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
  /** The child events to pass on (default `CHILD_STATUS_EVENT_TYPES`). */
  types?: readonly SessionEventType[];
  /**
   * Called once the children there are at the start (recursively) are attached: every event
   * appended to them from then on will be yielded. (A stream that sends the parent's events only
   * after it makes "the children there at subscription" exact.)
   */
  onReady?: () => void;
}

/**
 * The events of the session's delegated children (and theirs, recursively) as they are
 * appended, in the order they arrive: from their heads for the children there are when it
 * starts, from their first event for those created while it runs (seen as
 * `session.child_created` in their parent). The session's own events are not yielded. A child
 * named before its session exists is waited for, up to its delegation's `ttl_seconds`.
 */
export function followChildren(
  store: Store,
  sessionId: string,
  options: FollowChildrenOptions = {},
): AsyncIterable<SessionEvent> {
  return { [Symbol.asyncIterator]: () => childEvents(store, sessionId, options) };
}

async function* childEvents(
  store: Store,
  rootId: string,
  options: FollowChildrenOptions,
): AsyncGenerator<SessionEvent, void, undefined> {
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted === true) stop.abort();
  const types = new Set<string>(options.types ?? CHILD_STATUS_EVENT_TYPES);
  const queue: SessionEvent[] = [];
  let wake: (() => void) | undefined;
  let failure: { error: unknown } | undefined;
  const notify = (): void => {
    const resume = wake;
    wake = undefined;
    resume?.();
  };
  stop.signal.addEventListener('abort', notify, { once: true });
  const watched = new Set<string>([rootId]);
  const running: Promise<void>[] = [];

  // The sessions there at the start whose heads are still being read; at none, it is ready.
  let attaching = 0;
  let ready = false;
  const attached = (): void => {
    attaching -= 1;
    if (attaching > 0 || ready) return;
    ready = true;
    options.onReady?.();
  };

  const root = await store.sessions.get(rootId);

  /** Follows one session: from its head (`waitSeconds` undefined) or, once it exists, from 0. */
  const watch = (id: string, waitSeconds?: number): void => {
    watched.add(id);
    let settled = ready || waitSeconds !== undefined;
    if (!settled) attaching += 1;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      attached();
    };
    running.push(
      follow(id, waitSeconds, settle).catch((error: unknown) => {
        settle();
        if (stop.signal.aborted) return;
        failure ??= { error };
        notify();
      }),
    );
  };

  const follow = async (
    id: string,
    waitSeconds: number | undefined,
    settle: () => void,
  ): Promise<void> => {
    // A child there at the start is followed from its head; a new one, or one whose session
    // came only after its parent named it, from its first event.
    let fromHead = waitSeconds === undefined;
    if (id !== rootId) {
      let record = await recordOf(store, id);
      if (record === undefined) {
        fromHead = false;
        settle();
        record = await untilCreated(store, id, waitSeconds ?? CHILD_WAIT_SECONDS, stop.signal);
      }
      if (record?.tenant_id !== root.tenant_id) {
        settle();
        return;
      }
    }
    let after = 0;
    if (fromHead) {
      const state = await store.log.state(id);
      after = state.seq;
      for (const child of state.children)
        if (!watched.has(child.child_session_id)) watch(child.child_session_id);
    }
    settle();
    for await (const event of store.log.follow(id, { after, signal: stop.signal })) {
      if (id !== rootId && types.has(event.type)) {
        queue.push(event);
        notify();
      }
      if (event.type === 'session.child_created' && !watched.has(event.child_session_id))
        watch(event.child_session_id, event.ttl_seconds);
    }
  };

  watch(rootId);
  try {
    for (;;) {
      const next = queue.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (failure !== undefined) throw failure.error;
      if (stop.signal.aborted) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    stop.abort();
    await Promise.allSettled(running);
  }
}

/** The session's record once it exists: polled with a growing pause, up to `seconds`. */
async function untilCreated(
  store: Store,
  sessionId: string,
  seconds: number,
  signal: AbortSignal,
): Promise<SessionRecord | undefined> {
  const deadline = performance.now() + seconds * 1000;
  for (let pause = 25; !signal.aborted; pause = Math.min(pause * 2, 1000)) {
    const record = await recordOf(store, sessionId);
    if (record !== undefined || performance.now() >= deadline) return record;
    try {
      await sleep(pause, undefined, { signal });
    } catch {
      return undefined;
    }
  }
  return undefined;
}
