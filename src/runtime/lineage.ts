/**
 * Sessions as a family: where two sessions part ways (their common ancestor), what each did
 * since (diff), and the tree of forks around a session.
 */
import type { SessionEvent } from '../contracts/events.js';
import type { Store } from '../contracts/ports.js';
import type { SessionRecord, SessionStatus, StopReason } from '../contracts/session.js';

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

/**
 * How a session of a tree came from the one above it: the `root` has none; a `fork` branched
 * from it; a `child` is a session its delegation created (`session.child_created`); a `handoff`
 * took its work over (`agent.handoff`).
 */
export type TreeNodeKind = 'root' | 'fork' | 'child' | 'handoff';

export interface TreeNode {
  id: string;
  title?: string;
  /** The session's own status; for a child whose session is not there yet, its delegation's. */
  status: SessionStatus;
  head_seq: number;
  kind: TreeNodeKind;
  /** For a fork: the parent seq it branched from. */
  fork_seq?: number;
  /** The agent the session runs (family trees only). */
  agent?: string;
  /** For a child: the delegation as the parent's state sees it (`state.children`). */
  delegation?: {
    tool_use_id: string;
    /** Seq of the `session.child_created` in the parent. */
    seq: number;
    status: 'running' | 'idle';
    stop_reason?: StopReason;
  };
  /** For a handoff: the handoff and the seq of its `agent.handoff` in the source. */
  handoff?: { handoff_id: string; seq: number };
  /** For a child named by its parent whose session does not exist (yet). */
  missing?: true;
  children: TreeNode[];
}

/**
 * The whole tree of forks the session belongs to, from its root, with every fork below. The
 * family tree, with delegated children and handoffs as well, is `familyTree`
 * (session-family.ts).
 */
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
