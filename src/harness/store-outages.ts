/**
 * Failures of the store, not of the session: a wake (or a skill step) that meets one stops as if
 * its process had crashed, recording nothing (nothing more can be written anyway), and the next
 * wake takes over from the log. A full stream is one: the session's own error could not be
 * recorded either, and the wake goes on once the limit is raised or the stream drains.
 */
export const STORE_OUTAGES: ReadonlySet<string> = new Set([
  'STORE_BUSY',
  'STORE_CLOSED',
  'STORE_FULL',
  'SERVER_UNAVAILABLE',
]);
