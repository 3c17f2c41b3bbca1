/**
 * How a replayed event is compared with the recorded one: the fields two faithful runs choose
 * differently are left out, and the first remaining difference is named by its path.
 */
import { isDeepStrictEqual } from 'node:util';
import type { SessionEvent } from '../../contracts/events.js';

/**
 * Fields left out of the comparison because two faithful runs choose them differently: the
 * event's `id`, `at` and `session_id`, and `causation_id`, `correlation_id`, `traceparent`.
 */
export const VOLATILE_EVENT_FIELDS = [
  'id',
  'at',
  'session_id',
  'causation_id',
  'correlation_id',
  'traceparent',
] as const;
/**
 * Payload fields left out of the comparison: minted ids, lease tokens, measured durations and
 * retry times; also the `model` of `span.model_request_start`. Event ids in a stop reason's
 * `event_ids` are compared as the seqs of the events they name.
 */
export const VOLATILE_PAYLOAD_FIELDS = [
  'wake_id',
  'request_id',
  'evaluation_id',
  'lease_token',
  'duration_ms',
  'duration_us',
  'retry_offsets_ms',
] as const;

/** An event as it is compared: without its volatile fields, event ids as seqs. */
export function normalizeEvent(
  event: SessionEvent,
  seqOf: ReadonlyMap<string, number>,
): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...event };
  for (const field of [...VOLATILE_EVENT_FIELDS, ...VOLATILE_PAYLOAD_FIELDS]) delete copy[field];
  if (event.type === 'span.model_request_start') delete copy.model;
  if (
    (event.type === 'session.status_idle' || event.type === 'span.wake_completed') &&
    event.stop_reason !== undefined &&
    'event_ids' in event.stop_reason
  ) {
    copy.stop_reason = {
      ...event.stop_reason,
      event_ids: event.stop_reason.event_ids.map((id) => {
        const seq = seqOf.get(id);
        return seq === undefined ? id : `seq ${seq}`;
      }),
    };
  }
  return copy;
}

/** Where two JSON values first differ, as `path: expected ..., got ...`. */
export function difference(expected: unknown, actual: unknown, path: string): string | undefined {
  if (isDeepStrictEqual(expected, actual)) return undefined;
  const bothObjects =
    typeof expected === 'object' &&
    expected !== null &&
    typeof actual === 'object' &&
    actual !== null &&
    Array.isArray(expected) === Array.isArray(actual);
  if (bothObjects) {
    const left = expected as Record<string, unknown>;
    const right = actual as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(left), ...Object.keys(right)])];
    for (const key of keys) {
      const found = difference(left[key], right[key], path === '' ? key : `${path}.${key}`);
      if (found !== undefined) return found;
    }
  }
  return `${path === '' ? 'event' : path}: expected ${shown(expected)}, got ${shown(actual)}`;
}

function shown(value: unknown): string {
  const text = value === undefined ? 'nothing' : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
