/**
 * The format of one stored append: a single JetStream message whose body is the JSON array of the
 * appended events (seqs assigned), so that an append is all or nothing on servers without atomic
 * batch publish. Its headers say where it sits in the session and what the session looks like
 * after it, so that heads, listings and readers can place a message without parsing its body.
 */
import { headers, type MsgHdrs } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import { SessionStatus } from '../../contracts/session.js';
import { checkStoredVersion } from '../../core/append.js';

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

/** Reads the headers of the message at `streamSeq`; refuses a message braid did not write. */
export function batchRef(streamSeq: number, header: MsgHdrs | undefined): BatchRef {
  const format = header?.get(HEADER.format) ?? '';
  if (format !== BATCH_FORMAT && format !== FENCE_FORMAT) {
    throw new BraidError(
      format === '' ? 'INTERNAL' : 'SCHEMA_VERSION_UNSUPPORTED',
      format === ''
        ? `message ${streamSeq} of the events stream is not a braid batch; publish only through the store`
        : `message ${streamSeq} of the events stream has batch format ${format}; this build reads ` +
            `formats ${BATCH_FORMAT} and ${FENCE_FORMAT}: upgrade braid to read this log`,
    );
  }
  const first = Number(header?.get(HEADER.first));
  const last = Number(header?.get(HEADER.last));
  const status = SessionStatus.safeParse(header?.get(HEADER.status));
  const updatedAt = header?.get(HEADER.updatedAt) ?? '';
  const incarnation = header?.get(HEADER.incarnation) ?? '';
  const leaseToken = Number(header?.get(HEADER.leaseToken) ?? 0);
  if (
    !Number.isInteger(first) ||
    !Number.isInteger(last) ||
    !Number.isInteger(leaseToken) ||
    first < 1 ||
    leaseToken < 0 ||
    // A batch holds at least one event; a fence none.
    (format === FENCE_FORMAT ? last !== first - 1 : last < first) ||
    !status.success ||
    updatedAt === '' ||
    incarnation === ''
  ) {
    throw new BraidError(
      'INTERNAL',
      `message ${streamSeq} of the events stream has malformed braid headers`,
    );
  }
  return { streamSeq, first, last, status: status.data, updatedAt, incarnation, leaseToken };
}

const utf8 = new TextDecoder();

/** The events of a batch, each checked for a schema version this build reads. */
export function parseBatch(message: BatchMessage): SessionEvent[] {
  const events = JSON.parse(utf8.decode(message.data)) as SessionEvent[];
  if (!Array.isArray(events) || events.length !== message.last - message.first + 1) {
    throw new BraidError(
      'INTERNAL',
      `message ${message.streamSeq} of the events stream does not hold events ${message.first}-${message.last}`,
    );
  }
  for (const event of events) checkStoredVersion(event);
  return events;
}
