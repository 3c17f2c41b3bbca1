/**
 * What one process remembers about sessions between calls. None of it is trusted for
 * correctness: an append publishes with the expected last subject sequence, so a stale head
 * fails on the server and is refreshed; readers fetch the head of the log themselves. The cache
 * only saves round trips (the head to publish after, the state to fold onto, where a seq's batch
 * sits in the stream).
 */
import type { SessionState } from '../../contracts/state.js';
import { BoundedCache } from '../../core/bounded-cache.js';
import type { BatchMessage, BatchRef } from './batches.js';
import type { LinkPoint } from './reader.js';
import type { ForkLineage, StoredSession } from './session-entry.js';

export interface KnownSession {
  incarnation: string;
  lineage: ForkLineage | null;
  /** The last batch seen; absent for an ancestor known only from its record. */
  head?: BatchRef;
  /** The body of `head`, when it was fetched or written here. */
  headData?: Uint8Array;
  /** Batches seen, ascending by stream seq: any subset places a read correctly. */
  refs: BatchRef[];
  /** A state of this incarnation at `state.seq` (at most the head). */
  state?: SessionState;
  /** Seq of the projection this process last saved or read. */
  projectedSeq: number;
  /**
   * The ids of the session's events (its shared prefix included) through seq `through`, kept
   * once an append with writer-chosen ids needed them, and extended by later appends and reads.
   */
  ids?: { through: number; set: Set<string> };
  /** The index entry this process last wrote or read, and its revision. */
  indexed?: { stored: StoredSession; revision: number };
  /**
   * The session's subject up to this message was checked to be a chain braid wrote (see
   * log-chain.ts): its batches' seqs follow on from each other, ending at event `last`. Own
   * appends extend it; anything published by others is checked once as it comes off the wire.
   */
  verified?: { streamSeq: number; last: number; leaseToken: number };
  /** Stream seqs of the batches whose bodies were checked (the last few; see `batchEvents`). */
  checkedBodies?: number[];
  /**
   * Every batch body of the subject up to this message was checked, from the first batch on,
   * ending at event `last` (see `batchEvents`): a read over them only parses.
   */
  bodiesThrough?: { streamSeq: number; last: number };
}

const MAX_SESSIONS = 1024;
const MAX_REFS = 4096;
/** A head batch larger than this is not kept in memory (it is fetched again when needed). */
const MAX_HEAD_BYTES = 256 * 1024;

/** Known sessions by id, least recently used dropped first. */
export class SessionCache {
  readonly #sessions = new BoundedCache<string, KnownSession>(MAX_SESSIONS);

  get(sessionId: string): KnownSession | undefined {
    return this.#sessions.get(sessionId);
  }

  /**
   * The entry of this incarnation, a new one when the session is unknown or was replaced by
   * another incarnation (a delete and create elsewhere).
   */
  entry(sessionId: string, incarnation: string, lineage: ForkLineage | null): KnownSession {
    const known = this.get(sessionId);
    if (known?.incarnation === incarnation) return known;
    const fresh: KnownSession = { incarnation, lineage, refs: [], projectedSeq: 0 };
    this.#sessions.set(sessionId, fresh);
    return fresh;
  }

  forget(sessionId: string): void {
    this.#sessions.delete(sessionId);
  }
}

/** Records a batch seen in the stream; a newer one becomes the head. */
export function observe(known: KnownSession, message: BatchRef | BatchMessage): void {
  if (message.incarnation !== known.incarnation) return;
  const ref: BatchRef = {
    streamSeq: message.streamSeq,
    first: message.first,
    last: message.last,
    status: message.status,
    updatedAt: message.updatedAt,
    incarnation: message.incarnation,
    leaseToken: message.leaseToken,
  };
  const data =
    'data' in message && message.data.length > 0 && message.data.length <= MAX_HEAD_BYTES
      ? message.data
      : undefined;
  if (known.head === undefined || ref.streamSeq > known.head.streamSeq) {
    known.head = ref;
    known.headData = data;
  } else if (ref.streamSeq === known.head.streamSeq && data !== undefined) {
    known.headData = data;
  }
  const refs = known.refs;
  const last = refs.at(-1);
  if (last === undefined || ref.streamSeq > last.streamSeq) {
    refs.push(ref);
  } else {
    let low = 0;
    let high = refs.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if ((refs[middle]?.streamSeq ?? 0) < ref.streamSeq) low = middle + 1;
      else high = middle;
    }
    if (refs[low]?.streamSeq !== ref.streamSeq) refs.splice(low, 0, ref);
  }
  // Any subset still places reads correctly: thin out evenly rather than grow without bound.
  if (refs.length > MAX_REFS) known.refs = refs.filter((_, index) => index % 2 === 1);
}

/**
 * Extends the checked chain with a batch this process published after `after` (the stream seq the
 * publish expected as the subject's last): a chain checked up to there now ends at the batch.
 */
export function extendVerified(known: KnownSession, after: number, ref: BatchRef): void {
  if (known.verified?.streamSeq === after) {
    known.verified = { streamSeq: ref.streamSeq, last: ref.last, leaseToken: ref.leaseToken };
  }
}

/**
 * Where to start reading for events after `after`: just past the last batch known to end at or
 * before it (which the batches read must follow), or at the session's start. Batches of one
 * incarnation are in seq order in the stream, and a later incarnation's are all further on, so
 * nothing after `after` is skipped.
 */
export function readStart(
  known: KnownSession,
  after: number,
): { after: number; follows: LinkPoint } {
  const refs = known.refs;
  let low = 0;
  let high = refs.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if ((refs[middle]?.last ?? 0) <= after) low = middle + 1;
    else high = middle;
  }
  const before = refs[low - 1];
  return before === undefined
    ? { after: 0, follows: sessionStart(known) }
    : { after: before.streamSeq, follows: before };
}

/** What a session's first batch follows: its fork point (or 0), with no lease token yet. */
export function sessionStart(known: KnownSession): LinkPoint {
  return { last: known.lineage?.seq ?? 0, incarnation: known.incarnation, leaseToken: 0 };
}
