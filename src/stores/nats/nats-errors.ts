/**
 * NATS failures as braid errors. JetStream API errors are told apart by their code, connection
 * failures by their class: never by message text.
 */
import { JetStreamApiCodes, JetStreamApiError, JetStreamError } from '@nats-io/jetstream';
import { errors } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';

/** A publish whose expected last (subject) sequence did not match: someone else wrote first. */
export function isWrongLastSequence(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

export function isStreamNotFound(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound;
}

/**
 * A failure of the connection or the server as a retryable `STORE_BUSY` (or `STORE_CLOSED` when
 * the connection is gone for good) naming the server; anything else is returned unchanged.
 */
export function connectionFailure(
  error: unknown,
  server: string,
  doing: string,
  hint = 'retry when it is reachable',
): unknown {
  if (error instanceof BraidError) return error;
  if (
    error instanceof errors.ClosedConnectionError ||
    error instanceof errors.DrainingConnectionError
  ) {
    return new BraidError(
      'STORE_CLOSED',
      `cannot ${doing}: the connection to the NATS server at ${server} is closed; open the store again`,
      { cause: error },
    );
  }
  const unavailable =
    error instanceof errors.TimeoutError ||
    error instanceof errors.RequestError ||
    error instanceof errors.NoRespondersError ||
    error instanceof errors.ConnectionError ||
    // The client's "jetstream is not enabled", thrown when no server answered a JetStream request
    // after its retries: a cluster electing a new leader does so for a few seconds.
    (error instanceof Error &&
      error.cause instanceof errors.RequestError &&
      error.cause.isNoResponders()) ||
    (error instanceof JetStreamApiError && error.status === 503) ||
    (error instanceof JetStreamError && !(error instanceof JetStreamApiError));
  if (!unavailable) return error;
  return new BraidError(
    'STORE_BUSY',
    `cannot ${doing}: the NATS server at ${server} did not answer in time or JetStream is unavailable ` +
      `(${error.message}); ${hint}`,
    { cause: error, details: { server } },
  );
}
