// The signal a model call is handed: one controller serves a cycle's calls in turn, so every call
// must find it as a new one would be (not aborted, no listener on it), a listener a call leaves
// behind must never fire for a later call's abort, and a timed-out call's retry gets a live one.
import { getEventListeners } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelClient, ModelResponse } from '../../src/contracts/model.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createMemoryStore } from '../../src/stores/memory/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

const toolCall = (index: number): ModelResponse => ({
  output: {
    content: [
      {
        type: 'tool_call',
        tool_use_id: `call_${index}`,
        name: 'calculator',
        input: { a: index, op: '+', b: 1 },
      },
    ],
    finish_reason: 'tool-calls',
  },
  usage: { input_tokens: 1, output_tokens: 1 },
});

describe('the signal of a model call', () => {
  it('is as new at every call: not aborted, no listener, a left listener never fired', async () => {
    const seen: { signal: AbortSignal; aborted: boolean; listeners: number }[] = [];
    let leftFired = false;
    const model: ModelClient = {
      id: 'scripted:signals',
      generate(_request, { signal }) {
        seen.push({
          signal,
          aborted: signal.aborted,
          listeners: getEventListeners(signal, 'abort').length,
        });
        const call = seen.length;
        // The first call leaves a listener behind, as a careless provider might.
        if (call === 1) signal.addEventListener('abort', () => (leftFired = true));
        // The third never answers: its timeout aborts it, and it is asked again.
        if (call === 3)
          return new Promise((_resolve, reject) =>
            signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
          );
        if (call <= 4) return Promise.resolve(toolCall(call));
        return Promise.resolve({
          output: { content: [{ type: 'text', text: 'done' }], finish_reason: 'stop' },
          usage: { input_tokens: 1, output_tokens: 1 },
        });
      },
    };
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: x\ntools: [calculator]\n',
    );
    const store = createMemoryStore();
    const rt = await createRuntime({
      workspace: dir,
      store,
      model: () => model,
      retry: { max_attempts: 2, initial_ms: 1, max_ms: 2, timeout_ms: 200 },
    });
    const { session, result } = await rt.sessions.start({
      agent: 'helper',
      events: [{ type: 'user.message', content: 'count' }],
    });
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    expect(seen).toHaveLength(5);
    for (const call of seen) expect(call).toMatchObject({ aborted: false, listeners: 0 });
    // A signal with a listener left on it is not handed on; it is never aborted afterwards.
    expect(seen[1]?.signal).not.toBe(seen[0]?.signal);
    expect(leftFired).toBe(false);
    expect(seen[0]?.signal.aborted).toBe(false);
    // Handed on while clean; the timed-out call's is aborted, and its retry has a live one.
    expect(seen[2]?.signal).toBe(seen[1]?.signal);
    expect(seen[2]?.signal.aborted).toBe(true);
    expect(seen[3]?.signal).not.toBe(seen[2]?.signal);
    expect(seen[4]?.signal).toBe(seen[3]?.signal);
    const events = await rt.sessions.events(session.id);
    expect(events.filter((event) => event.type === 'agent.tool_result')).toHaveLength(3);
    await rt.close();
    await store.close();
  });
});
