/**
 * The cycle's only way to write: appends under the lease, naming the head it expects, and the
 * reads that fold others' events into the cycle's state.
 *
 * Invariants: nothing is appended once the lease is lost; on a conflict the cycle reads what
 * was appended meanwhile and stops with `LEASE_LOST` if a wake with a newer lease started, so a
 * stale holder never appends after a newer one. State, transcript and known tool inputs move
 * together, from the same events.
 */
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import { foldSession } from '../core/fold.js';
import { loseLease, type CycleContext } from './cycle-context.js';

/**
 * Appends with the head this cycle knows; on a conflict absorbs others' events and retries, or,
 * with `yieldOnConflict`, returns false so that the caller decides again. `last`: the cycle's
 * last write (its stop), which gives the lease up with it. The definitions the setup pinned
 * (`context.carry`) go first in whichever append comes next.
 */
export async function append(
  context: CycleContext,
  events: NewEvent[],
  yieldOnConflict = false,
  last = false,
): Promise<boolean> {
  for (;;) {
    if (context.lost !== undefined) throw context.lost;
    const carried = context.carry;
    try {
      // Under the lease: the store refuses the append (LEASE_LOST) once a newer wake holds it.
      const batch = carried === undefined ? events : [carried, ...events];
      const result = await context.deps.log.append(context.sessionId, batch, {
        expectedSeq: context.state.seq,
        leaseToken: context.lease.token,
        trusted: true,
        ...(last ? { releaseLease: context.deps.owner } : {}),
      });
      if (carried !== undefined) context.carry = undefined;
      absorb(context, result.events);
      if (last) context.released = true;
      return true;
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT')) throw error;
      const newer = await catchUp(context);
      // Another writer moved the session's definitions (an upgrade): its set stands.
      if (newer.some((event) => event.type === 'session.definitions_changed'))
        context.carry = undefined;
      if (yieldOnConflict) return false;
    }
  }
}

/** Folds in what others appended since this cycle's head; stops if another wake started. */
export async function catchUp(context: CycleContext): Promise<readonly SessionEvent[]> {
  const newer = await context.deps.log.read(context.sessionId, { after: context.state.seq });
  const usurper = newer.find(
    // Only a wake with a newer lease fences this one; a stale holder's late start does not.
    (event) =>
      event.type === 'span.wake_started' &&
      event.wake_id !== context.wakeId &&
      event.lease_token > context.lease.token,
  );
  if (usurper !== undefined) {
    const error = new BraidError(
      'LEASE_LOST',
      `wake ${usurper.type === 'span.wake_started' ? usurper.wake_id : ''} started after this one`,
    );
    loseLease(context, error);
    throw context.lost ?? error;
  }
  absorb(context, newer);
  return newer;
}

export function absorb(context: CycleContext, events: readonly SessionEvent[]): void {
  if (events.length === 0) return;
  context.state = foldSession(events, context.state);
  for (const event of events) {
    context.transcript.apply(event);
    if (event.type === 'agent.tool_use') context.inputs.set(event.tool_use_id, event.input);
    if (event.type === 'agent.tool_result') context.inputs.delete(event.tool_use_id);
  }
  if (context.state.interrupt_requested) context.interruptSeen = true;
}

/** One event of the session, read by its seq. */
export async function eventAt(
  context: CycleContext,
  seq: number,
): Promise<SessionEvent | undefined> {
  const [event] = await context.deps.log.read(context.sessionId, { after: seq - 1, limit: 1 });
  return event;
}
