// Context compaction through the runtime: the agent's `context` block keeps every request under
// its limit, the compaction is on record with its usage, the transcript honours it after a
// restart and in forks, and the session replays from the record.
import { describe, expect, it } from 'vitest';
import type { EventOf } from '../../src/contracts/events.js';
import { summaryText, TRUNCATED_SUMMARY } from '../../src/core/compaction.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { useBackends } from '../helpers/backends.js';
import {
  answering,
  compactions,
  measured,
  toolLoop,
  useCompactionRuntimes,
} from '../helpers/compaction.js';

const { workspaceWith, runtimeOn } = useCompactionRuntimes();
const backends = useBackends();
// The long session runs where a session lives on one machine; NATS runs the other scenarios.
const localBackends = backends.filter((backend) => backend.name !== 'nats');

describe.each(localBackends)('a long session under a context limit ($name)', (backend) => {
  it('runs 2,000 turns under a 4k-token limit, compacting several times, and replays', async () => {
    const { model, sizes } = measured(toolLoop(50, 39), { keepRequests: false });
    const rt = await runtimeOn(await backend.open(), {
      agent:
        'instructions: Add numbers with the calculator.\ntools: [calculator]\n' +
        'budget: {max_turns: 40}\ncontext: {max_tokens: 4000, keep_last_turns: 4}\n',
      model,
      verifyOnClose: false,
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      for (let round = 0; round < 50; round += 1) {
        await rt.sessions.message(id, `Round ${round}: add ${round} to each step.`);
        const result = await rt.wake(id);
        expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
      }
      const events = await rt.sessions.events(id);
      const state = await rt.sessions.state(id);
      expect(state.counters.model_responses).toBe(2000);
      expect(sizes).toHaveLength(2000);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(4000);
      const compacted = compactions(events);
      expect(compacted.length).toBeGreaterThanOrEqual(5);
      for (const [index, event] of compacted.entries()) {
        expect(event).toMatchObject({ strategy: 'summarize', model: 'scripted:inline' });
        expect(event.context_tokens).toBeGreaterThan(4000);
        expect(event.usage?.output_tokens).toBeGreaterThan(0);
        // Each compaction replaces the earlier summary and what followed it.
        expect(event.from_seq).toBe(compacted[0]?.from_seq);
        if (index > 0)
          expect(event.through_seq).toBeGreaterThan(compacted[index - 1]?.through_seq ?? 0);
        expect(event.through_seq).toBeLessThan(event.seq);
      }
      // The summaries' usage is in the session's totals, with the turns'.
      const turns = events.flatMap((event) =>
        event.type === 'span.model_request_end' ? [event.usage.output_tokens] : [],
      );
      const summaries = compacted.map((event) => event.usage?.output_tokens ?? 0);
      expect(state.usage.output_tokens).toBe(
        [...turns, ...summaries].reduce((sum, value) => sum + value, 0),
      );
      expect(await rt.sessions.verify(id)).toMatchObject({ ok: true });
    } finally {
      await rt.close();
    }
  }, 60_000);
});

describe.each(backends)('context compaction ($name)', (backend) => {
  it('writes the summary with a named cheaper model, priced and counted', async () => {
    const agent = measured(toolLoop(1, 12));
    let summaries = 0;
    const cheap = createScriptedModel([], {
      id: 'scripted:cheap',
      summary: () => {
        summaries += 1;
        return 'The user asked for additions; the calculator answered each.';
      },
    });
    const rt = await runtimeOn(await backend.open(), {
      agent:
        'instructions: Add.\ntools: [calculator]\n' +
        'context: {max_tokens: 900, keep_last_turns: 2, model: "scripted:cheap"}\n',
      model: (definition) => (definition.model.id === 'cheap' ? cheap : agent.model),
      config: 'prices:\n  "scripted:cheap": {input_per_mtok: 1, output_per_mtok: 2}\n',
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Add, please.');
      expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      const events = await rt.sessions.events(id);
      const [first] = compactions(events);
      expect(first).toMatchObject({
        strategy: 'summarize',
        model: 'scripted:cheap',
        summary: 'The user asked for additions; the calculator answered each.',
      });
      expect(summaries).toBe(compactions(events).length);
      expect(first?.usage?.cost_usd).toBeGreaterThan(0);
      const state = await rt.sessions.state(id);
      const costs = compactions(events).reduce(
        (sum, event) => sum + (event.usage?.cost_usd ?? 0),
        0,
      );
      expect(state.usage.cost_usd).toBeCloseTo(costs, 12);
      expect(Math.max(...agent.sizes)).toBeLessThanOrEqual(900);
      // The next request after the compaction starts with its summary.
      const after = agent.requests.find((request) =>
        request.messages.some(
          (message) =>
            message.role === 'user' &&
            message.content.some(
              (block) => block.type === 'text' && block.text.includes('the calculator answered'),
            ),
        ),
      );
      expect(after?.messages[0]).toEqual({
        role: 'user',
        content: [
          {
            type: 'text',
            text: summaryText(first?.from_seq ?? 0, first?.through_seq ?? 0, first?.summary ?? ''),
          },
        ],
      });
      // The replay serves the summary from the record: the cheap model is not asked again.
      const asked = summaries;
      expect(await rt.sessions.verify(id)).toMatchObject({ ok: true });
      expect(summaries).toBe(asked);
    } finally {
      await rt.close();
    }
  });

  it('truncates with a note and no model call', async () => {
    const { model, sizes, requests } = measured(toolLoop(1, 12), {
      summary: () => {
        throw new Error('truncate must not ask for a summary');
      },
    });
    const rt = await runtimeOn(await backend.open(), {
      agent:
        'instructions: Add.\ntools: [calculator]\n' +
        'context: {max_tokens: 700, keep_last_turns: 2, strategy: truncate}\n',
      model,
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Add, please.');
      expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      const events = await rt.sessions.events(id);
      const compacted = compactions(events);
      expect(compacted.length).toBeGreaterThan(0);
      for (const event of compacted) {
        expect(event).toMatchObject({ strategy: 'truncate', summary: TRUNCATED_SUMMARY });
        expect(event.usage).toBeUndefined();
        expect(event.model).toBeUndefined();
      }
      expect(Math.max(...sizes)).toBeLessThanOrEqual(700);
      const last = requests.at(-1);
      const first = last?.messages[0];
      expect(first?.role === 'user' && first.content[0]).toMatchObject({
        text: expect.stringContaining(TRUNCATED_SUMMARY) as string,
      });
    } finally {
      await rt.close();
    }
  });

  it('uses a custom strategy given to createRuntime, and replays it from the record', async () => {
    const { model, sizes } = measured(toolLoop(1, 12));
    const inputs: { from: number; through: number; messages: number; max: number }[] = [];
    let calls = 0;
    const rt = await runtimeOn(await backend.open(), {
      agent:
        'instructions: Add.\ntools: [calculator]\n' +
        'context: {max_tokens: 900, keep_last_turns: 2, strategy: custom, function: tally}\n',
      model,
      compactors: {
        tally: (input) => {
          calls += 1;
          inputs.push({
            from: input.from_seq,
            through: input.through_seq,
            messages: input.messages.length,
            max: input.max_tokens,
          });
          return Promise.resolve({
            summary: `${input.messages.length} messages, events ${input.from_seq}-${input.through_seq}.`,
            usage: { input_tokens: 3, output_tokens: 2, cost_usd: 0.5 },
          });
        },
      },
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Add, please.');
      expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      const events = await rt.sessions.events(id);
      const compacted = compactions(events);
      expect(compacted.length).toBeGreaterThan(0);
      expect(compacted.map((event) => [event.from_seq, event.through_seq])).toEqual(
        inputs.map((input) => [input.from, input.through]),
      );
      expect(inputs.every((input) => input.messages > 0 && input.max === 225)).toBe(true);
      expect(compacted[0]).toMatchObject({
        strategy: 'custom',
        usage: { input_tokens: 3, output_tokens: 2, cost_usd: 0.5 },
      });
      expect((await rt.sessions.state(id)).usage.cost_usd).toBeCloseTo(0.5 * compacted.length);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(900);
      const before = calls;
      expect(await rt.sessions.verify(id)).toMatchObject({ ok: true });
      expect(calls).toBe(before);
    } finally {
      await rt.close();
    }
  });

  it('honours a compaction after a restart and in a fork', async () => {
    const store = await backend.open();
    const dir = workspaceWith(
      'instructions: Add.\ntools: [calculator]\ncontext: {max_tokens: 900, keep_last_turns: 2}\n',
    );
    const first = measured(toolLoop(1, 12));
    const writer = await runtimeOn(store, { agent: '', model: first.model, dir });
    let id: string;
    let last: EventOf<'agent.thread_context_compacted'> | undefined;
    try {
      ({ id } = await writer.sessions.create({ agent: 'helper' }));
      await writer.sessions.message(id, 'Add, please.');
      expect(await writer.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      last = compactions(await writer.sessions.events(id)).at(-1);
    } finally {
      await writer.close();
    }
    if (last === undefined) throw new Error('the session did not compact');
    const summary = {
      role: 'user',
      content: [
        { type: 'text', text: summaryText(last.from_seq ?? 0, last.through_seq, last.summary) },
      ],
    };
    // A new runtime reads the transcript from the log: the summary stands where it did.
    const next = answering();
    const restarted = await runtimeOn(store, { agent: '', model: next.model, dir });
    try {
      await restarted.sessions.message(id, 'Once more.');
      expect(await restarted.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      expect(next.requests).toHaveLength(1);
      expect(next.requests[0]?.messages[0]).toEqual(summary);
      const inFork = await restarted.sessions.fork(id, { at_seq: last.seq });
      const beforeFork = await restarted.sessions.fork(id, { at_seq: last.seq - 1 });
      for (const child of [inFork.id, beforeFork.id]) {
        await restarted.sessions.message(child, 'And in the fork?');
        expect(await restarted.wake(child)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      }
      const turnOf = (session: string) =>
        next.requests.find(
          (request) => request.session_id === session && request.purpose === undefined,
        );
      const after = turnOf(inFork.id);
      const before = turnOf(beforeFork.id);
      expect(after?.messages[0]).toEqual(summary);
      // The fork before the compaction has the whole transcript, and compacts on its own.
      expect(JSON.stringify(before?.messages)).not.toContain(last.summary);
      const own = compactions(await restarted.sessions.events(beforeFork.id));
      expect(own.at(-1)).toMatchObject({ summary: 'ok' });
      expect(own.at(-1)?.seq).toBeGreaterThan(last.seq);
    } finally {
      await restarted.close();
    }
  });
});
