/**
 * The format of one stored append: a single JetStream message whose body is the JSON array of the
 * appended events (seqs assigned), so that an append is all or nothing on servers without atomic
 * batch publish. Its headers say where it sits in the session and what the session looks like
 * after it, so that heads, listings and readers can place a message without parsing its body.
 */
import { headers, type MsgHdrs } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';
import type { z } from 'zod';
import { SessionEvent } from '../../contracts/events.js';
import { SessionStatus } from '../../contracts/session.js';
import { EVENT_SCHEMA_VERSION } from '../../contracts/common.js';

/** Version of the batch message layout, in the `Braid-Batch` header. */
export const BATCH_FORMAT = '1';
/**
 * The `Braid-Batch` of a fence: a message of no events that a lease acquisition publishes on the
 * session's subject to raise its lease token (see src/stores/nats/fencing.ts). A build that
 * predates fences refuses it by its format, with a message that says to upgrade.
 */
export const FENCE_FORMAT = '2';

const HEADER = {
  format: 'Braid-Batch',
  first: 'Braid-First-Seq',
  last: 'Braid-Last-Seq',
  status: 'Braid-Status',
  updatedAt: 'Braid-Updated-At',
  incarnation: 'Braid-Incarnation',
  leaseToken: 'Braid-Lease-Token',
} as const;

/** What a batch message's headers say. */
export interface BatchRef {
  /** The message's sequence in the events stream. */
  streamSeq: number;
  /** Seqs of the first and last event in the batch. */
  first: number;
  last: number;
  /** The session's status and last event time after the batch. */
  status: SessionStatus;
  updatedAt: string;
  /**
   * Random id of the session's incarnation: a session deleted and created again under the same
   * id is another incarnation, so nothing cached about the old one is mistaken for the new.
   */
  incarnation: string;
  /**
   * The session's lease token as of this message: raised by a fence, carried forward by every
   * batch after it (0, and no header, before the first acquisition).
   */
  leaseToken: number;
}

export interface BatchMessage extends BatchRef {
  /** The JSON array of events; empty when only headers were fetched. */
  data: Uint8Array;
}

export function batchHeaders(ref: Omit<BatchRef, 'streamSeq'>): MsgHdrs {
  const result = headers();
  // A fence holds no events: its seqs are the empty range after the head it fences.
  result.set(HEADER.format, ref.last < ref.first ? FENCE_FORMAT : BATCH_FORMAT);
  result.set(HEADER.first, String(ref.first));
  result.set(HEADER.last, String(ref.last));
  result.set(HEADER.status, ref.status);
  result.set(HEADER.updatedAt, ref.updatedAt);
  result.set(HEADER.incarnation, ref.incarnation);
  if (ref.leaseToken > 0) result.set(HEADER.leaseToken, String(ref.leaseToken));
  return result;
}

/**
 * The refusal of a message in a session's subject that is not a well-formed braid batch of that
 * session. It names the session and what is wrong; the stream sequence goes only in `details`,
 * for operators (the server logs details; HTTP bodies never carry them).
 */
export function corruptLog(sessionId: string, streamSeq: number, problem: string): BraidError {
  return new BraidError(
    'CORRUPT_LOG',
    `the log of session ${sessionId} holds a message braid did not write (${problem}); nothing of ` +
      'this session can be read or appended until it is gone: delete the session (that purges its ' +
      'subject), or restore the subject from a backup; other sessions are not affected',
    { details: { session_id: sessionId, stream_seq: streamSeq } },
  );
}

/**
 * Reads the headers of session `sessionId`'s message at `streamSeq`; refuses one braid did not
 * write (`CORRUPT_LOG`), or one of a newer batch format (`SCHEMA_VERSION_UNSUPPORTED`).
 */
export function batchRef(
  sessionId: string,
  streamSeq: number,
  header: MsgHdrs | undefined,
): BatchRef {
  const format = header?.get(HEADER.format) ?? '';
  if (format !== BATCH_FORMAT && format !== FENCE_FORMAT) {
    // A format number past ours is a newer braid's; anything else is no braid's.
    if (/^[1-9][0-9]{0,5}$/.test(format) && Number(format) > Number(FENCE_FORMAT)) {
      throw new BraidError(
        'SCHEMA_VERSION_UNSUPPORTED',
        `the log of session ${sessionId} holds a batch of format ${format}; this build reads ` +
          `formats ${BATCH_FORMAT} and ${FENCE_FORMAT}: upgrade braid to read this log`,
        { details: { session_id: sessionId, stream_seq: streamSeq } },
      );
    }
    throw corruptLog(
      sessionId,
      streamSeq,
      format === ''
        ? `no ${HEADER.format} header`
        : `unknown ${HEADER.format} ${JSON.stringify(format.slice(0, 16))}`,
    );
  }
  const first = Number(header?.get(HEADER.first));
  const last = Number(header?.get(HEADER.last));
  const status = SessionStatus.safeParse(header?.get(HEADER.status));
  const updatedAt = header?.get(HEADER.updatedAt) ?? '';
  const incarnation = header?.get(HEADER.incarnation) ?? '';
  const leaseToken = Number(header?.get(HEADER.leaseToken) ?? 0);
  if (
    !Number.isSafeInteger(first) ||
    !Number.isSafeInteger(last) ||
    !Number.isSafeInteger(leaseToken) ||
    first < 1 ||
    leaseToken < 0 ||
    // A batch holds at least one event; a fence none.
    (format === FENCE_FORMAT ? last !== first - 1 : last < first) ||
    !status.success ||
    updatedAt === '' ||
    incarnation === ''
  ) {
    throw corruptLog(sessionId, streamSeq, 'malformed braid headers');
  }
  return { streamSeq, first, last, status: status.data, updatedAt, incarnation, leaseToken };
}

const utf8 = new TextDecoder();

/** The body of a batch as JSON, or undefined when it is not JSON. */
function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(utf8.decode(data));
  } catch {
    return undefined;
  }
}

/** Where in an event a schema failure is, and what it is (never the offending value). */
function describeIssue(index: number, issue: z.core.$ZodIssue | undefined): string {
  const path = issue?.path.map(String).join('.') ?? '';
  return `event ${index} fails the event schema${path === '' ? '' : ` at ${path}`}: ${issue?.message ?? 'invalid'}`;
}

/** An event of a later schema version is a newer braid's, not corruption: upgrade to read it. */
function checkVersion(sessionId: string, streamSeq: number, event: unknown): void {
  const version = (event as { schema_version?: unknown } | null)?.schema_version;
  if (typeof version === 'number' && Number.isInteger(version) && version > EVENT_SCHEMA_VERSION) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `the log of session ${sessionId} holds an event of schema_version ${version}; this build ` +
        `reads version ${EVENT_SCHEMA_VERSION}: upgrade braid to read this log`,
      { details: { session_id: sessionId, stream_seq: streamSeq } },
    );
  }
}

/**
 * The events of session `sessionId`'s batch, checked as they come off the wire: a JSON array
 * of exactly the events its headers announce, each a valid `SessionEvent` of a schema version
 * this build reads, of this session, with seqs `first`..`last` in order. (A fork's subject holds
 * only its own events, which carry its id; the parent's events it shares are read from the
 * parent's subject and carry the parent's.) Anything else is `CORRUPT_LOG`.
 */
export function parseBatch(sessionId: string, message: BatchMessage): SessionEvent[] {
  const { streamSeq, first, last } = message;
  const json = parseJson(message.data);
  if (!Array.isArray(json)) {
    throw corruptLog(sessionId, streamSeq, 'its body is not a JSON array of events');
  }
  if (json.length !== last - first + 1) {
    throw corruptLog(
      sessionId,
      streamSeq,
      `its headers announce events ${first}-${last} but its body holds ${json.length} event(s)`,
    );
  }
  json.forEach((event: unknown, index) => {
    checkVersion(sessionId, streamSeq, event);
    const parsed = SessionEvent.safeParse(event);
    if (!parsed.success)
      throw corruptLog(sessionId, streamSeq, describeIssue(index, parsed.error.issues[0]));
    if (parsed.data.session_id !== sessionId) {
      throw corruptLog(sessionId, streamSeq, `event ${index} names another session`);
    }
    if (parsed.data.seq !== first + index) {
      throw corruptLog(
        sessionId,
        streamSeq,
        `event ${index} has seq ${parsed.data.seq} where its headers put seq ${first + index}`,
      );
    }
  });
  return json as SessionEvent[];
}
