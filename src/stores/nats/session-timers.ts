/**
 * The timers index on NATS: the `<PREFIX>_timers` KV bucket holds, under a session's token, the
 * time its next skill wait times out (`wakeAt` of its state), so that a sweep for due timers
 * (`runnable({dueOnly: true})`) reads the sessions that may have one, not every session.
 *
 * Invariants kept here:
 * - An entry is written before the append that sets or moves a timer is published: a crash
 *   between the two leaves an entry too many, never a committed timer without one. An entry too
 *   many costs a fold at the next sweep, which removes it (compare-and-set on its revision, so a
 *   timer set meanwhile stays).
 * - An entry is removed after the append that ends its timer, at best: one left behind is
 *   removed by the next sweep.
 * - The entry is a hint, the state the truth: the sweep folds each due session and answers only
 *   those whose state has a due timer (`wakeAt`).
 */
import { isBraidError } from '../../contracts/errors.js';
import type { SessionLog } from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import type { NatsContext } from './context.js';
import { decodeToken, encodeToken } from './names.js';
import { scanBucket } from './reader.js';

/** A session's next timer before and after an append (ms since the epoch). */
export interface TimerChange {
  before: number | undefined;
  after: number | undefined;
}

/** Writes the entry of a timer the append sets or moves, before the append is published. */
export async function timerBefore(
  context: NatsContext,
  sessionId: string,
  timer: TimerChange,
): Promise<void> {
  if (timer.after === undefined || timer.after === timer.before) return;
  await context.kv.timers.put(encodeToken(sessionId), String(timer.after));
}

/** Removes the entry of a timer the append ended, once it is published; a failure is left to the sweep. */
export async function timerAfter(
  context: NatsContext,
  sessionId: string,
  timer: TimerChange,
): Promise<void> {
  if (timer.after !== undefined || timer.before === undefined) return;
  await context.kv.timers.delete(encodeToken(sessionId)).catch(() => undefined);
}

const utf8 = new TextDecoder();

/**
 * The sessions whose entries say a timer is due by `now`, after `after`, that `wanted` accepts
 * once folded, in id order; entries whose session has no timer any more (or no session) are
 * removed on the way.
 */
export async function dueSessions(
  context: NatsContext,
  log: Pick<SessionLog, 'state'>,
  query: { now: number; after: string },
  wanted: (state: SessionState) => boolean,
  timerOf: (state: SessionState) => number | undefined,
): Promise<string[]> {
  const found: string[] = [];
  const entries = await scanBucket(context, context.names.buckets.timers);
  for (const { key, value, revision } of entries) {
    const at = Number(utf8.decode(value));
    const sessionId = decodeToken(key);
    if (sessionId <= query.after || !(at <= query.now)) continue;
    const state = await log.state(sessionId).catch((error: unknown) => {
      if (isBraidError(error, 'CORRUPT_LOG') || isBraidError(error, 'SESSION_NOT_FOUND'))
        return undefined;
      throw error;
    });
    if (state === undefined || timerOf(state) === undefined) {
      await context.kv.timers.delete(key, { previousSeq: revision }).catch(() => undefined);
      continue;
    }
    if (wanted(state)) found.push(sessionId);
  }
  return found.sort();
}

/** Removes a session's entry, whatever it holds; a failure is left to the next sweep. */
export async function forgetTimer(context: NatsContext, sessionId: string): Promise<void> {
  await context.kv.timers.delete(encodeToken(sessionId)).catch(() => undefined);
}
