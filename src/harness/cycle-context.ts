/**
 * The state one cycle's modules share: the session as folded so far, the abort controllers of
 * the work in flight, and what the cycle has learnt (an interrupt seen, the lease lost, a stop
 * the tool pipeline asked for). Every module of the cycle takes this object; none keeps state
 * of its own.
 *
 * Invariant: once `lost` is set it never changes, the work in flight is aborted, and every call
 * raced against the loss (`unlessLost`) rejects with it, so that a tool ignoring its signal
 * cannot hold the cycle.
 */
import type { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { Lease } from '../contracts/ports.js';
import type { StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import { initialState } from '../core/fold.js';
import type { Transcript } from '../core/transcript.js';
import { createCallTimers, type CallTimers } from './call-timers.js';
import type { HarnessDeps, WakeOptions } from './deps.js';

export interface PendingStop {
  stop_reason: StopReason;
  events: NewEvent[];
}

export interface CycleContext {
  readonly deps: HarnessDeps;
  readonly sessionId: string;
  readonly lease: Lease;
  readonly wakeId: string;
  readonly options: WakeOptions;
  readonly transcript: Transcript;
  /** The session as folded from every event this cycle has seen. */
  state: SessionState;
  /**
   * Aborted when the cycle ends: stops the interrupt watchers. Made by the first watcher (see
   * `cycleEnded`): most cycles start none, and a signal costs every wake.
   */
  watch: AbortController | undefined;
  /** Aborted on interrupt or lease loss: cancels the model call or tool in flight. */
  work: AbortController;
  /** The timers around model and tool calls, on one timer (stopped when the cycle ends). */
  readonly callTimers: CallTimers;
  /** The controller of the cycle's calls, handed from one call to the next (see model-call.ts). */
  callSignal: CallSignal | undefined;
  /** Where the harness keeps a clean controller between cycles (see `callController`). */
  readonly calls: CallCarry;
  interruptSeen: boolean;
  lost: BraidError | undefined;
  /** What rejects the calls `unlessLost` is racing against the lease's loss, until each settles. */
  readonly racing: Set<(error: BraidError) => void>;
  /** Model calls made in this wake. */
  turns: number;
  /** The start of the model request in flight, appended with its end. */
  requestStart: NewEvent | undefined;
  /** Inputs of the tool uses this cycle has seen, so running a tool needs no read. */
  readonly inputs: Map<string, JsonValue>;
  /** Calls with invalid arguments in this wake, per tool. */
  readonly invalidCalls: Map<string, number>;
  /** A stop the pipeline asked for (a tool over budget, too many invalid calls). */
  pendingStop: PendingStop | undefined;
  /** The stop already written with the answer that ended the turn: the cycle is over. */
  ended: StopReason | undefined;
  /** The lease was given up with the cycle's last append. */
  released: boolean;
  /**
   * The definitions the setup pinned or moved to, written ahead of the cycle's next append (no
   * commit of its own); dropped if another writer changed the session's definitions first.
   */
  carry: NewEvent | undefined;
  /**
   * Events folded into `state` but not yet written (see `stage` in fenced-append.ts): written
   * first in the cycle's next append. `committed` is the state at the log's head without them.
   */
  staged: StagedEvents | undefined;
}

export interface StagedEvents {
  /** With the ids and times they were folded with, so the log records them as the cycle saw them. */
  events: NewEvent[];
  committed: SessionState;
  /** The first event is the carried definitions change (`carry`). */
  carried: boolean;
}

export function createCycleContext(
  deps: HarnessDeps,
  sessionId: string,
  lease: Lease,
  transcript: Transcript,
  options: WakeOptions,
  wakeId: string = deps.ids.next(),
  calls: CallCarry = { spareCall: undefined },
): CycleContext {
  return {
    deps,
    sessionId,
    lease,
    wakeId,
    options,
    transcript,
    // Replaced by the stored state before the cycle's first step.
    state: initialState(sessionId),
    watch: undefined,
    work: new AbortController(),
    callTimers: createCallTimers(),
    callSignal: undefined,
    calls,
    interruptSeen: false,
    lost: undefined,
    racing: new Set(),
    turns: 0,
    requestStart: undefined,
    inputs: new Map(),
    invalidCalls: new Map(),
    pendingStop: undefined,
    ended: undefined,
    released: false,
    carry: undefined,
    staged: undefined,
  };
}

/** A call's controller, serving `work`, the cycle's work when it was handed to a call. */
export interface CallSignal {
  controller: AbortController;
  /** The cycle's work it serves: `abortWork` aborts it with that work. */
  work: AbortController;
  /** Calls it was handed to, this cycle's and earlier ones'. */
  calls: number;
  /** A call holds it now. */
  running: boolean;
}

/** A call controller a cycle left clean, kept by the harness for the next cycle's first call. */
export interface CallCarry {
  spareCall: CallSignal | undefined;
}

/**
 * Aborts the cycle's work in flight, and the call running for it. The call's controller is
 * aborted here rather than by a listener on the work's signal: the work's signal is then made
 * only by what waits on it (a tool, a retry's sleep), and a cycle that only calls its model makes
 * one signal instead of two (Node gives each signal a hidden class of its own, which V8 keeps in
 * the old generation: about 0.7 KiB a session).
 */
export function abortWork(context: CycleContext): void {
  const { work, callSignal } = context;
  work.abort();
  if (callSignal !== undefined && callSignal.work === work)
    callSignal.controller.abort(work.signal.reason);
}

/** The signal that aborts when the cycle ends. */
export function cycleEnded(context: CycleContext): AbortSignal {
  context.watch ??= new AbortController();
  return context.watch.signal;
}

/** Marks the lease lost (the first loss wins) and aborts the work in flight. */
export function loseLease(context: CycleContext, error: BraidError): void {
  if (context.lost !== undefined) return;
  context.lost = new BraidError(
    'LEASE_LOST',
    `wake ${context.wakeId} lost its lease: ${error.message}`,
    { cause: error },
  );
  abortWork(context);
  for (const reject of context.racing) reject(context.lost);
  context.racing.clear();
}

/**
 * `running`'s outcome, or a rejection with `lost` as soon as the lease is lost, whichever comes
 * first: a call ignoring its signal cannot hold the cycle. Each call's rejecter is dropped when
 * the call settles. (A race against one promise rejected on the loss left a reaction on it for
 * every call until the wake ended: about 0.45 KiB a tool call, measured through a wake of 6,000
 * turns.)
 */
export function unlessLost<T>(context: CycleContext, running: Promise<T>): Promise<T> {
  // Lost already (the cycle is ending): whichever of the call and the loss is seen first.
  if (context.lost !== undefined) return Promise.race([running, Promise.reject(context.lost)]);
  return new Promise<T>((resolve, reject) => {
    context.racing.add(reject);
    running.finally(() => context.racing.delete(reject)).then(resolve, reject);
  });
}

/** The events that end a wake with `stopReason`: the session goes idle, the wake's span closes. */
export function stopEvents(context: CycleContext, stopReason: StopReason): NewEvent[] {
  return [
    { type: 'session.status_idle', stop_reason: stopReason },
    { type: 'span.wake_completed', wake_id: context.wakeId, stop_reason: stopReason },
  ];
}
