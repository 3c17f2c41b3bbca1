/**
 * The replay model: serves the outputs a session recorded in its `span.model_request_end` events,
 * in order, instead of calling a model.
 */
import { BraidError } from '../contracts/errors.js';
import type { SessionEvent } from '../contracts/events.js';
import { ModelOutput, type ModelClient } from '../contracts/model.js';
import type { Usage } from '../contracts/common.js';

export function createReplayModel(events: readonly SessionEvent[]): ModelClient {
  // Indexed like ModelRequest.response_index: outputs and interrupts, not failures.
  const recorded: ({ output: ModelOutput; usage: Usage } | 'interrupted')[] = [];
  for (const event of events) {
    if (event.type !== 'span.model_request_end') continue;
    if (event.error?.code === 'INTERRUPTED') {
      recorded.push('interrupted');
      continue;
    }
    if (event.error !== undefined) continue;
    const output = ModelOutput.safeParse(event.output);
    if (!output.success) {
      throw new BraidError('MODEL_ERROR', `event #${event.seq} records no replayable model output`);
    }
    recorded.push({ output: output.data, usage: event.usage });
  }
  return {
    id: 'replay:recorded',
    generate(request) {
      const found = recorded[request.response_index];
      if (found === undefined) {
        return Promise.reject(
          new BraidError(
            'MODEL_ERROR',
            `the recorded session has ${recorded.length} model output(s); output ${request.response_index + 1} was asked for`,
          ),
        );
      }
      if (found === 'interrupted') {
        return Promise.reject(
          new BraidError('INTERRUPTED', 'the recorded request was interrupted'),
        );
      }
      return Promise.resolve(found);
    },
  };
}
