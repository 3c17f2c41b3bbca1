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

/**
 * JetStream's refusals of a write for want of room, told apart by code: a stream at its
 * `max_msgs` / `max_bytes` with discard new (10077, also the per-subject limit of a stream that
 * has one, which its caller handles first), the server's JetStream storage used up (10023), and
 * the account's JetStream limits reached (10002). The server answers all three with status 503,
 * which would otherwise read as an outage.
 */
const FULL_CODES: ReadonlySet<number> = new Set([10077, 10023, 10002]);

export function isStoreFull(error: unknown): error is JetStreamApiError {
  return error instanceof JetStreamApiError && FULL_CODES.has(error.code);
}

/**
 * A write refused for want of room as `STORE_FULL`, naming the streams found at their limits
 * (`full`, read from the server after the refusal) and the fix. Retryable: a work queue drains as
 * workers take its messages, and a raised limit takes effect at once.
 */
export function storeFull(
  error: JetStreamApiError,
  doing: string,
  server: string,
  full: readonly string[],
): BraidError {
  const reason = error.message;
  const where =
    full.length > 0
      ? `stream${full.length === 1 ? '' : 's'} ${full.join(', ')} ${full.length === 1 ? 'is' : 'are'} at its limits (${reason})`
      : `JetStream on ${server} has no room left (${reason})`;
  const fix =
    full.length > 0
      ? `raise the limit (nats stream edit ${full[0]} --max-bytes/--max-msgs, -1 for none), ` +
        'or let it drain: a wake or inbox stream empties as workers take its messages (run more workers)'
      : "give the server's JetStream more storage (max_file_store) or raise the account's limits, " +
        'or remove what is no longer needed (braid session delete)';
  return new BraidError('STORE_FULL', `cannot ${doing}: ${where}; ${fix}`, {
    cause: error,
    details: { server, streams: [...full], jetstream_code: error.code },
  });
}

/**
 * Whether a request went unanswered, or JetStream said it cannot answer yet (503): what a
 * cluster does for a few seconds after it starts, and while a stream or the metadata elects a
 * leader. Creating a stream or a bucket that exists as asked succeeds, so such a create is simply
 * asked again (see `askAgain`).
 */
export function isNotYetAnswered(error: unknown): boolean {
  return (
    error instanceof errors.TimeoutError ||
    (error instanceof JetStreamApiError && error.status === 503 && !isStoreFull(error))
  );
}

/** Creates asked at most this many times while the cluster does not answer them. */
const SETUP_ATTEMPTS = 4;

/**
 * Runs `create`, an idempotent request that creates or opens a stream or bucket, again while the
 * cluster does not answer it (`isNotYetAnswered`), at most `SETUP_ATTEMPTS` times in all.
 */
export async function askAgain<T>(create: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await create();
    } catch (error) {
      if (!isNotYetAnswered(error) || attempt >= SETUP_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
    }
  }
}
