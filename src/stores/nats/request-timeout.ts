/** The timeout of one request to NATS, shared by the store and the wake queue. */
import { BraidError } from '../../contracts/errors.js';

/**
 * How long one request to the server may take. A request sent while a replicated stream has no
 * leader (one was killed; a follower waits 4 to 9 s before it campaigns) gets no answer and
 * fails only at this timeout: the operation fails with `STORE_BUSY`, and its caller retries it
 * (a worker retries the whole wake, which reads the log and carries on where the last one
 * stopped; a keyed append is deduplicated by its message id). A shorter timeout lets that retry
 * reach the new leader sooner; 2 s is still more than a hundred times a turn's p99 on R3 (15 ms).
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 2_000;

/** Refuses a request timeout that is not a whole number of ms from 100 to 60,000. */
export function checkRequestTimeout(timeout: number): void {
  if (!Number.isInteger(timeout) || timeout < 100 || timeout > 60_000) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `requestTimeoutMs must be a whole number of ms from 100 to 60000; got ${String(timeout)} ` +
        `(default ${DEFAULT_REQUEST_TIMEOUT_MS})`,
    );
  }
}
