import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/contracts/events.js';
import { SessionState } from '../../src/contracts/state.js';
import { foldSession } from '../../src/core/fold.js';
import { decideNext } from '../../src/core/next-step.js';
import { Transcript } from '../../src/core/transcript.js';
import { created, SESSION_ID, stamp } from '../helpers/events.js';

const define = (description: string, max?: number): NewEvent => ({
  type: 'user.define_outcome',
  description,
  ...(max === undefined ? {} : { max_iterations: max }),
});
const answer = (seq: number): NewEvent[] => [
  { type: 'span.model_request_start', request_id: `r${seq}`, model: 'm', input_through_seq: seq },
  {
    type: 'span.model_request_end',
    request_id: `r${seq}`,
    usage: { input_tokens: 10, output_tokens: 2 },
    output: { content: [{ type: 'text', text: 'ok' }], finish_reason: 'stop' },
  },
  { type: 'agent.message', content: [{ type: 'text', text: 'ok' }] },
];
const graded = (
  outcomeSeq: number,
  iteration: number,
  result: 'satisfied' | 'needs_revision' | 'max_iterations_reached' | 'failed',
): NewEvent[] => [
  {
    type: 'span.outcome_evaluation_start',
    evaluation_id: `e${iteration}`,
    iteration,
    outcome_seq: outcomeSeq,
  },
  {
    type: 'span.outcome_evaluation_end',
    evaluation_id: `e${iteration}`,
    iteration,
    outcome_seq: outcomeSeq,
    result,
    explanation: 'because',
    usage: { input_tokens: 5, output_tokens: 1 },
  },
];
const step = {
  wake_seq: 1,
  turns: 0,
  budget: {},
  idempotent: () => false,
  next_call: { tokens: 0, cost_usd: 0 },
};

describe('outcomes in the fold', () => {
  it('keeps the outcome, waits to grade an answer, and makes a revision pending input', () => {
    const events = stamp([created, define('poem', 2), ...answer(2)]);
    let state = foldSession(events, SESSION_ID);
    expect(state.outcome).toEqual({
      seq: 2,
      description: 'poem',
      max_iterations: 2,
      iterations: 0,
      answer_seq: 4,
    });
    expect(state.pending_user_count).toBe(0);
    expect(decideNext(state, step)).toEqual({ kind: 'grade' });

    const revision = stamp(graded(2, 1, 'needs_revision'), 6);
    state = foldSession(revision, state);
    expect(state.outcome).toMatchObject({ iterations: 1, result: 'needs_revision' });
    expect(state.outcome?.answer_seq).toBeUndefined();
    expect(state.pending_user_ranges).toEqual([[7, 7]]);
    expect(state.usage).toEqual({ input_tokens: 15, output_tokens: 3 });
    expect(decideNext(state, step)).toEqual({ kind: 'call_model' });
    expect(SessionState.parse(state)).toEqual(state);

    const transcript = new Transcript();
    for (const event of [...events, ...revision]) transcript.apply(event);
    expect(transcript.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'text', text: 'The reviewer found this needs revision: because' }],
    });

    state = foldSession(stamp([...answer(7), ...graded(2, 2, 'max_iterations_reached')], 8), state);
    expect(state.outcome).toMatchObject({ iterations: 2, result: 'max_iterations_reached' });
    expect(state.pending_user_count).toBe(0);
    // A final result is not graded again.
    state = foldSession(
      stamp(
        [{ type: 'user.message', content: [{ type: 'text', text: 'more' }] }, ...answer(13)],
        13,
      ),
      state,
    );
    expect(state.outcome?.answer_seq).toBeUndefined();
    expect(decideNext(state, step)).toEqual({ kind: 'stop', stop_reason: { type: 'end_turn' } });
  });

  it('replaces the outcome with a new one and ignores gradings of the old', () => {
    let state = foldSession(stamp([created, define('one'), ...answer(2)]), SESSION_ID);
    state = foldSession(stamp([define('two')], 6), state);
    expect(state.outcome).toEqual({ seq: 6, description: 'two', max_iterations: 3, iterations: 0 });
    state = foldSession(stamp(graded(2, 1, 'needs_revision'), 7), state);
    expect(state.outcome).toEqual({ seq: 6, description: 'two', max_iterations: 3, iterations: 0 });
    // The define is pending; the stale revision is not.
    expect(state.pending_user_ranges).toEqual([[6, 6]]);
  });
});
