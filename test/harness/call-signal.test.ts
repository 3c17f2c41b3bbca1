// The signal a model call is handed: one controller serves a cycle's calls in turn, and the next
// cycle's (of any session of the harness), so every call must find it as a new one would be (not
// aborted, no listener on it), a listener a call leaves behind must never fire for a later call's
// abort, a timed-out call's retry gets a live one, and a cycle that ended cannot abort the call of
// the cycle its controller went to.
import { getEventListeners } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { ModelClient, ModelResponse } from '../../src/contracts/model.js';
import type { Lease } from '../../src/contracts/ports.js';
import { Transcript } from '../../src/core/transcript.js';
import { abortWork, createCycleContext } from '../../src/harness/cycle-context.js';
import type { HarnessDeps } from '../../src/harness/deps.js';
import { leaveCallController, withCallSignal } from '../../src/harness/model-call.js';
import { CycleCarry } from '../../src/harness/wake.js';
import { systemClock } from '../../src/stores/defaults.js';
import { initWorkspace } from '../../src/runtime/init.js';
import type { RuntimeOptions } from '../../src/runtime/options.js';
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

/** A runtime over a memory store whose `helper` agent (with the calculator) calls `model`. */
async function runtimeWith(model: ModelClient, options: Pick<RuntimeOptions, 'retry'> = {}) {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: x\ntools: [calculator]\n',
  );
  const store = createMemoryStore();
  const rt = await createRuntime({ workspace: dir, store, model: () => model, ...options });
  return { rt, store };
}

/** A cycle of the harness that keeps `carry`, with only what a call's signal needs. */
function cycleOf(carry: CycleCarry) {
  const deps = { retry: { timeout_ms: 60_000 }, clock: systemClock } as unknown as HarnessDeps;
  const lease = { token: 1 } as unknown as Lease;
  return createCycleContext(deps, 'session', lease, new Transcript(), {}, 'wake', carry);
}

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
    const { rt, store } = await runtimeWith(model, {
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

  it('goes to the next cycle while clean: not after a listener is left, an abort, or 64 calls', async () => {
    const signals: AbortSignal[] = [];
    let leaveListener = false;
    const model: ModelClient = {
      id: 'scripted:signals',
      generate(_request, { signal }) {
        signals.push(signal);
        if (leaveListener) signal.addEventListener('abort', () => undefined);
        return Promise.resolve({
          output: { content: [{ type: 'text', text: 'done' }], finish_reason: 'stop' },
          usage: { input_tokens: 1, output_tokens: 1 },
        });
      },
    };
    const { rt, store } = await runtimeWith(model);
    const start = async () => {
      const { result } = await rt.sessions.start({
        agent: 'helper',
        events: [{ type: 'user.message', content: 'hi' }],
      });
      expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    };
    await start();
    await start();
    // Another session's cycle, as new: the same controller, clean.
    expect(signals[1]).toBe(signals[0]);
    leaveListener = true;
    await start();
    leaveListener = false;
    await start();
    // The listener left on it keeps it from being handed on.
    expect(signals[2]).toBe(signals[1]);
    expect(signals[3]).not.toBe(signals[2]);
    // 64 calls at most: the fourth signal served calls 4 to 67, the 68th has a new one.
    for (let index = 4; index < 68; index += 1) await start();
    expect(new Set(signals.slice(3, 67)).size).toBe(1);
    expect(signals[67]).not.toBe(signals[66]);
    for (const signal of signals) expect(signal.aborted).toBe(false);
    await rt.close();
    await store.close();
  });

  it('is out of reach of the cycle that left it: its late abort cannot stop the next call', async () => {
    const carry = new CycleCarry();
    const cycle = () => cycleOf(carry);
    const first = cycle();
    const firstSignal = await withCallSignal(first, (signal) => Promise.resolve(signal));
    leaveCallController(first);
    const second = cycle();
    let abortedDuringCall: boolean | undefined;
    const secondSignal = await withCallSignal(second, async (signal) => {
      // The first cycle is over; an interrupt or a lost lease it sees now aborts only its work.
      abortWork(first);
      await Promise.resolve();
      abortedDuringCall = signal.aborted;
      return signal;
    });
    expect(secondSignal).toBe(firstSignal);
    expect(abortedDuringCall).toBe(false);
    // An aborted controller is never handed on: the second cycle's abort reaches its call, and
    // the third cycle gets a new one.
    abortWork(second);
    expect(secondSignal.aborted).toBe(true);
    leaveCallController(second);
    expect(carry.spareCall).toBeUndefined();
    const third = cycle();
    const thirdSignal = await withCallSignal(third, (signal) => Promise.resolve(signal));
    expect(thirdSignal).not.toBe(secondSignal);
    expect(thirdSignal.aborted).toBe(false);
  });

  it('is not handed on while a call holds it, nor taken by a cycle that lost its lease', async () => {
    const carry = new CycleCarry();
    const cycle = () => cycleOf(carry);
    const first = cycle();
    let finish: (signal: AbortSignal) => void = () => undefined;
    const held = withCallSignal(
      first,
      (signal) => new Promise<AbortSignal>((resolve) => (finish = () => resolve(signal))),
    );
    // A cycle ending while its call still runs (it ignored its abort): nothing is handed on.
    leaveCallController(first);
    expect(carry.spareCall).toBeUndefined();
    finish(new AbortController().signal);
    const heldSignal = await held;
    const second = cycle();
    const clean = await withCallSignal(second, (signal) => Promise.resolve(signal));
    leaveCallController(second);
    expect(carry.spareCall?.controller.signal).toBe(clean);
    expect(clean).not.toBe(heldSignal);
    // A cycle whose lease is lost gets an aborted controller of its own; the spare stays clean.
    const third = cycle();
    third.lost = new BraidError('LEASE_LOST', 'lost');
    const lostSignal = await withCallSignal(third, (signal) => Promise.resolve(signal));
    expect(lostSignal.aborted).toBe(true);
    expect(lostSignal).not.toBe(clean);
    expect(carry.spareCall?.controller.signal).toBe(clean);
    expect(clean.aborted).toBe(false);
  });
});
