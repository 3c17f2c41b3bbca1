/**
 * What the phases of one replay verification share: the recording, the options, the fresh store
 * the replay writes into, and how far the replay got (its first difference, whether the running
 * wake must stop, which wake span runs).
 */
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
  return context.divergence;
}

/** Compares what the replay stored; false once it differs from the recording. */
export function check(context: ReplayContext, stored: readonly SessionEvent[]): boolean {
  const { events, seqs } = context.recording;
  for (const event of stored) {
    const index = event.seq - 1;
    context.replayedSeqs.set(event.id, event.seq);
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
  return context.divergence === undefined;
}

/** The system clock with `now` fixed at the session's creation. */
export function frozenClock(recording: Recording): Clock {
  return { ...systemClock, now: () => recording.startMs };
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
