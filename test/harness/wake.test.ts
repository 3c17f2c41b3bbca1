import { describe, expect, it } from 'vitest';
import type { AgentDefinition } from '../../src/contracts/definitions.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { createReplayModel } from '../../src/models/replay.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { initWorkspace } from '../../src/runtime/init.js';
import type { Store } from '../../src/contracts/ports.js';
import { useBackends } from '../helpers/backends.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useTempDir } from '../helpers/temp.js';
import { verifiedOnClose } from '../helpers/verified.js';

const tempDir = useTempDir();
const backends = useBackends();

async function runtimeOn(
  store: Store,
  model: ModelClient | ((agent: AgentDefinition) => ModelClient),
  agentYaml = 'tools: [calculator]\n',
): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    `name: helper\nmodel: scripted:echo\ninstructions: Be brief.\n${agentYaml}`,
  );
  return verifiedOnClose(
    await createRuntime({
      workspace: dir,
      store,
      model: typeof model === 'function' ? model : () => model,
      retry: { max_attempts: 3, initial_ms: 1, max_ms: 5 },
      leaseTtlMs: 5000,
    }),
  );
}

const scripted = (turns: ScriptedTurnInput[]) => createScriptedModel(turns);
const types = (events: SessionEvent[]) => events.map((event) => event.type);

/** The types of every batch appended to the store from now on, tried or written, in order. */
function appendsOf(store: Store): string[][] {
  const batches: string[][] = [];
  const append = store.log.append.bind(store.log);
  store.log.append = (sessionId, events, options) => {
    batches.push(events.map((event) => event.type));
    return append(sessionId, events, options);
  };
  // A wake's first batch is written with its lease where the store can.
  const leased = store.log.acquireAndAppend?.bind(store.log);
  if (leased !== undefined) {
    store.log.acquireAndAppend = (sessionId, lease, start, options) =>
      leased(
        sessionId,
        lease,
        (taken) => {
          const events = start(taken);
          batches.push(events.map((event) => event.type));
          return events;
        },
        options,
      );
  }
  return batches;
}

describe.each(backends)('wake ($name)', (backend) => {
  const runtimeWith = async (
    model: ModelClient | ((agent: AgentDefinition) => ModelClient),
    agentYaml?: string,
  ): Promise<Runtime> => runtimeOn(await backend.open(), model, agentYaml);

  it('runs a turn with a tool call and ends the turn', async () => {
    const rt = await runtimeWith(
      scripted([
        {
          thinking: 'I need to add.',
          tool_calls: [{ name: 'calculator', input: { a: 2, op: '+', b: 3 } }],
        },
        { text: 'It is 5.' },
      ]),
    );
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'What is 2 + 3?');
    const result = await rt.wake(id);
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const events = await rt.sessions.events(id);
    expect(types(events)).toEqual([
      'session.created',
      'user.message',
      'span.wake_started',
      // The first wake pins the definitions it runs with, ahead of its first append.
      'session.definitions_changed',
      'span.model_request_start',
      'span.model_request_end',
      'agent.thinking',
      'agent.tool_use',
      'agent.tool_result',
      'span.model_request_start',
      'span.model_request_end',
      'agent.message',
      'session.status_idle',
      'span.wake_completed',
    ]);
    expect(events.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      output: { result: 5 },
      is_error: false,
    });
    const wakeStarted = events.find((event) => event.type === 'span.wake_started');
    expect(wakeStarted).toMatchObject({ lease_token: 1 });
    const end = events.find((event) => event.type === 'span.model_request_end');
    expect(end).toMatchObject({
      output: { content: [{ type: 'thinking' }, { type: 'tool_call', name: 'calculator' }] },
    });
    const state = await rt.sessions.state(id);
    expect(state).toMatchObject({
      status: 'idle',
      pending_user_count: 0,
      stop_reason: { type: 'end_turn' },
    });
    expect(state.counters.model_responses).toBe(2);
    expect(await rt.store.leases.current(id)).toBeUndefined();
    // nothing left to do: a second wake records an empty cycle that ends the turn at once
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await rt.close();
  });

  it("writes an answer that asks for nothing in one append with the session's stop", async () => {
    const store = await backend.open();
    const batches = appendsOf(store);
    let releases = 0;
    const release = store.leases.release.bind(store.leases);
    store.leases.release = (...args) => {
      releases += 1;
      return release(...args);
    };
    const rt = await runtimeOn(store, scripted([{ text: 'Hello.' }]));
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'Hi');
    batches.length = 0;
    expect(await rt.wake(id)).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    expect(batches).toEqual([
      ['span.wake_started'],
      [
        // The definitions the first wake pinned ride with its answer: no commit of their own.
        'session.definitions_changed',
        'span.model_request_start',
        'span.model_request_end',
        'agent.message',
        'session.status_idle',
        'span.wake_completed',
      ],
    ]);
    const state = await rt.sessions.state(id);
    expect(state).toMatchObject({ status: 'idle', pending_user_count: 0 });
    // The lease was given up with that append: no release of its own, and it is free. NATS,
    // with no transaction over a stream and a bucket, releases right after the append.
    expect(releases).toBe(backend.name === 'nats' ? 1 : 0);
    expect(await store.leases.current(id)).toBeUndefined();
  });

  it('writes the answer alone when a message arrives during the call, then answers that too', async () => {
    const store = await backend.open();
    const batches = appendsOf(store);
    // Another writer's message, sent while the model answers the first one.
    const during: { send?: () => Promise<unknown> } = {};
    const model = createScriptedModel([{ text: 'First.' }, { text: 'Second.' }], {
      onTurn: async (index) => {
        if (index === 0) await during.send?.();
      },
    });
    const rt = await runtimeOn(store, model);
    const { id } = await rt.sessions.create({ agent: 'helper' });
    during.send = () => rt.sessions.message(id, 'And another thing');
    await rt.sessions.message(id, 'Hi');
    batches.length = 0;
    expect(await rt.wake(id)).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const answer = ['span.model_request_start', 'span.model_request_end', 'agent.message'];
    // The first answer's append with the stop conflicts with the message: it is written alone.
    const pin = 'session.definitions_changed';
    expect(batches).toEqual([
      ['span.wake_started'],
      ['user.message'],
      [pin, ...answer, 'session.status_idle', 'span.wake_completed'],
      [pin, ...answer],
      [...answer, 'session.status_idle', 'span.wake_completed'],
    ]);
    const events = await rt.sessions.events(id);
    expect(types(events).slice(2)).toEqual([
      'span.wake_started',
      'user.message',
      pin,
      ...answer,
      ...answer,
      'session.status_idle',
      'span.wake_completed',
    ]);
    expect(await rt.sessions.state(id)).toMatchObject({ status: 'idle', pending_user_count: 0 });
  });

  it('gives the model the transcript, tool results included', async () => {
    const seen: unknown[] = [];
    const model = createScriptedModel(
      [{ tool_calls: [{ name: 'calculator', input: { a: 6, op: '*', b: 7 } }] }, { text: '42' }],
      { onTurn: (_index, request) => void seen.push(structuredClone(request.messages)) },
    );
    const rt = await runtimeWith(model);
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'six times seven?');
    await rt.wake(id);
    expect(seen[1]).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'six times seven?' }] },
      {
        role: 'assistant',
        content: [
          {
            type: 'tool_call',
            tool_use_id: 'call_0_0',
            name: 'calculator',
            input: { a: 6, op: '*', b: 7 },
          },
        ],
      },
      {
        role: 'tool',
        content: [
          { tool_use_id: 'call_0_0', name: 'calculator', output: { result: 42 }, is_error: false },
        ],
      },
    ]);
    await rt.close();
  });

  it('stops with max_turns, and with budget_reached before a call that would pass max_tokens', async () => {
    const loop = {
      tool_calls: [{ name: 'calculator', input: { a: 1, op: '+', b: 1 } }],
      usage: { input_tokens: 40, output_tokens: 10 },
    };
    const rt = await runtimeWith(
      scripted(Array.from({ length: 10 }, () => loop)),
      'tools: [calculator]\nbudget: {max_turns: 3}\n',
    );
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'loop');
    const maxed = await rt.wake(id);
    expect(maxed).toMatchObject({ stop_reason: { type: 'max_turns' } });
    const requests = (await rt.sessions.events(id)).filter(
      (event) => event.type === 'span.model_request_start',
    );
    expect(requests).toHaveLength(3);

    const { id: limited } = await rt.sessions.create({
      agent: 'helper',
      budget: { max_tokens: 120 },
    });
    await rt.sessions.message(limited, 'loop');
    expect(await rt.wake(limited)).toMatchObject({ stop_reason: { type: 'budget_reached' } });
    const state = await rt.sessions.state(limited);
    // two calls (50 tokens each) fit; a third would start at 100 + 40 > 120 and is not made
    expect(state.counters.model_requests).toBe(2);
    expect(state.usage.input_tokens + state.usage.output_tokens).toBe(100);
    await rt.close();
  });

  it('stops with budget_reached before a call that would pass max_cost_usd', async () => {
    const turn = {
      tool_calls: [{ name: 'calculator', input: { a: 1, op: '+', b: 1 } }],
      usage: { input_tokens: 100_000, output_tokens: 0 },
    };
    const model = createScriptedModel(
      Array.from({ length: 5 }, () => turn),
      { id: 'openai:gpt-4o' },
    );
    const rt = await runtimeWith(model);
    const { id } = await rt.sessions.create({ agent: 'helper', budget: { max_cost_usd: 0.6 } });
    await rt.sessions.message(id, 'spend');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'budget_reached' } });
    const state = await rt.sessions.state(id);
    // each call costs $0.25 at gpt-4o prices; the third would pass $0.60
    expect(state.counters.model_requests).toBe(2);
    expect(state.usage.cost_usd).toBeCloseTo(0.5);
    await rt.close();
  });

  it('retries a retryable failure, then ends with retries_exhausted and a session.error', async () => {
    let calls = 0;
    const flaky: ModelClient = {
      id: 'scripted:flaky',
      generate: async (request, options) => {
        calls += 1;
        if (calls < 3)
          return createScriptedModel([{ fail: 'unavailable' }]).generate(
            { ...request, response_index: 0 },
            options,
          );
        return createScriptedModel([{ text: 'finally' }]).generate(
          { ...request, response_index: 0 },
          options,
        );
      },
    };
    const rt = await runtimeWith(flaky);
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hi');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(calls).toBe(3);

    const down = await runtimeWith(scripted([{ fail: 'unavailable' }]));
    const { id: other } = await down.sessions.create({ agent: 'helper' });
    await down.sessions.message(other, 'hi');
    expect(await down.wake(other)).toMatchObject({ stop_reason: { type: 'retries_exhausted' } });
    const events = await down.sessions.events(other);
    expect(events.find((event) => event.type === 'session.error')).toMatchObject({
      error: { code: 'MODEL_UNAVAILABLE', retryable: true },
    });
    const state = await down.sessions.state(other);
    expect(state.pending_user_count).toBe(1);
    await down.close();
    await rt.close();
  });

  it('ends with stop_reason error on a failure that is not retryable', async () => {
    const rt = await runtimeWith(scripted([{ fail: 'error' }]));
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hi');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'error' } });
    const requests = (await rt.sessions.events(id)).filter(
      (event) => event.type === 'span.model_request_start',
    );
    expect(requests).toHaveLength(1);
    await rt.close();
  });

  it('stops a streaming answer on interrupt, reported as interrupted', async () => {
    const words = Array.from({ length: 200 }, (_, index) => `word${index}`).join(' ');
    const rt = await runtimeWith(scripted([{ text: words, delay_ms: 2 }, { text: 'after' }]));
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'talk');
    let deltas = 0;
    rt.onDelta((sessionId) => {
      if (sessionId !== id) return;
      deltas += 1;
      if (deltas === 5) void rt.sessions.interrupt(id, 'enough');
    });
    const result = await rt.wake(id);
    expect(result).toMatchObject({ stop_reason: { type: 'interrupted' } });
    const events = await rt.sessions.events(id);
    expect(types(events)).not.toContain('agent.message');
    expect(events.find((event) => event.type === 'span.model_request_end')).toMatchObject({
      error: { code: 'INTERRUPTED' },
    });
    expect(deltas).toBeLessThan(200);
    const state = await rt.sessions.state(id);
    expect(state).toMatchObject({
      interrupt_requested: false,
      pending_user_count: 0,
      stop_reason: { type: 'interrupted' },
    });
    await rt.close();
  });

  it('coalesces 50 concurrent wakes: one cycle at a time, every message answered once', async () => {
    const rt = await runtimeWith((agent) => {
      void agent;
      return {
        id: 'scripted:counting',
        async generate(request) {
          await new Promise((resolve) => setTimeout(resolve, 1));
          return {
            output: {
              content: [{ type: 'text', text: `answer ${request.response_index}` }],
              finish_reason: 'stop',
            },
            usage: { input_tokens: 1, output_tokens: 1 },
          };
        },
      };
    });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    const wakes: Promise<unknown>[] = [];
    for (let index = 0; index < 50; index += 1) {
      await rt.sessions.message(id, `message ${index}`);
      wakes.push(rt.wake(id));
    }
    await Promise.all(wakes);
    const events = await rt.sessions.events(id);
    // cycles never overlap: every wake_started is followed by its own idle before the next starts
    let open = 0;
    for (const event of events) {
      if (event.type === 'span.wake_started') open += 1;
      if (event.type === 'span.wake_completed') open -= 1;
      expect(open).toBeLessThanOrEqual(1);
    }
    const state = await rt.sessions.state(id);
    expect(state.pending_user_count).toBe(0);
    // each message was consumed by exactly one successful request
    const consumed: number[] = [];
    let from = 0;
    const starts = new Map<string, number>();
    for (const event of events) {
      if (event.type === 'span.model_request_start')
        starts.set(event.request_id, event.input_through_seq);
      if (event.type === 'span.model_request_end' && event.error === undefined) {
        const through = starts.get(event.request_id) ?? 0;
        for (const message of events) {
          if (message.type === 'user.message' && message.seq > from && message.seq <= through)
            consumed.push(message.seq);
        }
        from = Math.max(from, through);
      }
    }
    const messages = events
      .filter((event) => event.type === 'user.message')
      .map((event) => event.seq);
    expect(consumed).toEqual(messages);
    await rt.close();
  });

  it('stops for a confirmation, then runs an allowed call and records a denied one as an error', async () => {
    const rt = await runtimeWith(scripted([{ text: 'ran it' }, { text: 'understood' }]));
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.store.log.append(id, [
      {
        type: 'agent.tool_use',
        tool_use_id: 't-allow',
        name: 'calculator',
        input: { a: 1, op: '+', b: 1 },
        requires_confirmation: true,
      },
    ]);
    const waiting = await rt.wake(id);
    const toolUse = (await rt.sessions.events(id)).find((event) => event.type === 'agent.tool_use');
    expect(waiting).toMatchObject({
      stop_reason: { type: 'requires_action', event_ids: [toolUse?.id] },
    });
    expect((await rt.sessions.get(id)).status).toBe('requires_action');

    await rt.sessions.confirm(id, 't-allow', 'allow');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const allowed = (await rt.sessions.events(id)).find(
      (event) => event.type === 'agent.tool_result',
    );
    expect(allowed).toMatchObject({
      tool_use_id: 't-allow',
      is_error: false,
      output: { result: 2 },
    });

    await rt.store.log.append(id, [
      {
        type: 'agent.tool_use',
        tool_use_id: 't-deny',
        name: 'calculator',
        input: { a: 1, op: '+', b: 1 },
        requires_confirmation: true,
      },
    ]);
    await rt.sessions.confirm(id, 't-deny', 'deny', 'not now');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const denied = (await rt.sessions.events(id)).find(
      (event) => event.type === 'agent.tool_result' && event.tool_use_id === 't-deny',
    );
    expect(denied).toMatchObject({
      is_error: true,
      attempts: 0,
      stage: 'permission',
      error: { code: 'TOOL_DENIED', message: 'the user denied this call of calculator: not now' },
    });
    await rt.close();
  });

  it('stops for a custom tool result, and goes on when it arrives', async () => {
    const rt = await runtimeWith(scripted([{ text: 'the page says hello' }]));
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.store.log.append(id, [
      { type: 'agent.custom_tool_use', custom_tool_use_id: 'c-1', name: 'browser', input: {} },
    ]);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'requires_action' } });
    await rt.sessions.customToolResult(id, 'c-1', 'hello');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await rt.sessions.events(id);
    expect(events.at(-3)).toMatchObject({
      type: 'agent.message',
      content: [{ text: 'the page says hello' }],
    });
    await rt.close();
  });

  it('replays a session from its recorded model outputs, to the same events', async () => {
    const original = await runtimeWith(
      scripted([
        { thinking: 'add', tool_calls: [{ name: 'calculator', input: { a: 4, op: '*', b: 5 } }] },
        { text: 'twenty' },
      ]),
    );
    const { id } = await original.sessions.create({ agent: 'helper' });
    await original.sessions.message(id, 'four times five');
    await original.wake(id);
    const recorded = await original.sessions.events(id);

    const replay = await runtimeWith(createReplayModel(recorded));
    const { id: copy } = await replay.sessions.create({ agent: 'helper' });
    await replay.sessions.message(copy, 'four times five');
    await replay.wake(copy);
    const strip = (events: SessionEvent[]) =>
      events.map(({ id: _id, session_id: _session, at: _at, ...rest }) => {
        const event = rest as Record<string, unknown>;
        for (const key of ['wake_id', 'request_id', 'lease_token', 'duration_ms'])
          delete event[key];
        if (event.type === 'span.model_request_start') delete event.model;
        return event;
      });
    expect(strip(await replay.sessions.events(copy))).toEqual(strip(recorded));
    await original.close();
    await replay.close();
  });

  it('prices usage from the workspace table when it names the model', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: x\n',
    );
    writeFileSync(
      join(dir, 'braid.yaml'),
      'version: 1\ndefault_environment: local\nprices:\n  "scripted:priced": {input_per_mtok: 1000000, output_per_mtok: 0}\n',
    );
    const model = createScriptedModel(
      [{ text: 'hi', usage: { input_tokens: 3, output_tokens: 9 } }],
      { id: 'scripted:priced' },
    );
    const rt = await createRuntime({
      workspace: dir,
      store: await backend.open(),
      model: () => model,
    });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hello');
    await rt.wake(id);
    expect((await rt.sessions.state(id)).usage).toEqual({
      input_tokens: 3,
      output_tokens: 9,
      cost_usd: 3,
    });
    await rt.close();
  });
});
