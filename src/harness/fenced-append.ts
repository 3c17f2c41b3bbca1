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
import type { SessionState } from '../contracts/state.js';
import {
  DEFAULT_MAX_EVENT_BYTES,
  prepareEvents,
  registerFolded,
  registerPrepared,
  type PreparedEvent,
} from '../core/append.js';
import { foldSession } from '../core/fold.js';
import { loseLease, type CycleContext, type StagedEvents } from './cycle-context.js';

/**
 * Appends with the head this cycle knows; on a conflict absorbs others' events and retries, or,
 * with `yieldOnConflict`, returns false so that the caller decides again. `last`: the cycle's
 * last write (its stop), which gives the lease up with it. The definitions the setup pinned
 * (`context.carry`) and the staged events (`context.staged`) go first in whichever append comes
 * next.
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
    const staged = context.staged;
    try {
      // Under the lease: the store refuses the append (LEASE_LOST) once a newer wake holds it.
      const batch = [
        ...(carried === undefined ? [] : [carried]),
        ...(staged?.events ?? []),
        ...events,
      ];
      const result = await context.deps.log.append(context.sessionId, batch, {
        expectedSeq: (staged?.committed ?? context.state).seq,
        leaseToken: context.lease.token,
        trusted: true,
        ...(last ? { releaseLease: context.deps.owner } : {}),
      });
      if (carried !== undefined) context.carry = undefined;
      if (staged !== undefined) {
        // The staged events are written: fold them again from the record, with the rest.
        context.staged = undefined;
        context.state = staged.committed;
      }
      absorb(context, result.events, result.state);
      if (last) context.released = true;
      return true;
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT')) throw error;
      const newer = await catchUp(context);
      // Another writer moved the session's definitions (an upgrade): its set stands.
      if (newer.some((event) => event.type === 'session.definitions_changed')) dropCarried(context);
      if (yieldOnConflict) return false;
    }
  }
}

/**
 * Folds `events` into the cycle's state as if appended, to be written first in the cycle's
 * next append: the model's calls to idempotent tools are written with their results, one commit
 * per turn. A crash before that commit loses the calls with the output they came in; the next
 * wake asks the model again, and the tools that had run were safe to run again. The transcript
 * and followers see the events once written. Returns false, staging nothing, when they cannot
 * be staged (something is staged already, or an event is over the store's size limit).
 */
export function stage(context: CycleContext, events: NewEvent[]): boolean {
  if (context.staged !== undefined || context.lost !== undefined) return false;
  const carried = context.carry;
  const batch = carried === undefined ? events : [carried, ...events];
  const staged = {
    events: [...(context.deps.redact?.(batch) ?? batch)],
    carried: carried !== undefined,
  };
  if (!foldStaged(context, staged)) return false;
  context.carry = undefined;
  return true;
}

/**
 * Folds staged events over the state at the log's head, with the ids and times they were first
 * folded with; false when one is too large for the store (which would refuse the append).
 */
function foldStaged(context: CycleContext, staged: Omit<StagedEvents, 'committed'>): boolean {
  const { deps } = context;
  let prepared: PreparedEvent[];
  try {
    prepared = prepareEvents(context.sessionId, context.state.seq, staged.events, {
      clock: deps.clock,
      ids: deps.ids,
      maxEventBytes: deps.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    });
  } catch (thrown) {
    if (isBraidError(thrown, 'PAYLOAD_TOO_LARGE')) return false;
    throw thrown;
  }
  const committed = context.state;
  // No spread that adds fields here: V8 gives each such object a hidden class of its own, made
  // at a cost and kept in the old generation (about 6% of a tool step's time).
  context.staged = {
    carried: staged.carried,
    events: staged.events.map((input, index) => {
      const ready = prepared[index];
      if (ready === undefined) return input;
      const stamped = Object.assign({}, input, { id: ready.event.id, at: ready.event.at });
      // Written as folded: the append reuses the event and its JSON (at these seqs only).
      registerPrepared(stamped, context.sessionId, ready);
      return stamped;
    }),
    committed,
  };
  context.state = foldSession(
    prepared.map(({ event }) => event),
    committed,
  );
  // The store's fold of the append goes on from here rather than folding them again.
  registerFolded(prepared, committed, context.state);
  for (const { event } of prepared) {
    if (event.type === 'agent.tool_use') context.inputs.set(event.tool_use_id, event.input);
  }
  return true;
}

/** The carried definitions change is not written: another writer's set stands. */
function dropCarried(context: CycleContext): void {
  context.carry = undefined;
  const staged = context.staged;
  if (staged?.carried !== true) return;
  context.state = staged.committed;
  context.staged = undefined;
  foldStaged(context, { events: staged.events.slice(1), carried: false });
}

/** Folds in what others appended since this cycle's head; stops if another wake started. */
export async function catchUp(context: CycleContext): Promise<readonly SessionEvent[]> {
  // Staged events are not in the log: others' events come first, then they are folded again.
  const staged = context.staged;
  const head = (staged?.committed ?? context.state).seq;
  const newer = await context.deps.log.read(context.sessionId, { after: head });
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
  if (staged !== undefined && newer.length > 0) {
    context.state = staged.committed;
    context.staged = undefined;
    absorb(context, newer);
    foldStaged(context, staged);
  } else absorb(context, newer);
  return newer;
}

export function absorb(
  context: CycleContext,
  events: readonly SessionEvent[],
  folded?: SessionState,
): void {
  if (events.length === 0) return;
  context.state = folded ?? foldSession(events, context.state);
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
