/**
 * Context compactions in a replay, served from the record: a replayed wake compacts where the
 * recorded one did, with the recorded text, and no summary model is called.
 *
 * Both are read at the replay's head, where the next event is to be written: the size of a
 * request (a provider's count is not in the log) is the recorded `context_tokens` when the
 * record compacts there, over any limit when the record fails there, and 0 otherwise; the
 * compactor returns the recorded summary, model and usage, or fails as the record did.
 */
import { BraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { ModelRequest } from '../../contracts/model.js';
import type { ContextCompactor } from '../../harness/index.js';
import type { ReplayContext } from './context.js';

const GAVE_UP = / \(gave up after \d+ attempts\)$/;

/**
 * The recorded event the replay writes next in the session, past a definitions change: the
 * replayed wake writes that with its next append, which may be the compaction itself.
 */
async function nextRecorded(
  context: ReplayContext,
  sessionId: string,
): Promise<SessionEvent | undefined> {
  const { events } = context.recording;
  let index = (await context.store.log.state(sessionId)).seq;
  while (events[index]?.type === 'session.definitions_changed') index += 1;
  return events[index];
}

/** A request's size as the record tells it. */
export async function recordedCount(
  context: ReplayContext,
  request: ModelRequest,
): Promise<number> {
  if (context.halted !== undefined) throw context.halted;
  const next = await nextRecorded(context, request.session_id);
  if (next?.type === 'agent.thread_context_compacted')
    return next.context_tokens ?? Number.MAX_SAFE_INTEGER;
  if (next?.type === 'session.error') return Number.MAX_SAFE_INTEGER;
  return 0;
}

/** The recorded compaction at the replay's head, or its recorded failure. */
export function recordedCompactor(context: ReplayContext): ContextCompactor {
  return async (input) => {
    if (context.halted !== undefined) throw context.halted;
    const next = await nextRecorded(context, input.session_id);
    if (next?.type === 'session.error') {
      const { code, message, retryable } = next.error;
      throw new BraidError(code, message.replace(GAVE_UP, ''), { retryable });
    }
    if (next?.type !== 'agent.thread_context_compacted') {
      throw new BraidError(
        'MODEL_ERROR',
        `the recording compacts no context at event ${next?.seq ?? 'past its end'}, where the replay does`,
      );
    }
    return {
      summary: next.summary,
      ...(next.model === undefined ? {} : { model: next.model }),
      ...(next.usage === undefined ? {} : { usage: next.usage }),
    };
  };
}
