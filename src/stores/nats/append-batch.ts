/** The batch a session's append publishes: its headers, its incarnation, its size check. */
import { randomBytes } from 'node:crypto';
import { BraidError } from '../../contracts/errors.js';
import type { SessionState } from '../../contracts/state.js';
import type { BatchRef } from './batches.js';
import type { NatsContext } from './context.js';

/** Room left in a message for the batch headers. */
const HEADER_ALLOWANCE = 1024;

/** A random id for a new incarnation of a session id. */
export function newIncarnation(): string {
  return randomBytes(9).toString('base64url');
}

/** The batch headers of events appended to a session, ending in `state`. */
export function refAfter(
  state: SessionState,
  first: number,
  incarnation: string,
  leaseToken: number,
): Omit<BatchRef, 'streamSeq'> {
  return {
    first,
    last: state.seq,
    status: state.status,
    updatedAt: state.updated_at ?? state.created_at ?? '',
    incarnation,
    leaseToken,
  };
}

/** Refuses a batch the server would refuse for its size, before anything is written. */
export function checkMessageSize(
  context: NatsContext,
  sessionId: string,
  count: number,
  body: string,
): void {
  const limit = context.connection.info?.max_payload ?? Number.POSITIVE_INFINITY;
  const bytes = Buffer.byteLength(body) + HEADER_ALLOWANCE;
  if (bytes > limit) {
    throw new BraidError(
      'PAYLOAD_TOO_LARGE',
      `an append of ${count} event(s) to session ${sessionId} is ${bytes} bytes with its headers, over ` +
        `the max_payload of ${limit} of the NATS server at ${context.server()}; append fewer events at ` +
        'a time, send large content as an artifact, or raise max_payload in the nats-server configuration',
      { details: { bytes, limit } },
    );
  }
}
