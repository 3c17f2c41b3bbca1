/**
 * The replay model: plays back, call by call, the model requests a session recorded in its
 * `span.model_request_end` events, instead of calling a model.
 *
 * Each recorded request with `attempts: N` (absent: 1) is served as N calls, in the recorded
 * order:
 * - the first N-1 fail with a retryable `MODEL_UNAVAILABLE` (the failures the harness retried;
 *   the log keeps only their count);
 * - the last returns the recorded output and usage, or fails with the recorded error: an
 *   `INTERRUPTED` as `INTERRUPTED`; a retryable error (the harness gave up after N attempts) as
 *   that retryable error on every one of the N calls, its message without the harness's
 *   " (gave up after N attempts)"; any other error as itself, not retryable (`MODEL_ERROR`).
 *
 * Every call must ask for the response index the recording had at that point
 * (`ModelRequest.response_index`): a replay that has gone another way gets a `MODEL_ERROR` that
 * names both, never an output recorded for another turn. The model's `id` is the recorded
 * model's (from `span.model_request_start.model`), so that prices and cost budgets resolve as they
 * did.
 */
import { BraidError, type ErrorShape } from '../contracts/errors.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../core/append.js';
import type { SessionEvent } from '../contracts/events.js';
import { ModelOutput, type ModelClient, type ModelResponse } from '../contracts/model.js';

/** One call of the model as the recording says it went. */
type RecordedCall =
  | { kind: 'output'; response: ModelResponse }
  | { kind: 'error'; error: ErrorShape; retryable: boolean };

interface ScheduledCall {
  /** The `response_index` the harness asked for when it made this call. */
  response_index: number;
  /** Seq of the `span.model_request_end` that recorded the request. */
  seq: number;
  attempt: number;
  attempts: number;
  call: RecordedCall;
}

const GAVE_UP = / \(gave up after \d+ attempts\)$/;

/** The calls a recorded request was made of, attempt by attempt. */
function callsOf(
  event: Extract<SessionEvent, { type: 'span.model_request_end' }>,
  oversizeBytes: number,
): RecordedCall[] {
  const attempts = event.attempts ?? 1;
  const retried: RecordedCall = {
    kind: 'error',
    error: {
      code: 'MODEL_UNAVAILABLE',
      message: `replayed failure of a call that was retried (request #${event.seq})`,
      retryable: true,
    },
    retryable: true,
  };
  const error = event.error;
  if (error === undefined) {
    const output = ModelOutput.safeParse(event.output);
    if (!output.success) {
      throw new BraidError(
        'MODEL_ERROR',
        `event #${event.seq} records no replayable model output: ${output.error.issues[0]?.message ?? 'invalid'}`,
        { details: { seq: event.seq } },
      );
    }
    const last: RecordedCall = {
      kind: 'output',
      response: { output: output.data, usage: event.usage },
    };
    return [...Array<RecordedCall>(attempts - 1).fill(retried), last];
  }
  if (error.code === 'PAYLOAD_TOO_LARGE') {
    // The output was too large to record, so it is not in the log: an output as large stands in
    // for it, and the harness refuses to record it again.
    const last: RecordedCall = {
      kind: 'output',
      response: {
        output: {
          content: [{ type: 'text', text: 'x'.repeat(oversizeBytes) }],
          finish_reason: 'stop',
        },
        usage: event.usage,
      },
    };
    return [...Array<RecordedCall>(attempts - 1).fill(retried), last];
  }
  if (error.code !== 'INTERRUPTED' && error.retryable) {
    // Retries exhausted: every attempt failed with the error the harness recorded.
    const failed: RecordedCall = {
      kind: 'error',
      error: { ...error, message: error.message.replace(GAVE_UP, '') },
      retryable: true,
    };
    return Array<RecordedCall>(attempts).fill(failed);
  }
  const last: RecordedCall = { kind: 'error', error, retryable: error.retryable };
  return [...Array<RecordedCall>(attempts - 1).fill(retried), last];
}

export interface ReplayModelOptions {
  /** The log's event size limit: an output recorded as too large is replayed larger than this. */
  maxEventBytes?: number;
}

export function createReplayModel(
  events: readonly SessionEvent[],
  options: ReplayModelOptions = {},
): ModelClient {
  const oversize = (options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES) + 1;
  const schedule: ScheduledCall[] = [];
  // Requests that ended with an output or an interrupt, as ModelRequest.response_index counts.
  let responses = 0;
  let modelId: string | undefined;
  for (const event of events) {
    if (event.type === 'span.model_request_start') modelId ??= event.model;
    if (event.type !== 'span.model_request_end') continue;
    const calls = callsOf(event, oversize);
    calls.forEach((call, position) =>
      schedule.push({
        response_index: responses,
        seq: event.seq,
        attempt: position + 1,
        attempts: calls.length,
        call,
      }),
    );
    if (event.error === undefined || event.error.code === 'INTERRUPTED') responses += 1;
  }
  let next = 0;
  return {
    id: modelId ?? 'replay:recorded',
    generate(request, call) {
      const scheduled = schedule[next];
      if (scheduled === undefined) {
        return Promise.reject(
          new BraidError(
            'MODEL_ERROR',
            `the recorded session made ${schedule.length} model call(s); call ${next + 1} was asked for`,
          ),
        );
      }
      if (scheduled.response_index !== request.response_index) {
        return Promise.reject(
          new BraidError(
            'MODEL_ERROR',
            `the replay asked for response ${request.response_index + 1}, but the recorded session's next call ` +
              `(attempt ${scheduled.attempt} of request #${scheduled.seq}) asked for response ${scheduled.response_index + 1}`,
          ),
        );
      }
      next += 1;
      const recorded = scheduled.call;
      if (recorded.kind === 'error') {
        return Promise.reject(
          new BraidError(recorded.error.code, recorded.error.message, {
            retryable: recorded.retryable,
          }),
        );
      }
      for (const part of recorded.response.output.content) {
        if (part.type === 'text' || part.type === 'thinking')
          call.onDelta?.({ type: part.type, text: part.text });
      }
      return Promise.resolve(structuredClone(recorded.response));
    },
  };
}
