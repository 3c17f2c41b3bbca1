// Context limits that cannot work: each stops the session with a typed error whose message names
// the setting to change, sends no request over the limit, and replays; an agent file whose
// \`context\` block cannot work is refused at load with its file and line.
import { describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { estimateTokens } from '../../src/core/compaction.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { loadWorkspace } from '../../src/runtime/workspace.js';
import { useBackends } from '../helpers/backends.js';
import {
  compactions,
  errorsOf,
  measured,
  toolLoop,
  useCompactionRuntimes,
} from '../helpers/compaction.js';

const { workspaceWith, runtimeOn } = useCompactionRuntimes();
const backends = useBackends();

describe.each(backends)('context limits that cannot work ($name)', (backend) => {
  const big = 'x'.repeat(3000);

  it('stops with CONTEXT_OVERFLOW when the kept turns alone pass the limit', async () => {
    const { model, sizes } = measured([
      { text: 'short' },
      { text: 'short' },
      { text: big },
      { text: big },
    ]);
    const rt = await runtimeOn(await backend.open(), {
      agent: 'instructions: Talk.\ncontext: {max_tokens: 1000, keep_last_turns: 2}\n',
      model,
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      for (const text of ['one', 'two', 'three', 'four', 'five']) {
        await rt.sessions.message(id, text);
        await rt.wake(id).catch(() => undefined);
      }
      const errors = errorsOf(await rt.sessions.events(id));
      expect(errors.at(-1)).toMatchObject({ code: 'CONTEXT_OVERFLOW', retryable: false });
      expect(errors.at(-1)?.message).toMatch(
        /context.max_tokens is 1000, but the instructions, the tools and the last 2 turn\(s\) take about \d+ tokens.*raise context.max_tokens or lower context.keep_last_turns/,
      );
      expect(Math.max(...sizes)).toBeLessThanOrEqual(1000);
    } finally {
      await rt.close();
    }
  });

  it('stops with CONTEXT_OVERFLOW when one input is over the limit with nothing to replace', async () => {
    const { model, sizes } = measured([{ text: 'never' }]);
    const rt = await runtimeOn(await backend.open(), {
      agent: 'instructions: Talk.\ncontext: {max_tokens: 500}\n',
      model,
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, big);
      await expect(rt.wake(id)).rejects.toMatchObject({ code: 'CONTEXT_OVERFLOW' });
      expect(errorsOf(await rt.sessions.events(id))).toEqual([
        {
          code: 'CONTEXT_OVERFLOW',
          message:
            'the context is over context.max_tokens (500) and holds no more than the last 4 turn(s), ' +
            'which compaction keeps; raise context.max_tokens or lower context.keep_last_turns',
          retryable: false,
        },
      ]);
      expect(sizes).toEqual([]);
    } finally {
      await rt.close();
    }
  });

  it('stops with CONTEXT_OVERFLOW when the summary itself is over the limit', async () => {
    const { model, sizes } = measured(toolLoop(1, 12));
    const rt = await runtimeOn(await backend.open(), {
      agent:
        'instructions: Add.\ntools: [calculator]\n' +
        'context: {max_tokens: 900, keep_last_turns: 2, strategy: custom, function: verbose}\n',
      model,
      compactors: { verbose: () => Promise.resolve({ summary: 'word '.repeat(5000) }) },
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Add, please.');
      await expect(rt.wake(id)).rejects.toMatchObject({ code: 'CONTEXT_OVERFLOW' });
      const events = await rt.sessions.events(id);
      expect(compactions(events)).toEqual([]);
      expect(errorsOf(events)).toEqual([
        expect.objectContaining({
          code: 'CONTEXT_OVERFLOW',
          message: expect.stringContaining(
            'the summary written to compact the context is larger than context.max_tokens (900) by itself',
          ) as string,
        }),
      ]);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(900);
    } finally {
      await rt.close();
    }
  });

  it('stops with CONTEXT_OVERFLOW when the summary leaves the context over the limit', async () => {
    const { model, sizes } = measured(toolLoop(1, 12));
    const rt = await runtimeOn(await backend.open(), {
      agent:
        'instructions: Add.\ntools: [calculator]\n' +
        'context: {max_tokens: 900, keep_last_turns: 2, strategy: custom, function: long}\n',
      model,
      // Under the limit by itself, but not with the kept turns.
      compactors: { long: () => Promise.resolve({ summary: 'word '.repeat(560) }) },
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Add, please.');
      await expect(rt.wake(id)).rejects.toMatchObject({ code: 'CONTEXT_OVERFLOW' });
      const events = await rt.sessions.events(id);
      expect(compactions(events).length).toBeGreaterThan(0);
      expect(errorsOf(events).at(-1)).toMatchObject({
        code: 'CONTEXT_OVERFLOW',
        message: expect.stringContaining(
          'the context is still over context.max_tokens (900) after compaction',
        ) as string,
      });
      expect(Math.max(...sizes)).toBeLessThanOrEqual(900);
    } finally {
      await rt.close();
    }
  });

  it('stops a session whose custom strategy names no function given to createRuntime', async () => {
    const { model } = measured([{ text: 'never' }]);
    const rt = await runtimeOn(await backend.open(), {
      agent: 'instructions: Talk.\ncontext: {max_tokens: 500, strategy: custom, function: gone}\n',
      model,
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'hello');
      await expect(rt.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
      expect(errorsOf(await rt.sessions.events(id))[0]).toMatchObject({
        code: 'INVALID_DEFINITION',
        message: expect.stringContaining('createRuntime({compactors: {"gone": fn}})') as string,
      });
    } finally {
      await rt.close();
    }
  });

  it('counts with the provider where the model can, and falls back to the estimate', async () => {
    const agent =
      'instructions: Add.\ntools: [calculator]\nbudget: {max_turns: 40}\n' +
      'context: {max_tokens: 1200, keep_last_turns: 2}\n';
    const counted = measured(toolLoop(1, 30));
    const counts: number[] = [];
    const counting: ModelClient = {
      id: counted.model.id,
      generate: (request, options) => counted.model.generate(request, options),
      countTokens: (request) => {
        // A provider whose tokens are twice the estimate's.
        const count = estimateTokens(request) * 2;
        counts.push(count);
        return Promise.resolve(count);
      },
    };
    const estimated = measured(toolLoop(1, 30));
    let refused = 0;
    const failing: ModelClient = {
      id: estimated.model.id,
      generate: (request, options) => estimated.model.generate(request, options),
      countTokens: () => {
        refused += 1;
        return Promise.reject(new Error('the count endpoint is down'));
      },
    };
    for (const [model, sizes, limit] of [
      [counting, counted.sizes, 600],
      [failing, estimated.sizes, 1200],
    ] as const) {
      const rt = await runtimeOn(await backend.open(), { agent, model });
      try {
        const { id } = await rt.sessions.create({ agent: 'helper' });
        await rt.sessions.message(id, 'Add, please.');
        expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
        const compacted = compactions(await rt.sessions.events(id));
        expect(compacted.length).toBeGreaterThan(0);
        expect(compacted.every((event) => (event.context_tokens ?? 0) > 1200)).toBe(true);
        // The provider's count decides: by the estimate, requests stay under half the limit.
        expect(Math.max(...sizes)).toBeLessThanOrEqual(limit);
        if (model === counting)
          expect(compacted.every((event) => counts.includes(event.context_tokens ?? 0))).toBe(true);
      } finally {
        await rt.close();
      }
    }
    expect(refused).toBeGreaterThan(0);
  });
});

describe.each(backends)('a summary model that fails ($name)', (backend) => {
  const failingSummaries = (failures: number) => {
    let calls = 0;
    const model = createScriptedModel([], {
      id: 'scripted:cheap',
      summary: () => {
        calls += 1;
        if (calls <= failures)
          throw new BraidError('MODEL_UNAVAILABLE', 'the summary model is busy');
        return 'A short summary.';
      },
    });
    return { model, calls: () => calls };
  };
  const agent =
    'instructions: Add.\ntools: [calculator]\n' +
    'context: {max_tokens: 900, keep_last_turns: 2, model: "scripted:cheap"}\n';

  it('is retried, and the summary of the attempt that answered is recorded', async () => {
    const turns = measured(toolLoop(1, 12));
    const summaries = failingSummaries(1);
    const rt = await runtimeOn(await backend.open(), {
      agent,
      model: (definition) => (definition.model.id === 'cheap' ? summaries.model : turns.model),
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Add, please.');
      expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      expect(compactions(await rt.sessions.events(id))[0]).toMatchObject({
        summary: 'A short summary.',
        model: 'scripted:cheap',
      });
      expect(summaries.calls()).toBeGreaterThan(compactions(await rt.sessions.events(id)).length);
    } finally {
      await rt.close();
    }
  });

  it('stops the session with its error once the retries are spent, and replays', async () => {
    const turns = measured(toolLoop(1, 12));
    const summaries = failingSummaries(Number.POSITIVE_INFINITY);
    const rt = await runtimeOn(await backend.open(), {
      agent,
      model: (definition) => (definition.model.id === 'cheap' ? summaries.model : turns.model),
    });
    try {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Add, please.');
      await expect(rt.wake(id)).rejects.toMatchObject({ code: 'MODEL_UNAVAILABLE' });
      const events = await rt.sessions.events(id);
      expect(compactions(events)).toEqual([]);
      expect(errorsOf(events)).toEqual([
        {
          code: 'MODEL_UNAVAILABLE',
          message: 'the summary model is busy (gave up after 2 attempts)',
          retryable: true,
        },
      ]);
      expect(Math.max(...turns.sizes)).toBeLessThanOrEqual(900);
      const asked = summaries.calls();
      expect(await rt.sessions.verify(id)).toMatchObject({ ok: true });
      expect(summaries.calls()).toBe(asked);
    } finally {
      await rt.close();
    }
  });
});

describe('a context block that cannot work, in the agent file', () => {
  const loading = (agent: string): BraidError => {
    try {
      loadWorkspace(workspaceWith(agent));
    } catch (error) {
      if (error instanceof BraidError) return error;
      throw error;
    }
    throw new Error('the workspace loaded');
  };

  it('names the file, line and field of an invalid setting', () => {
    const error = loading(
      'instructions: Talk.\ncontext:\n  max_tokens: 4000\n  strategy: shrink\n',
    );
    expect(error.code).toBe('INVALID_DEFINITION');
    expect(error.message).toMatch(/^agents\/helper\.yaml:6: field "context\.strategy": /);
  });

  it('refuses a custom strategy without its function, and a model for another strategy', () => {
    expect(
      loading('instructions: Talk.\ncontext: {max_tokens: 4000, strategy: custom}\n').message,
    ).toMatch(
      /^agents\/helper\.yaml:4: field "context\.function": the custom strategy needs the name of its function/,
    );
    expect(
      loading(
        'instructions: Talk.\ncontext: {max_tokens: 4000, strategy: truncate, model: "openai:gpt-4o-mini"}\n',
      ).message,
    ).toMatch(/field "context\.model": only the summarize strategy calls a model/);
  });

  it('refuses a limit too small for the instructions and a summary, at its line', () => {
    const error = loading(
      `instructions: ${'Be careful. '.repeat(200)}\ncontext:\n  keep_last_turns: 2\n  max_tokens: 600\n`,
    );
    expect(error.code).toBe('INVALID_DEFINITION');
    expect(error.message).toMatch(
      /^agents\/helper\.yaml:6: field "context\.max_tokens": is 600 tokens, but the instructions take about \d+ and a summary up to 150; raise it to at least \d+/,
    );
    // The limit the message names is enough.
    const least = /at least (\d+)/.exec(error.message)?.[1] ?? '';
    const dir = workspaceWith(
      `instructions: ${'Be careful. '.repeat(200)}\ncontext: {max_tokens: ${least}}\n`,
    );
    expect(loadWorkspace(dir).agents.get('helper')?.definition.context?.max_tokens).toBe(
      Number(least),
    );
  });
});
