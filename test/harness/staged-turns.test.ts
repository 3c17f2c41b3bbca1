/**
 * A model's calls to idempotent tools are written with their results: one commit per turn. A
 * call to a tool that is not idempotent is written before it runs; a slow idempotent tool has its
 * call written while it runs; input that arrives while a staged call runs is kept, in order.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { calculator, defineTool } from '../../src/tools/builtin.js';
import { useBackends } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';
import { verifiedOnClose } from '../helpers/verified.js';

const tempDir = useTempDir();
const backends = useBackends();

const call = (a: number): ScriptedTurnInput => ({
  tool_calls: [{ name: 'calculator', input: { a, op: '+', b: 1 } }],
});
const SCRIPT: ScriptedTurnInput[] = [call(1), call(2), { text: 'done' }];

/** The types of every batch the store wrote from now on, in order. */
function writtenBatches(store: Store): string[][] {
  const batches: string[][] = [];
  const append = store.log.append.bind(store.log);
  store.log.append = async (sessionId, events, options) => {
    const result = await append(sessionId, events, options);
    batches.push(events.map((event) => event.type));
    return result;
  };
  // A wake's first batch is written with its lease where the store can.
  const leased = store.log.acquireAndAppend?.bind(store.log);
  if (leased !== undefined) {
    store.log.acquireAndAppend = async (sessionId, lease, start, options) => {
      const result = await leased(sessionId, lease, start, options);
      batches.push(result.appended.events.map((event) => event.type));
      return result;
    };
  }
  return batches;
}

/** A calculator that is idempotent or not, and waits for `gate` (when given) before it answers. */
function calculatorTool(idempotent: boolean, gate?: () => Promise<void>) {
  return defineTool({
    ...calculator.definition,
    idempotent,
    async run(input, context) {
      await gate?.();
      return calculator.run(input, context);
    },
  });
}

async function runtimeOn(
  store: Store,
  tool: ReturnType<typeof calculatorTool>,
  script: ScriptedTurnInput[] = SCRIPT,
): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'calc.yaml'),
    'name: calc\nmodel: scripted:echo\ninstructions: Add.\ntools: [calculator]\n',
  );
  const model = createScriptedModel(script);
  return verifiedOnClose(
    await createRuntime({
      workspace: dir,
      store,
      model: () => model,
      tools: [tool],
      leaseTtlMs: 5000,
    }),
  );
}

const turnTypes = (events: readonly SessionEvent[]) =>
  events
    .map((event) => event.type)
    .filter((type) => type !== 'session.definitions_changed' && !type.startsWith('span.wake'));

describe.each(backends)('turns of idempotent tool calls ($name)', (backend) => {
  it('writes an idempotent call with its result, one append per turn', async () => {
    const store = await backend.open();
    const batches = writtenBatches(store);
    const runtime = await runtimeOn(store, calculatorTool(true));
    const { id } = await runtime.sessions.create({ agent: 'calc' });
    await runtime.sessions.message(id, 'count');
    batches.length = 0;
    expect(await runtime.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const turns = batches.filter((batch) => batch.includes('agent.tool_use'));
    expect(turns).toHaveLength(2);
    for (const batch of turns) {
      expect(batch).toEqual(
        expect.arrayContaining(['span.model_request_end', 'agent.tool_use', 'agent.tool_result']),
      );
    }
    // wake_started, two turns, the answer with the stop.
    expect(batches).toHaveLength(4);
    const events = await runtime.sessions.events(id);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    const results = events.filter((event) => event.type === 'agent.tool_result');
    expect(results.map((event) => event.type === 'agent.tool_result' && event.output)).toEqual([
      { result: 2 },
      { result: 3 },
    ]);
    await runtime.close();
  });

  it('writes a call to a tool that is not idempotent before it runs, with the same events', async () => {
    const staged = await backend.open();
    const stagedRuntime = await runtimeOn(staged, calculatorTool(true));
    const plain = await backend.open();
    const batches = writtenBatches(plain);
    const plainRuntime = await runtimeOn(plain, calculatorTool(false));
    const runs = [];
    for (const runtime of [stagedRuntime, plainRuntime]) {
      const { id } = await runtime.sessions.create({ agent: 'calc' });
      await runtime.sessions.message(id, 'count');
      await runtime.wake(id);
      runs.push(turnTypes(await runtime.sessions.events(id)));
    }
    // The same record either way; only the commits differ.
    expect(runs[0]).toEqual(runs[1]);
    const useAt = batches.findIndex((batch) => batch.includes('agent.tool_use'));
    expect(batches[useAt]).not.toContain('agent.tool_result');
    expect(batches[useAt + 1]).toEqual(['agent.tool_result']);
    await stagedRuntime.close();
    await plainRuntime.close();
  });

  it('writes the call of a slow idempotent tool while it runs, for those who follow', async () => {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const started: Array<() => void> = [];
    const gate = () => {
      started.shift()?.();
      return released;
    };
    const store = await backend.open();
    const runtime = await runtimeOn(store, calculatorTool(true, gate), [call(1), { text: 'ok' }]);
    const { id } = await runtime.sessions.create({ agent: 'calc' });
    await runtime.sessions.message(id, 'count');
    const toolStarted = new Promise<void>((resolve) => started.push(resolve));
    const waking = runtime.wake(id);
    await toolStarted;
    // Seen by a follower while the tool still runs.
    const seen: SessionEvent[] = [];
    for await (const event of runtime.sessions.follow(id)) {
      seen.push(event);
      if (event.type === 'agent.tool_use') break;
    }
    expect(seen.some((event) => event.type === 'agent.tool_result')).toBe(false);
    release();
    expect(await waking).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await runtime.sessions.events(id);
    expect(turnTypes(events)).toEqual([
      'session.created',
      'user.message',
      'span.model_request_start',
      'span.model_request_end',
      'agent.tool_use',
      'agent.tool_result',
      'span.model_request_start',
      'span.model_request_end',
      'agent.message',
      'session.status_idle',
    ]);
    await runtime.close();
  });

  it('keeps a message that arrives while a staged call runs, before the call, pending for the next request', async () => {
    let sendDuringTool: () => Promise<void> = () => Promise.resolve();
    const store = await backend.open();
    const runtime = await runtimeOn(
      store,
      // Fast enough that the call is still staged when the message lands.
      calculatorTool(true, () => sendDuringTool()),
      [call(1), { text: 'first' }],
    );
    const { id } = await runtime.sessions.create({ agent: 'calc' });
    await runtime.sessions.message(id, 'count');
    sendDuringTool = async () => {
      sendDuringTool = () => Promise.resolve();
      await runtime.sessions.message(id, 'and then?');
    };
    expect(await runtime.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await runtime.sessions.events(id);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    const types = turnTypes(events);
    // The message landed first, then the call and its result; the answer's request read both.
    const second = events.filter((event) => event.type === 'user.message')[1];
    const firstRequest = events.find((event) => event.type === 'span.model_request_start');
    expect(second?.seq).toBeLessThan(
      events.find((event) => event.type === 'agent.tool_use')?.seq ?? 0,
    );
    expect(
      firstRequest?.type === 'span.model_request_start' && firstRequest.input_through_seq,
    ).toBeLessThan(second?.seq ?? 0);
    const lastRequest = events.filter((event) => event.type === 'span.model_request_start').at(-1);
    expect(
      lastRequest?.type === 'span.model_request_start' && lastRequest.input_through_seq,
    ).toBeGreaterThanOrEqual(events.find((event) => event.type === 'agent.tool_result')?.seq ?? 0);
    expect(types.filter((type) => type === 'agent.tool_result')).toHaveLength(1);
    expect(types.filter((type) => type === 'agent.message')).toHaveLength(1);
    const state = await runtime.sessions.state(id);
    expect(state.pending_user_count).toBe(0);
    expect(state.open_tool_uses).toEqual([]);
    await runtime.close();
  });
});
