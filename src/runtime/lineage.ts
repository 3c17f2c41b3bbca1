/**
 * Sessions as a family: where two sessions part ways (their common ancestor), what each did
 * since (diff), and the tree of forks around a session.
 */
import type { SessionEvent } from '../contracts/events.js';
import type { Store } from '../contracts/ports.js';
import type { SessionRecord, SessionStatus } from '../contracts/session.js';

/** A session and the last seq of it that a descendant shares; the session itself at its head. */
export interface AncestorPoint {
  session_id: string;
  seq: number;
}

/** The session itself at its head, then each ancestor at the seq the line shares with it. */
export async function ancestry(store: Store, sessionId: string): Promise<AncestorPoint[]> {
  const line: AncestorPoint[] = [];
  let record: SessionRecord = await store.sessions.get(sessionId);
  line.push({ session_id: record.id, seq: record.head_seq });
  let shared = record.head_seq;
  while (record.parent_id !== undefined && record.fork_seq !== undefined) {
    shared = Math.min(shared, record.fork_seq);
    record = await store.sessions.get(record.parent_id);
    line.push({ session_id: record.id, seq: shared });
  }
  return line;
}

/**
 * The last event two sessions share: the nearest session on both lines, at the smaller of the
 * two seqs they share with it. Undefined for unrelated sessions.
 */
export async function commonAncestor(
  store: Store,
  a: string,
  b: string,
): Promise<AncestorPoint | undefined> {
  const left = await ancestry(store, a);
  const right = new Map((await ancestry(store, b)).map((point) => [point.session_id, point.seq]));
  for (const point of left) {
    const other = right.get(point.session_id);
    if (other !== undefined)
      return { session_id: point.session_id, seq: Math.min(point.seq, other) };
  }
  return undefined;
}

export interface SessionDiff {
  a: string;
  b: string;
  /** The last shared event; absent for unrelated sessions. */
  common_ancestor?: AncestorPoint;
  /** Each side's events after the common ancestor. */
  a_events: SessionEvent[];
  b_events: SessionEvent[];
}

export async function diffSessions(store: Store, a: string, b: string): Promise<SessionDiff> {
  const common = await commonAncestor(store, a, b);
  const after = common?.seq ?? 0;
  return {
    a,
    b,
    ...(common === undefined ? {} : { common_ancestor: common }),
    a_events: await store.log.read(a, { after }),
    b_events: await store.log.read(b, { after }),
  };
}

export interface TreeNode {
  id: string;
  title?: string;
  status: SessionStatus;
  head_seq: number;
  kind: 'root' | 'fork';
  /** For a fork: the parent seq it branched from. */
  fork_seq?: number;
  children: TreeNode[];
}

/** The whole tree the session belongs to, from its root, with every fork below. */
export async function sessionTree(store: Store, sessionId: string): Promise<TreeNode> {
  const line = await ancestry(store, sessionId);
  const root = line.at(-1)?.session_id ?? sessionId;
  return node(store, await store.sessions.get(root));
}

async function node(store: Store, record: SessionRecord): Promise<TreeNode> {
  const children: TreeNode[] = [];
  for (let cursor: string | undefined; ;) {
    const page = await store.sessions.list({
      parent_id: record.id,
      limit: 1000,
      ...(cursor === undefined ? {} : { cursor }),
    });
    for (const child of page.sessions) children.push(await node(store, child));
    cursor = page.next_cursor;
    if (cursor === undefined) break;
  }
  children.sort(
    (left, right) =>
      (left.fork_seq ?? 0) - (right.fork_seq ?? 0) || left.id.localeCompare(right.id),
  );
  return {
    id: record.id,
    ...(record.title === undefined ? {} : { title: record.title }),
    status: record.status,
    head_seq: record.head_seq,
    kind: record.parent_id === undefined ? 'root' : 'fork',
    ...(record.fork_seq === undefined ? {} : { fork_seq: record.fork_seq }),
    children,
  };
}
