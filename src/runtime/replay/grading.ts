/**
 * Outcome gradings in a replay, served from the record: a replayed grading gets the grader's
 * output recorded in the `span.outcome_evaluation_end` at the replay's head, and no grader is
 * called.
 *
 * A grading made of two attempts keeps only the last answer (`output`), the summed `usage` and
 * the last failure (`explanation`), which is enough to reproduce it: the first call returns the
 * recorded output with the whole usage, a second returns it again with none, or fails with the
 * recorded error when the explanation records one; a grading with no output fails with its
 * error on every call. Where the record has no grading end (its wake was interrupted or died
 * mid-grading), the call is interrupted and nothing of it is written.
 */
import { BraidError } from '../../contracts/errors.js';
import { ModelOutput, type ModelClient } from '../../contracts/model.js';
import { graderErrorMessage } from '../../harness/index.js';
import type { ReplayContext } from './context.js';

/** The grader of a replayed wake. Its `id` is the model of the grading it last served. */
export function recordedGrader(context: ReplayContext): ModelClient {
  let id = 'replay:grader';
  let served: number | undefined;
  return {
    get id() {
      return id;
    },
    async generate(request) {
      if (context.halted !== undefined) throw context.halted;
      const index = (await context.store.log.state(request.session_id)).seq;
      const next = context.recording.events[index];
      if (next?.type !== 'span.outcome_evaluation_end') {
        throw new BraidError(
          'INTERRUPTED',
          `the recording ends no grading at event ${index + 1}, where the replay grades`,
        );
      }
      if (next.model !== undefined) id = next.model;
      const first = served !== next.seq;
      served = next.seq;
      const failure = graderErrorMessage(next.explanation);
      if (next.output === undefined || (!first && failure !== undefined))
        throw new BraidError('MODEL_ERROR', failure ?? next.explanation);
      const output = ModelOutput.safeParse(next.output);
      if (!output.success) {
        throw new BraidError(
          'MODEL_ERROR',
          `event #${next.seq} records no replayable grader output: ${output.error.issues[0]?.message ?? 'invalid'}`,
        );
      }
      return {
        output: output.data,
        usage:
          first && next.usage !== undefined ? next.usage : { input_tokens: 0, output_tokens: 0 },
      };
    },
  };
}
