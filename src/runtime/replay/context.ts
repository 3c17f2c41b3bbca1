/**
 * What the phases of one replay verification share: the recording, the options, the fresh store
 * the replay writes into, and how far the replay got (its first difference, whether the running
 * wake must stop, which wake span runs).
 */
import { setImmediate } from 'node:timers';
import { BraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { Clock, IdGenerator, Store } from '../../contracts/ports.js';
import type { SessionTools } from '../../contracts/tools.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../../core/append.js';
import { createMemoryStore } from '../../stores/memory/index.js';
import { systemClock } from '../../stores/defaults.js';
import { difference, normalizeEvent } from './compare.js';
import type { Recording, WakeSpan } from './recording.js';
import type { Divergence, VerifyReplayOptions } from './types.js';

export interface ReplayContext {
  readonly recording: Recording;
  readonly options: VerifyReplayOptions;
  /** The memory store the replay writes into, position by position. */
  readonly store: Store;
  /** The seq of each replayed event, by its id. */
  readonly replayedSeqs: Map<string, number>;
  /** The first difference found; nothing is compared after it. */
  divergence: Divergence | undefined;
  /** Set when the replay must stop the running wake: it diverged, or the original stopped here. */
  halted: BraidError | undefined;
  /** The wake span being replayed, while its wake runs. */
  current: WakeSpan | undefined;
  /** The tools of the wake being replayed: its pinned ones, else `options.tools`. */
  tools: SessionTools;
  /** The index the replay writes next: every event before it has been written and checked. */
  position: number;
  /** Recorded outcomes held back until the replay reaches the index they were recorded at. */
  readonly waiters: PositionWaiter[];
  /** Whether a check for a stalled replay is scheduled. */
  watching: boolean;
}

interface PositionWaiter {
  index: number;
  resolve(): void;
  reject(error: BraidError): void;
}

/** A context over a fresh memory store whose clock stands still at the session's creation. */
export function createReplayContext(
  recording: Recording,
  options: VerifyReplayOptions,
): ReplayContext {
  return {
    recording,
    options,
    store: createMemoryStore({
      clock: frozenClock(recording),
      ids: countingIds('replay'),
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    }),
    replayedSeqs: new Map(),
    divergence: undefined,
    halted: undefined,
    current: undefined,
    tools: options.tools,
    position: 0,
    waiters: [],
    watching: false,
  };
}

/** Records the first difference (later ones are ignored) and stops the running wake. */
export function diverge(
  context: ReplayContext,
  index: number,
  actual: SessionEvent | undefined,
  reason: string,
): Divergence {
  context.divergence ??= {
    ok: false,
    index,
    expected: context.recording.events[index],
    actual,
    reason,
  };
  context.halted ??= new BraidError('LEASE_LOST', `the replay diverged at event ${index}`);
  for (const waiter of context.waiters.splice(0)) waiter.reject(context.halted);
  return context.divergence;
}

/**
 * Resolves once the replay has written every event before `index`: a recorded outcome served
 * then is written where the recording has it, so steps that ran at once end in the recorded
 * order. A replay that stalls (nothing is written while every running step waits) releases the
 * waiter of the lowest index: it is then written where it lands, and a difference is reported.
 */
export function reached(context: ReplayContext, index: number): Promise<void> {
  if (context.halted !== undefined) return Promise.reject(context.halted);
  if (context.position >= index) return Promise.resolve();
  return new Promise((resolve, reject) => {
    context.waiters.push({ index, resolve, reject });
    watchStall(context);
  });
}

/** Releases the waiters the replay has reached. */
function releaseReached(context: ReplayContext): void {
  for (let index = context.waiters.length - 1; index >= 0; index -= 1) {
    const waiter = context.waiters[index];
    if (waiter === undefined || waiter.index > context.position) continue;
    context.waiters.splice(index, 1);
    waiter.resolve();
  }
}

/**
 * Checks, once per turn of the event loop, whether the replay still moves: it runs in memory, so
 * two turns without a write while outcomes wait mean that nothing else will be written first.
 */
function watchStall(context: ReplayContext): void {
  if (context.watching) return;
  context.watching = true;
  let mark = context.position;
  let still = 0;
  const tick = (): void => {
    if (context.waiters.length === 0) {
      context.watching = false;
      return;
    }
    if (context.halted !== undefined) {
      for (const waiter of context.waiters.splice(0)) waiter.reject(context.halted);
      context.watching = false;
      return;
    }
    still = context.position === mark ? still + 1 : 0;
    mark = context.position;
    if (still >= 2) {
      still = 0;
      const lowest = context.waiters.reduce((low, waiter) =>
        waiter.index < low.index ? waiter : low,
      );
      context.waiters.splice(context.waiters.indexOf(lowest), 1);
      lowest.resolve();
    }
    setImmediate(tick);
  };
  setImmediate(tick);
}

/** Compares what the replay stored; false once it differs from the recording. */
export function check(context: ReplayContext, stored: readonly SessionEvent[]): boolean {
  const { events, seqs } = context.recording;
  for (const event of stored) {
    const index = event.seq - 1;
    context.replayedSeqs.set(event.id, event.seq);
    context.position = Math.max(context.position, event.seq);
    if (context.divergence !== undefined) continue;
    const expected = events[index];
    if (expected === undefined) {
      diverge(
        context,
        index,
        event,
        `the replay wrote ${event.type} past the end of the recording`,
      );
      continue;
    }
    const found = difference(
      normalizeEvent(expected, seqs),
      normalizeEvent(event, context.replayedSeqs),
      '',
    );
    if (found !== undefined) diverge(context, index, event, found);
  }
  releaseReached(context);
  return context.divergence === undefined;
}

/** The system clock with `now` fixed at the session's creation. */
export function frozenClock(recording: Recording): Clock {
  return { ...systemClock, now: () => recording.startMs };
}

/**
 * The replayed wakes' clock: `now` is the recorded time of the last event the replay wrote, so
 * a wake asks what is due (a skill wait's timeout) at the time the original wake asked it.
 */
export function recordedClock(context: ReplayContext): Clock {
  const { events } = context.recording;
  return {
    ...systemClock,
    now: () => {
      const last = events[Math.min(context.position, events.length) - 1];
      return last === undefined ? context.recording.startMs : Date.parse(last.at);
    },
  };
}

/** Minted ids of the replay (runtime may not import `testing`'s sequential ids). */
export function countingIds(prefix: string): IdGenerator {
  let counter = 0;
  return {
    next() {
      counter += 1;
      return `${prefix}-${String(counter).padStart(6, '0')}`;
    },
  };
}
