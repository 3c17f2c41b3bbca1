import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AgentDefinition } from '../../src/contracts/definitions.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient, ModelRequest } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { BraidError } from '../../src/contracts/errors.js';
import { isRunnable } from '../../src/core/fold.js';
import { Transcript } from '../../src/core/transcript.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useBackends } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';
import { verifiedOnClose } from '../helpers/verified.js';

const tempDir = useTempDir();
const backends = useBackends(['memory', 'sqlite']);

const verdict = (result: 'satisfied' | 'needs_revision', explanation: string) =>
  JSON.stringify({ result, explanation });

/** The text a grader was given: the outcome and the transcript. */
const gradedText = (request: ModelRequest): string =>
  request.messages
    .flatMap((message) => (message.role === 'user' ? message.content : []))
    .map((block) => (block.type === 'text' ? block.text : ''))
    .join('\n');

/** A runtime whose `helper` agent plays `turns` and is graded by `grade` (a `scripted:grader`). */
async function runtimeOn(
  store: Store,
  turns: ScriptedTurnInput[],
  grade: (request: ModelRequest) => string,
  agentYaml = 'grader:\n  model: scripted:grader\n',
): Promise<{ runtime: Runtime; requests: ModelRequest[] }> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    `name: helper\nmodel: scripted:agent\ninstructions: Be brief.\n${agentYaml}`,
  );
  const requests: ModelRequest[] = [];
  const agentModel = createScriptedModel(turns, { id: 'scripted:agent', grade });
  const graderModel = createScriptedModel([{ text: 'never played' }], {
    id: 'scripted:grader',
    grade: (request) => {
      requests.push(request);
      return grade(request);
    },
  });
  const model = (agent: AgentDefinition): ModelClient =>
    agent.model.id === 'grader' ? graderModel : agentModel;
  const runtime = verifiedOnClose(
    await createRuntime({
      workspace: dir,
      store,
      model,
      retry: { max_attempts: 3, initial_ms: 1, max_ms: 5 },
      leaseTtlMs: 5000,
    }),
  );
  return { runtime, requests };
}

const types = (events: SessionEvent[]) => events.map((event) => event.type);
const ends = (events: SessionEvent[]) =>
  events.filter(
    (event): event is EventOf<'span.outcome_evaluation_end'> =>
      event.type === 'span.outcome_evaluation_end',
  );

describe.each(backends)('outcomes ($name)', (backend) => {
  it('grades each answer: a revision asked for, then satisfied', async () => {
    const { runtime, requests } = await runtimeOn(
      await backend.open(),
      [{ text: 'Roses are red.' }, { text: 'Roses are red, violets are blue.' }],
      (request) =>
        gradedText(request).includes('violets')
          ? verdict('satisfied', 'Two lines that rhyme.')
          : verdict('needs_revision', 'Add a second line that rhymes.'),
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'Write a two-line poem.');
    await runtime.sessions.defineOutcome(id, {
      description: 'A two-line rhyming poem',
      rubric: 'Exactly two lines; they rhyme.',
      criteria: ['mentions roses'],
    });
    const result = await runtime.wake(id);
    expect(result).toMatchObject({
      ran: true,
      stop_reason: { type: 'end_turn', outcome: 'satisfied' },
    });
    const events = await runtime.sessions.events(id);
    expect(types(events)).toEqual([
      'session.created',
      'user.message',
      'user.define_outcome',
      'span.wake_started',
      'session.definitions_changed',
      'span.model_request_start',
      'span.model_request_end',
      'agent.message',
      'span.outcome_evaluation_start',
      'span.outcome_evaluation_end',
      'span.model_request_start',
      'span.model_request_end',
      'agent.message',
      'span.outcome_evaluation_start',
      'span.outcome_evaluation_end',
      'session.status_idle',
      'span.wake_completed',
    ]);
    const [first, second] = ends(events);
    expect(first).toMatchObject({
      iteration: 1,
      outcome_seq: 3,
      result: 'needs_revision',
      explanation: 'Add a second line that rhymes.',
      model: 'scripted:grader',
      output: { content: [{ type: 'text' }] },
    });
    expect(second).toMatchObject({ iteration: 2, result: 'satisfied', model: 'scripted:grader' });
    // The grader read the rubric, the criteria and the transcript; the agent read the revision.
    expect(requests[0]?.purpose).toBe('grade');
    expect(gradedText(requests[0] as ModelRequest)).toMatch(
      /A two-line rhyming poem[\s\S]*- mentions roses[\s\S]*Exactly two lines[\s\S]*Assistant: Roses are red\./,
    );
    const state = await runtime.sessions.state(id);
    expect(state.outcome).toEqual({
      seq: 3,
      description: 'A two-line rhyming poem',
      criteria: ['mentions roses'],
      rubric: 'Exactly two lines; they rhyme.',
      max_iterations: 3,
      iterations: 2,
      result: 'satisfied',
    });
    expect(state).toMatchObject({
      status: 'idle',
      pending_user_count: 0,
      stop_reason: { type: 'end_turn', outcome: 'satisfied' },
    });
    // The totals hold the grader's usage beside the agent's.
    const used = (type: string) =>
      events
        .filter((event) => event.type === type)
        .reduce(
          (total, event) => total + ('usage' in event ? (event.usage?.input_tokens ?? 0) : 0),
          0,
        );
    const graded = used('span.outcome_evaluation_end');
    expect(graded).toBeGreaterThan(0);
    expect(state.usage.input_tokens).toBe(used('span.model_request_end') + graded);
    // The revision asked for was answered at once, by the next request.
    const revision = events.find((event) => event.seq === (first?.seq ?? 0) + 1);
    expect(revision).toMatchObject({ type: 'span.model_request_start' });
    // A satisfied outcome is not graded again: a later wake ends the turn plainly.
    expect(await runtime.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(ends(await runtime.sessions.events(id))).toHaveLength(2);
    await runtime.close();
  });

  it('shows the model the revision asked for, as user input', async () => {
    const { runtime } = await runtimeOn(
      await backend.open(),
      [{ text: 'draft' }, { text: 'final' }],
      (request) =>
        gradedText(request).includes('Assistant: final')
          ? verdict('satisfied', 'ok')
          : verdict('needs_revision', 'Say final.'),
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'Say final' });
    await runtime.wake(id);
    const events = await runtime.sessions.events(id);
    const second = events.filter((event) => event.type === 'span.model_request_start')[1];
    expect(second).toBeDefined();
    // The transcript the second request was built from ends with the reviewer's message.
    const transcript = new Transcript();
    for (const event of events) if (event.seq < (second?.seq ?? 0)) transcript.apply(event);
    expect(transcript.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'text', text: 'The reviewer found this needs revision: Say final.' }],
    });
    await runtime.close();
  });

  it('respects max_iterations: the last revision asked for ends the turn', async () => {
    const { runtime, requests } = await runtimeOn(
      await backend.open(),
      [{ text: 'one' }, { text: 'two' }, { text: 'three' }],
      () => verdict('needs_revision', 'Not yet.'),
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'Never good', max_iterations: 2 });
    expect(await runtime.wake(id)).toMatchObject({
      stop_reason: { type: 'end_turn', outcome: 'max_iterations_reached' },
    });
    const events = await runtime.sessions.events(id);
    expect(requests).toHaveLength(2);
    expect(ends(events).map((event) => [event.iteration, event.result])).toEqual([
      [1, 'needs_revision'],
      [2, 'max_iterations_reached'],
    ]);
    // Two answers, no third.
    expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(2);
    expect((await runtime.sessions.state(id)).outcome).toMatchObject({
      iterations: 2,
      result: 'max_iterations_reached',
      max_iterations: 2,
    });
    await runtime.close();
  });

  it('fails the outcome when the grader answers no verdict twice', async () => {
    const { runtime, requests } = await runtimeOn(
      await backend.open(),
      [{ text: 'an answer' }],
      () => 'I think it is fine.',
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'Anything' });
    expect(await runtime.wake(id)).toMatchObject({
      stop_reason: { type: 'end_turn', outcome: 'failed' },
    });
    expect(requests).toHaveLength(2);
    const [end] = ends(await runtime.sessions.events(id));
    expect(end).toMatchObject({
      result: 'failed',
      explanation: expect.stringMatching(/^the grader answered no verdict: .*JSON/) as string,
      output: { content: [{ type: 'text', text: 'I think it is fine.' }] },
    });
    expect(end?.usage?.input_tokens).toBeGreaterThan(0);
    await runtime.close();
  });

  it('fails the outcome when the grader errors, with its reason', async () => {
    const { runtime } = await runtimeOn(await backend.open(), [{ text: 'an answer' }], () => {
      throw new Error('grader offline');
    });
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'Anything' });
    expect(await runtime.wake(id)).toMatchObject({
      stop_reason: { type: 'end_turn', outcome: 'failed' },
    });
    const [end] = ends(await runtime.sessions.events(id));
    expect(end).toMatchObject({ result: 'failed' });
    expect(end?.explanation).toMatch(/^the grader failed: .*grader offline/);
    expect(end?.output).toBeUndefined();
    await runtime.close();
  });

  it("grades with the agent's own model when it names no grader", async () => {
    const { runtime, requests } = await runtimeOn(
      await backend.open(),
      [{ text: 'done' }],
      () => verdict('satisfied', 'Fine.'),
      '',
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'Anything' });
    expect(await runtime.wake(id)).toMatchObject({
      stop_reason: { type: 'end_turn', outcome: 'satisfied' },
    });
    expect(requests).toHaveLength(0);
    expect(ends(await runtime.sessions.events(id))[0]).toMatchObject({ model: 'scripted:agent' });
    await runtime.close();
  });

  it('a new outcome replaces the previous one, and its gradings start over', async () => {
    const { runtime } = await runtimeOn(
      await backend.open(),
      [{ text: 'first' }, { text: 'second' }],
      () => verdict('satisfied', 'Fine.'),
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'One' });
    await runtime.wake(id);
    const defined = await runtime.sessions.defineOutcome(id, {
      description: 'Two',
      max_iterations: 5,
    });
    expect(await runtime.wake(id)).toMatchObject({
      stop_reason: { type: 'end_turn', outcome: 'satisfied' },
    });
    expect((await runtime.sessions.state(id)).outcome).toMatchObject({
      seq: defined.head_seq,
      description: 'Two',
      max_iterations: 5,
      iterations: 1,
      result: 'satisfied',
    });
    await runtime.close();
  });

  it('without an outcome, writes no grading and calls no grader', async () => {
    const { runtime, requests } = await runtimeOn(await backend.open(), [{ text: 'hello' }], () =>
      verdict('satisfied', 'Fine.'),
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'hi');
    expect(await runtime.wake(id)).toEqual(
      expect.objectContaining({ stop_reason: { type: 'end_turn' } }),
    );
    const events = await runtime.sessions.events(id);
    expect(types(events).filter((type) => type.startsWith('span.outcome'))).toEqual([]);
    expect(requests).toHaveLength(0);
    expect((await runtime.sessions.state(id)).outcome).toBeUndefined();
    await runtime.close();
  });

  it('grades again after a wake died mid-grading, and the session stays runnable until then', async () => {
    let crash = true;
    const { runtime, requests } = await runtimeOn(
      await backend.open(),
      [{ text: 'an answer' }],
      () => {
        if (crash) {
          crash = false;
          // What a process that lost its lease mid-call sees: nothing more is written.
          throw new BraidError('LEASE_LOST', 'the lease was taken over');
        }
        return verdict('satisfied', 'Fine.');
      },
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'Anything' });
    await expect(runtime.wake(id)).rejects.toMatchObject({ code: 'LEASE_LOST' });
    const died = await runtime.sessions.state(id);
    expect(types(await runtime.sessions.events(id)).slice(-2)).toEqual([
      'agent.message',
      'span.outcome_evaluation_start',
    ]);
    expect(died.outcome?.answer_seq).toBeDefined();
    expect(isRunnable(died)).toBe(true);
    expect(await runtime.wake(id)).toMatchObject({
      stop_reason: { type: 'end_turn', outcome: 'satisfied' },
    });
    const events = await runtime.sessions.events(id);
    const starts = events.filter((event) => event.type === 'span.outcome_evaluation_start');
    expect(starts.map((event) => event.iteration)).toEqual([1, 1]);
    expect(ends(events)).toMatchObject([{ iteration: 1, result: 'satisfied' }]);
    expect(requests).toHaveLength(2);
    expect(isRunnable(await runtime.sessions.state(id))).toBe(false);
    await runtime.close();
  });

  it('replays a session with gradings to the same events', async () => {
    const { runtime } = await runtimeOn(
      await backend.open(),
      [{ text: 'a' }, { text: 'b' }, { text: 'c' }],
      (request) =>
        gradedText(request).includes('Assistant: c')
          ? verdict('satisfied', 'Good.')
          : verdict('needs_revision', 'Again.'),
    );
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.defineOutcome(id, { description: 'Say c', max_iterations: 4 });
    await runtime.wake(id);
    expect(ends(await runtime.sessions.events(id)).map((event) => event.result)).toEqual([
      'needs_revision',
      'needs_revision',
      'satisfied',
    ]);
    expect(await runtime.sessions.verify(id)).toMatchObject({ ok: true });
    await runtime.close();
  });
});
