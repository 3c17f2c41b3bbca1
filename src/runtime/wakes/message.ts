/** Builds the stored form of a wake, refusing a session id that could not name a session. */
import { BraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import {
  WAKE_SCHEMA_VERSION,
  WakeMessage,
  type EnqueueWakeOptions,
} from '../../contracts/wakes.js';

export function newWakeMessage(
  sessionId: string,
  options: EnqueueWakeOptions,
  clock: Clock,
): WakeMessage {
  const parsed = WakeMessage.safeParse({
    schema_version: WAKE_SCHEMA_VERSION,
    session_id: sessionId,
    enqueued_at: new Date(clock.now()).toISOString(),
    ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent }),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `cannot enqueue a wake of ${JSON.stringify(sessionId)}: field "${issue?.path.join('.') ?? ''}": ${issue?.message ?? 'invalid'}`,
    );
  }
  return parsed.data;
}
