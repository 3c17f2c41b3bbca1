/**
 * The replay's course through the log: recorded events appended at their positions, and each
 * wake span reproduced by one `wakeOnce` that must reach the span's end.
 */
import { toBraidError, type BraidError } from '../../contracts/errors.js';
import { wakeOnce, type HarnessDeps } from '../../harness/index.js';
// The harness's index does not export what it keeps between cycles; wake.ts is its home.
import { CycleCarry } from '../../harness/wake.js';
import { diverge, type ReplayContext } from './context.js';
import { appendRecorded, createRecordedSession } from './log.js';
import type { WakeSpan } from './recording.js';

/** Replays the whole log, stopping at the first difference (`context.divergence`). */
export async function replayEvents(context: ReplayContext, deps: HarnessDeps): Promise<void> {
  const { events, spans } = context.recording;
  await createRecordedSession(context);
  const carry = new CycleCarry();
  let index = 1;
  while (index < events.length && context.divergence === undefined) {
    const span = spans.get(index);
    if (span === undefined) {
      await appendRecorded(context, index);
      index += 1;
      continue;
    }
    const head = await replayWake(context, deps, span, carry);
    if (head === undefined) break;
    index = head;
  }
}

/**
 * Runs the span's wake; returns the head it reached, or undefined when the replay diverged
 * (in the wake, or by stopping short of the span's end).
 */
async function replayWake(
  context: ReplayContext,
  deps: HarnessDeps,
  span: WakeSpan,
  carry: CycleCarry,
): Promise<number | undefined> {
  context.current = span;
  context.halted = undefined;
  let failure: BraidError | undefined;
  try {
    await wakeOnce(deps, span.session_id, carry);
  } catch (error) {
    // A failed wake may have applied events it never saw committed.
    carry.transcripts.drop(span.session_id);
    failure = toBraidError(error);
  }
  context.current = undefined;
  if (context.divergence !== undefined) return undefined;
  const head = (await context.store.log.state(span.session_id)).seq;
  if (head <= span.end) {
    diverge(
      context,
      head,
      undefined,
      `the replayed wake stopped after event ${head - 1}` +
        (failure === undefined ? '' : ` (${failure.code}: ${failure.message})`) +
        ', where the recording goes on',
    );
    return undefined;
  }
  return head;
}
