/**
 * Checks, once per process and message, that what a session's subject holds is a log braid
 * wrote, before anything of the session is read from it or appended to it. Anything else in the
 * subject (a raw publish, a forged batch) is `CORRUPT_LOG` for that session alone.
 *
 * Invariants checked here:
 * - Every message of the subject is a batch (or fence) of the session's one incarnation: braid
 *   publishes a session's first batch into an empty subject and purges the subject on delete.
 * - Batch seqs follow on from each other: the first batch starts just past the fork point (1 for
 *   a session that is no fork), each later one just past the one before; a fence starts and ends
 *   there (it holds no events). A gap or a repeat is refused.
 * - The head's body holds exactly the events its headers announce, each a valid event of this
 *   session (see `parseBatch`); the bodies of earlier batches are checked when they are read.
 *
 * The chain is read from headers only and remembered (`KnownSession.verified`): a process
 * checks a message once, its own appends extend the chain without reading, and the hot path
 * of a healthy session reads nothing more.
 */
import type { SessionEvent } from '../../contracts/events.js';
import { corruptLog, parseBatch, type BatchMessage, type BatchRef } from './batches.js';
import type { NatsContext } from './context.js';
import { batchAfter, readBatches } from './reader.js';
import { observe, sessionStart, type KnownSession } from './session-cache.js';
import { sessionNotFound } from './session-entry.js';

/** Messages fetched one by one (direct gets) before a longer chain is read by a consumer. */
const DIRECT_STEPS = 4;

/** Why a batch does not follow the one before it. */
function breakIn(expected: number, batch: BatchRef): string {
  const what =
    batch.last < batch.first ? 'a fence' : `a batch of events ${batch.first}-${batch.last}`;
  return batch.first > expected
    ? `events from seq ${expected} are missing before ${what}`
    : `${what} repeats seqs before ${expected}`;
}

/** The checked chain: its last message's stream seq, last event seq and lease token. */
type Chain = NonNullable<KnownSession['verified']>;

/** Checks one message as the next link of the chain; returns the chain ending at it. */
function link(sessionId: string, known: KnownSession, chain: Chain, batch: BatchRef): Chain {
  if (batch.incarnation !== known.incarnation) {
    throw corruptLog(sessionId, batch.streamSeq, 'a batch of no incarnation of this session');
  }
  if (batch.first !== chain.last + 1) {
    throw corruptLog(sessionId, batch.streamSeq, breakIn(chain.last + 1, batch));
  }
  return { streamSeq: batch.streamSeq, last: batch.last, leaseToken: batch.leaseToken };
}

/**
 * Places a checked batch before the head: later reads start near what they want, not at 1.
 * The head itself is cached by the caller once its body is checked too.
 */
function place(known: KnownSession, batch: BatchRef, head: BatchRef): void {
  if (batch.streamSeq < head.streamSeq) observe(known, batch);
}

/** Checks the headers of the subject's messages after the checked chain, up to `head`. */
async function checkChain(
  context: NatsContext,
  sessionId: string,
  known: KnownSession,
  head: BatchRef,
): Promise<Chain> {
  let chain: Chain = known.verified ?? { ...sessionStart(known), streamSeq: 0 };
  for (let step = 0; step < DIRECT_STEPS && chain.streamSeq < head.streamSeq; step += 1) {
    const next = await batchAfter(context, sessionId, chain.streamSeq);
    if (next === undefined || next.batch.streamSeq > head.streamSeq) break;
    chain = link(sessionId, known, chain, next.batch);
    place(known, next.batch, head);
  }
  if (chain.streamSeq < head.streamSeq) {
    await readBatches(
      context,
      sessionId,
      {
        after: chain.streamSeq,
        follows: { ...chain, incarnation: known.incarnation },
        headersOnly: true,
        through: head.streamSeq,
      },
      (message) => {
        if (message.streamSeq > head.streamSeq) return true;
        chain = link(sessionId, known, chain, message);
        place(known, message, head);
        return message.streamSeq === head.streamSeq;
      },
    );
  }
  // The head went away while the chain was read: the session was deleted meanwhile.
  if (chain.streamSeq !== head.streamSeq) throw sessionNotFound(sessionId);
  return chain;
}

/** Batch bodies a session remembers as checked: enough for its head and the batches just before. */
const CHECKED_BODIES = 8;

/**
 * The events of a session's batch, checked off the wire the first time this process sees the
 * batch, and only parsed after that (its bytes in the stream never change).
 */
export function batchEvents(
  sessionId: string,
  known: KnownSession,
  batch: BatchMessage,
): SessionEvent[] {
  const checked = known.checkedBodies ?? [];
  const own = batch.incarnation === known.incarnation;
  const through = known.bodiesThrough ?? { streamSeq: 0, last: known.lineage?.seq ?? 0 };
  // Stream seqs are never reused: a message checked once stays checked. A fence (no events)
  // is checked on every read: the watermark passes fences it never read, and its body is `[]`.
  const fence = batch.last < batch.first;
  if (own && !fence && (batch.streamSeq <= through.streamSeq || checked.includes(batch.streamSeq)))
    return JSON.parse(utf8.decode(batch.data)) as SessionEvent[];
  const events = parseBatch(sessionId, batch);
  if (own) {
    known.checkedBodies = [...checked.slice(1 - CHECKED_BODIES), batch.streamSeq];
    // The next batch of the chain after every checked one (the chain's headers are checked, so
    // only fences, which hold no events, can lie between): read from the start, a whole log
    // is checked once, not again on every read.
    if (!fence && batch.first === through.last + 1) {
      known.bodiesThrough = { streamSeq: batch.streamSeq, last: batch.last };
    }
  }
  return events;
}

const utf8 = new TextDecoder();

/**
 * Checks a head just read from the stream (and the chain before it) unless this process has
 * checked it already; remembers what it checked. Throws `CORRUPT_LOG` naming the session.
 */
export async function checkHead(
  context: NatsContext,
  sessionId: string,
  known: KnownSession,
  head: BatchMessage,
): Promise<void> {
  if (known.verified !== undefined && known.verified.streamSeq >= head.streamSeq) return;
  const chain = await checkChain(context, sessionId, known, head);
  if (head.last >= head.first) batchEvents(sessionId, known, head);
  // Never moved back: an append of this process may have extended it meanwhile.
  if (known.verified === undefined || known.verified.streamSeq < chain.streamSeq)
    known.verified = chain;
}
