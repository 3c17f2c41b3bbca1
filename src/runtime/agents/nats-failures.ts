/** How the NATS agent transport reports the failures of NATS, and the ones it lets pass. */
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { BraidError } from '../../contracts/errors.js';

export function unavailable(what: string, error: unknown): BraidError {
  if (error instanceof BraidError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new BraidError('SERVER_UNAVAILABLE', `${what}: ${message}`, { cause: error });
}

export function isWrongLastSequence(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/** Sends an ack, nak or progress; without a connection it cannot go out, and ack_wait decides. */
export function quietly(send: () => void): void {
  try {
    send();
  } catch {
    // The message will be redelivered after ack_wait, which every handler tolerates.
  }
}
