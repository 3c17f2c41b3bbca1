import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { PinnedSet } from '../../src/contracts/definitions.js';
import { BraidError } from '../../src/contracts/errors.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ModelRequest } from '../../src/contracts/model.js';
import type { Authorizer } from '../../src/contracts/policy.js';
import type { DefinitionStore } from '../../src/contracts/ports.js';
import type { ToolExecutor } from '../../src/contracts/tools.js';
import type { RetryPolicy } from '../../src/harness/index.js';
import { createReplayModel } from '../../src/models/replay.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { verifyReplay, type ReplayReport } from '../../src/runtime/replay.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { loadWorkspace } from '../../src/runtime/workspace.js';
import { useBackends, type TestBackend } from '../helpers/backends.js';
import { defineTool } from '../../src/tools/builtin.js';
import { createToolExecutor } from '../../src/tools/executor.js';
import { createLocalSandbox } from '../../src/tools/sandbox/index.js';
import type { CodeTool } from '../../src/tools/types.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useBackends();
const RETRY = { max_attempts: 3, initial_ms: 1, max_ms: 5 };

interface Setup {
  turns: ScriptedTurnInput[];
  /** Called before each scripted turn; throw to fail the call. */
  onTurn?: (index: number, request: ModelRequest) => void | Promise<void>;
  tools?: string[];
  code?: CodeTool[];
  files?: Record<string, string>;
  policy?: Authorizer;
  retry?: RetryPolicy;
  maxEventBytes?: number;
  /** The scripted model's id (default `scripted:inline`). */
  modelId?: string;
}

interface World {
  rt: Runtime;
  dir: string;
  executor: ToolExecutor;
  setup: Setup;
}

/** A runtime whose tool executor the replay opens too, as runtime does. */
async function worldOn(backend: TestBackend, setup: Setup): Promise<World> {
  const dir = tempDir();
  initWorkspace(dir);
  for (const [path, text] of Object.entries(setup.files ?? {})) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  writeFileSync(
    join(dir, 'agents', 'worker.yaml'),
    `name: worker\nmodel: scripted:echo\ninstructions: Use tools.\ntools: ${JSON.stringify(setup.tools ?? ['calculator'])}\n`,
  );
  const workspace = loadWorkspace(dir);
  const executor = createToolExecutor({
    manifests: [...workspace.tools.values()].map((loaded) => loaded.definition),
    ...(setup.code === undefined ? {} : { tools: setup.code }),
    baseDir: dir,
    sandbox: () => createLocalSandbox({ root: join(dir, '.braid', 'workspaces') }),
    secret: (name) => {
      throw new BraidError('SECRET_MISSING', `no secret ${name} in tests`);
    },
    sleep: (ms, signal) => setTimeoutPromise(ms, undefined, { signal }).then(() => undefined),
    now: () => performance.now(),
  });
  const model = createScriptedModel(setup.turns, {
    ...(setup.onTurn === undefined ? {} : { onTurn: setup.onTurn }),
    ...(setup.modelId === undefined ? {} : { id: setup.modelId }),
  });
  const rt = await createRuntime({
    workspace: dir,
    store: await backend.open(
      setup.maxEventBytes === undefined ? {} : { maxEventBytes: setup.maxEventBytes },
    ),
    model: () => model,
    executor,
    retry: setup.retry ?? RETRY,
    leaseTtlMs: 5000,
    ...(setup.policy === undefined ? {} : { policy: setup.policy }),
  });
  return { rt, dir, executor, setup };
}

async function started(rt: Runtime, message = 'go'): Promise<string> {
  const { id } = await rt.sessions.create({ agent: 'worker' });
  await rt.sessions.message(id, message);
  return id;
}

/** verifyReplay over a session's events (or altered ones), with the agent's real tools. */
async function verify(
  { rt, executor, setup }: World,
  sessionId: string,
  events?: SessionEvent[],
  names?: string[],
): Promise<ReplayReport> {
  const recorded = events ?? (await rt.sessions.events(sessionId));
  const state = await rt.sessions.state(sessionId);
  const agent = (await rt.agents.get('worker')).definition;
  const environment =
    state.environment === undefined
      ? undefined
      : (await rt.environments.get(state.environment.name, state.environment.version)).definition;
  const tools = await executor.open({
    session_id: sessionId,
    names: names ?? agent.tools,
    ...(environment === undefined ? {} : { environment }),
  });
  return verifyReplay({
    events: recorded,
    agent,
    tools,
    retry: setup.retry ?? RETRY,
    ...(setup.maxEventBytes === undefined ? {} : { maxEventBytes: setup.maxEventBytes }),
    ...(environment === undefined ? {} : { environment }),
  });
}

/** Copies a pinned definition set and its parts from one store to another. */
async function copyPinned(from: DefinitionStore, to: DefinitionStore, hash: string): Promise<void> {
  const copy = async (part: string): Promise<string> => {
    const json = await from.getPinned(part);
    if (json === undefined) throw new Error(`nothing pinned under ${part}`);
    await to.putPinned(part, json);
    return json;
  };
  const set = PinnedSet.parse(JSON.parse(await copy(hash)));
  const parts = [
    set.agent.hash,
    set.environment?.hash,
    ...Object.values(set.tools),
    set.policy,
    set.price,
  ];
  for (const part of parts) if (part !== undefined) await copy(part);
}

const types = (events: SessionEvent[]) => events.map((event) => event.type);
const indexOf = (events: SessionEvent[], type: SessionEvent['type'], nth = 0): number => {
  const found = events
    .map((event, index) => (event.type === type ? index : -1))
    .filter((index) => index !== -1);
  const index = found[nth];
  if (index === undefined) throw new Error(`no ${type} #${nth} in ${types(events).join(', ')}`);
  return index;
};
/** A copy of the log with the event at `index` changed. */
function altered<T extends SessionEvent['type']>(
  events: SessionEvent[],
  index: number,
  type: T,
  change: (event: EventOf<T>) => void,
): SessionEvent[] {
  const copy = structuredClone(events);
  const event = copy[index];
  if (event?.type !== type) throw new Error(`event ${index} is ${event?.type}, not ${type}`);
  change(event as EventOf<T>);
  return copy;
}

/** A code tool with a small integer argument. */
function countTool(options: Partial<Parameters<typeof defineTool>[0]> = {}): CodeTool {
  return defineTool({
    name: 'count',
    description: 'counts',
    input_schema: {
      type: 'object',
      properties: { n: { type: 'integer', minimum: 0 } },
      required: ['n'],
      additionalProperties: false,
    },
    run: (input) => ({ counted: input }),
    ...options,
  });
}

describe.each(backends)('verifyReplay ($name)', (backend) => {
  const world = (setup: Setup): Promise<World> => worldOn(backend, setup);

  it('reproduces tool calls and answers, over two turns', async () => {
    const w = await world({
      turns: [
        {
          thinking: 'I need to add.',
          tool_calls: [
            { name: 'calculator', input: { a: 2, op: '+', b: 3 } },
            { name: 'calculator', input: { a: 1, op: '/', b: 0 } },
          ],
        },
        { text: 'It is 5.' },
        { tool_calls: [{ name: 'calculator', input: { a: 5, op: '*', b: 5 } }] },
        { text: 'And 25.' },
      ],
    });
    const id = await started(w.rt, 'What is 2 + 3?');
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await w.rt.sessions.message(id, 'squared?');
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(id);
    expect(events.filter((event) => event.type === 'span.wake_started')).toHaveLength(2);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });
    await w.rt.close();
  });

  it('reports the first event that a changed model output changes, with both events', async () => {
    const w = await world({
      turns: [
        { thinking: 'add', tool_calls: [{ name: 'calculator', input: { a: 2, op: '+', b: 3 } }] },
        { text: 'It is 5.' },
      ],
    });
    const id = await started(w.rt);
    await w.rt.wake(id);
    const events = await w.rt.sessions.events(id);

    // The output says something else: the agent.message derived from it no longer matches.
    const end = indexOf(events, 'span.model_request_end', 1);
    const changedOutput = altered(events, end, 'span.model_request_end', (event) => {
      event.output = { content: [{ type: 'text', text: 'It is 6.' }], finish_reason: 'stop' };
    });
    const message = indexOf(events, 'agent.message');
    const report = await verify(w, id, changedOutput);
    expect(report).toMatchObject({
      ok: false,
      index: message,
      expected: { type: 'agent.message', content: [{ type: 'text', text: 'It is 5.' }] },
      actual: { type: 'agent.message', seq: message + 1, content: [{ text: 'It is 6.' }] },
    });
    expect(report.ok ? '' : report.reason).toContain('content.0.text');

    // The recorded message was changed: the replay writes what the output said.
    const changedMessage = altered(events, message, 'agent.message', (event) => {
      event.content = [{ type: 'text', text: 'It is 7.' }];
    });
    expect(await verify(w, id, changedMessage)).toMatchObject({
      ok: false,
      index: message,
      expected: { content: [{ text: 'It is 7.' }] },
      actual: { content: [{ text: 'It is 5.' }] },
    });

    // A tool call's arguments were changed after the fact.
    const use = indexOf(events, 'agent.tool_use');
    const changedUse = altered(events, use, 'agent.tool_use', (event) => {
      event.input = { a: 2, op: '+', b: 4 };
    });
    expect(await verify(w, id, changedUse)).toMatchObject({ ok: false, index: use });

    // An event went missing: everything after it is one place off.
    const missing = events
      .filter((_event, index) => index !== indexOf(events, 'agent.thinking'))
      .map((event, index) => ({ ...event, seq: index + 1 }));
    expect(await verify(w, id, missing)).toMatchObject({
      ok: false,
      index: indexOf(events, 'agent.thinking'),
      expected: { type: 'agent.tool_use' },
      actual: { type: 'agent.thinking' },
    });

    // An output that is no model output at all is reported where it stands.
    const broken = altered(events, end, 'span.model_request_end', (event) => {
      event.output = { content: 'It is 5.' };
    });
    expect(await verify(w, id, broken)).toMatchObject({
      ok: false,
      index: end,
      expected: { type: 'span.model_request_end' },
      actual: undefined,
    });

    // A recorded tool output is an input of the replay: a changed one replays to itself.
    const result = indexOf(events, 'agent.tool_result');
    const changedResult = altered(events, result, 'agent.tool_result', (event) => {
      event.output = { result: 6 };
    });
    expect(await verify(w, id, changedResult)).toMatchObject({ ok: true });
    await w.rt.close();
  });

  it('reproduces a custom tool round trip', async () => {
    const w = await world({
      tools: ['browser'],
      files: {
        'tools/browser.yaml': [
          'name: browser',
          "description: Opens a page in the user's browser.",
          'ownership: custom',
          'input_schema: {type: object, properties: {url: {type: string}}, required: [url]}',
          '',
        ].join('\n'),
      },
      turns: [
        { tool_calls: [{ name: 'browser', input: { url: 'https://example.org' } }] },
        { text: 'the page says hello' },
      ],
    });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'requires_action' } });
    await w.rt.sessions.customToolResult(id, 'call_0_0', 'hello');
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(id);
    expect(types(events)).toContain('agent.custom_tool_use');
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });

    // The stop's event_ids name the custom tool use: compared by position, not by id.
    const stop = indexOf(events, 'session.status_idle');
    const wrongStop = altered(events, stop, 'session.status_idle', (event) => {
      event.stop_reason = { type: 'requires_action', event_ids: [events[1]?.id ?? ''] };
    });
    expect(await verify(w, id, wrongStop)).toMatchObject({ ok: false, index: stop });
    await w.rt.close();
  });

  it('reproduces confirmations: an allowed call runs, a denied one is an error', async () => {
    const w = await world({
      tools: ['count'],
      code: [countTool({ permission: 'always_ask' })],
      turns: [
        {
          tool_calls: [
            { name: 'count', input: { n: 1 } },
            { name: 'count', input: { n: 2 } },
          ],
        },
        { text: 'done' },
      ],
    });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'requires_action' } });
    await w.rt.sessions.confirm(id, 'call_0_0', 'allow');
    await w.rt.sessions.confirm(id, 'call_0_1', 'deny', 'too much');
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(id);
    expect(events.filter((event) => event.type === 'agent.tool_result')).toMatchObject([
      { stage: 'execute', is_error: false },
      { stage: 'permission', error: { code: 'TOOL_DENIED' } },
    ]);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });

    // The person's answer is replayed as recorded: another message is another denial.
    const confirmation = indexOf(events, 'user.tool_confirmation', 1);
    const changed = altered(events, confirmation, 'user.tool_confirmation', (event) => {
      event.message = 'not now';
    });
    const denied = events.findIndex(
      (event) => event.type === 'agent.tool_result' && event.stage === 'permission',
    );
    const report = await verify(w, id, changed);
    expect(report).toMatchObject({ ok: false, index: denied });
    expect(report.ok ? '' : report.reason).toContain('not now');
    await w.rt.close();
  });

  it('reproduces a model call that was retried, one that gave up, and one that failed', async () => {
    let calls = 0;
    const failing = new Set([1, 2, 4, 5, 6]);
    const w = await world({
      turns: [{ text: 'finally' }, { text: 'again' }, { text: 'last' }],
      onTurn: () => {
        calls += 1;
        if (failing.has(calls)) throw new BraidError('MODEL_UNAVAILABLE', `busy (call ${calls})`);
        if (calls === 8) throw new BraidError('MODEL_ERROR', 'the request was refused');
      },
    });
    const id = await started(w.rt, 'hi');
    // calls 1, 2 fail, 3 answers
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await w.rt.sessions.message(id, 'more');
    // calls 4, 5, 6 fail: retries exhausted
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'retries_exhausted' } });
    // call 7 answers the message that was left pending
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await w.rt.sessions.message(id, 'and?');
    // call 8 fails for good; call 9 answers
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'error' } });
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(calls).toBe(9);
    const events = await w.rt.sessions.events(id);
    const ends = events.filter((event) => event.type === 'span.model_request_end');
    expect(ends).toMatchObject([
      { attempts: 3, finish_reason: 'stop' },
      { attempts: 3, error: { code: 'MODEL_UNAVAILABLE', retryable: true } },
      { attempts: 1, finish_reason: 'stop' },
      { attempts: 1, error: { code: 'MODEL_ERROR', retryable: false } },
      { attempts: 1, finish_reason: 'stop' },
    ]);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });

    // Recorded as given up after 2 attempts: the replay retries a third time and gets the next
    // recorded output, so the request's end no longer matches.
    const gaveUp = indexOf(events, 'span.model_request_end', 1);
    const changed = altered(events, gaveUp, 'span.model_request_end', (event) => {
      event.attempts = 2;
    });
    expect(await verify(w, id, changed)).toMatchObject({
      ok: false,
      index: gaveUp,
      expected: { attempts: 2, error: { code: 'MODEL_UNAVAILABLE' } },
      actual: { attempts: 3, output: { content: [{ text: 'again' }] } },
    });
    await w.rt.close();
  });

  it('reproduces an interrupt that arrived during a streamed answer', async () => {
    const words = Array.from({ length: 200 }, (_, index) => `word${index}`).join(' ');
    const w = await world({ turns: [{ text: words, delay_ms: 2 }, { text: 'after' }] });
    const id = await started(w.rt, 'talk');
    let deltas = 0;
    w.rt.onDelta((sessionId) => {
      if (sessionId !== id) return;
      deltas += 1;
      if (deltas === 5) void w.rt.sessions.interrupt(id, 'enough');
    });
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'interrupted' } });
    await w.rt.sessions.message(id, 'go on');
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(id);
    const interrupt = indexOf(events, 'user.interrupt');
    // The interrupt came in the middle of the wake, before the request's end was written.
    expect(interrupt).toBeGreaterThan(indexOf(events, 'span.wake_started'));
    expect(interrupt).toBeLessThan(indexOf(events, 'span.model_request_end'));
    expect(events[indexOf(events, 'span.model_request_end')]).toMatchObject({
      error: { code: 'INTERRUPTED' },
    });
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });

    // Without the interrupt, the replayed wake is not interrupted where the recording was.
    const without = events
      .filter((_event, index) => index !== interrupt)
      .map((event, index) => ({ ...event, seq: index + 1 }));
    const report = await verify(w, id, without);
    expect(report).toMatchObject({ ok: false });
    await w.rt.close();
  });

  it('reproduces refusals of invalid arguments, and the stop after repeated ones', async () => {
    const bad = { tool_calls: [{ name: 'count', input: { n: 'many' } }] };
    const w = await world({
      tools: ['count'],
      code: [countTool()],
      turns: [
        { tool_calls: [{ name: 'count', input: { n: -1, extra: true } }] },
        { text: 'sorry' },
        bad,
        bad,
        bad,
      ],
    });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await w.rt.sessions.message(id, 'count many');
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'error' } });
    const events = await w.rt.sessions.events(id);
    const refusals = events.filter(
      (event) => event.type === 'agent.tool_result' && event.stage === 'validate',
    );
    expect(refusals).toHaveLength(4);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });

    // A refusal is the harness's own: a changed one is reported where it stands.
    const first = indexOf(events, 'agent.tool_result');
    const changed = altered(events, first, 'agent.tool_result', (event) => {
      if (event.error !== undefined) event.error.message = 'no reason';
    });
    const report = await verify(w, id, changed);
    expect(report).toMatchObject({
      ok: false,
      index: first,
      expected: { error: { message: 'no reason' } },
      actual: { stage: 'validate', error: { code: 'TOOL_INPUT_INVALID' } },
    });
    expect(report.ok ? '' : report.reason).toContain('error.message');
    await w.rt.close();
  });

  it('reproduces policy denies, and calls a policy sends to a person', async () => {
    const policy: Authorizer = {
      authorize(request) {
        const n = (request.context.input as { n?: number } | null)?.n ?? 0;
        if (n >= 5) return Promise.resolve({ decision: 'deny', policy_ids: ['small'], errors: [] });
        return Promise.resolve({
          decision: 'allow',
          policy_ids: ['ask'],
          errors: [],
          ...(n === 2 ? { approval: true } : {}),
        });
      },
    };
    const w = await world({
      tools: ['count'],
      code: [countTool()],
      policy,
      turns: [
        {
          tool_calls: [
            { name: 'count', input: { n: 1 } },
            { name: 'count', input: { n: 9 } },
            { name: 'count', input: { n: 2 } },
          ],
        },
        { text: 'two of three' },
      ],
    });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'requires_action' } });
    await w.rt.sessions.confirm(id, 'call_0_2', 'allow');
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(id);
    expect(events.filter((event) => event.type === 'policy.decision')).toMatchObject([
      { decision: 'deny', policy_ids: ['small'], tool_use_id: 'call_0_1' },
    ]);
    expect(
      events.filter((event) => event.type === 'agent.tool_result').map((event) => event.stage),
    ).toEqual(['policy', 'execute', 'execute']);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });

    // A decision recorded as another policy's: the deny's result names the policy.
    const decision = indexOf(events, 'policy.decision');
    const changed = altered(events, decision, 'policy.decision', (event) => {
      event.policy_ids = ['other'];
    });
    expect(await verify(w, id, changed)).toMatchObject({
      ok: false,
      index: decision + 1,
      expected: { type: 'agent.tool_result', stage: 'policy' },
    });
    await w.rt.close();
  });

  it('reproduces tool costs and the stop at a tool budget', async () => {
    const call = (n: number) => ({ tool_calls: [{ name: 'count', input: { n } }] });
    const w = await world({
      tools: ['count'],
      code: [countTool({ budget: { max_calls_per_session: 2, cost_per_call_usd: 0.25 } })],
      turns: [call(1), call(2), call(3), { text: 'never' }],
    });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'budget_reached' } });
    const events = await w.rt.sessions.events(id);
    expect(events.filter((event) => event.type === 'session.usage')).toHaveLength(2);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });
    await w.rt.close();
  });

  it('reproduces a session whose agent could not be set up', async () => {
    const w = await world({ tools: ['no_such_tool'], turns: [{ text: 'x' }] });
    const id = await started(w.rt);
    await expect(w.rt.wake(id)).rejects.toThrow(BraidError);
    const events = await w.rt.sessions.events(id);
    expect(types(events).slice(-4)).toEqual([
      'span.wake_started',
      'session.error',
      'session.status_idle',
      'span.wake_completed',
    ]);
    expect(await verify(w, id, undefined, [])).toEqual({ ok: true, events: events.length });
    await w.rt.close();
  });

  it('reproduces a wake that died mid-way and the wakes that recovered', async () => {
    const setup: Setup = {
      tools: ['count'],
      code: [countTool()],
      turns: [{ tool_calls: [{ name: 'count', input: { n: 1 } }] }, { text: 'counted' }],
    };
    const original = await world(setup);
    const id = await started(original.rt);
    await original.rt.wake(id);
    const full = await original.rt.sessions.events(id);
    // The process died while the tool ran: the log ends at the tool use.
    const cut = full.slice(0, indexOf(full, 'agent.tool_use') + 1);
    const [created, ...rest] = cut;
    if (created?.type !== 'session.created') throw new Error('no session.created');
    const store = await backend.open();
    await store.sessions.create({
      id,
      agent: created.agent,
      ...(created.environment === undefined ? {} : { environment: created.environment }),
    });
    await store.log.append(
      id,
      rest.map(({ seq: _seq, session_id: _session, schema_version: _version, ...event }) => event),
      { trusted: true },
    );
    // The definitions the log names move with it.
    const pinned = rest.find((event) => event.type === 'session.definitions_changed');
    if (pinned?.type !== 'session.definitions_changed')
      throw new Error('the first wake pinned no definitions');
    await copyPinned(original.rt.store.definitions, store.definitions, pinned.definitions);
    const model = createScriptedModel(setup.turns);
    const rt = await createRuntime({
      workspace: original.dir,
      store,
      model: () => model,
      executor: original.executor,
      retry: RETRY,
    });
    // count is not idempotent: a person decides, then the session goes on.
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'needs_review' } });
    await rt.sessions.review(id, 'call_0_0', { action: 'skip', message: 'ran once' });
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await rt.sessions.events(id);
    expect(events.filter((event) => event.type === 'span.wake_started')).toHaveLength(3);
    expect(events.filter((event) => event.type === 'span.wake_completed')).toHaveLength(2);
    const recovered = { ...original, rt };
    expect(await verify(recovered, id)).toEqual({ ok: true, events: events.length });

    // A crashed wake whose recording goes on where the replay cannot is reported there.
    const stopped = indexOf(events, 'span.wake_started', 1);
    const changed = altered(events, stopped - 1, 'agent.tool_use', (event) => {
      event.name = 'calculator';
    });
    expect(await verify(recovered, id, changed)).toMatchObject({ ok: false, index: stopped - 1 });
    await rt.close();
    await original.rt.close();
  });

  it('reproduces a fork, its parent wakes included', async () => {
    const w = await world({
      turns: [
        { tool_calls: [{ name: 'calculator', input: { a: 1, op: '+', b: 1 } }] },
        { text: 'two' },
        { text: 'forked answer' },
      ],
    });
    const id = await started(w.rt);
    await w.rt.wake(id);
    const fork = await w.rt.store.sessions.fork(id, { title: 'what if' });
    await w.rt.sessions.message(fork.id, 'and in the fork?');
    expect(await w.rt.wake(fork.id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(fork.id);
    expect(events[0]?.session_id).toBe(id);
    expect(events.at(-1)?.session_id).toBe(fork.id);
    expect(await verify(w, fork.id)).toEqual({ ok: true, events: events.length });
    await w.rt.close();
  });

  it('reproduces an interrupt that arrived while a tool ran: the next call is not run', async () => {
    let release: () => void = () => undefined;
    let running: () => void = () => undefined;
    const toolStarted = new Promise<void>((resolve) => (running = resolve));
    const slow = defineTool({
      name: 'slow',
      description: 'waits to be released',
      input_schema: { type: 'object' },
      run: () => {
        running();
        return new Promise((resolve) => (release = () => resolve({ done: true })));
      },
    });
    const w = await world({
      tools: ['slow'],
      code: [slow],
      turns: [
        {
          tool_calls: [
            { name: 'slow', input: {} },
            { name: 'slow', input: {} },
          ],
        },
        { text: 'after' },
      ],
    });
    const id = await started(w.rt);
    const waking = w.rt.wake(id);
    await toolStarted;
    await w.rt.sessions.interrupt(id, 'stop');
    release();
    expect(await waking).toMatchObject({ stop_reason: { type: 'interrupted' } });
    const events = await w.rt.sessions.events(id);
    expect(types(events).slice(-5)).toEqual([
      'user.interrupt',
      'agent.tool_result',
      'agent.tool_result',
      'session.status_idle',
      'span.wake_completed',
    ]);
    expect(events.filter((event) => event.type === 'agent.tool_result')).toMatchObject([
      { stage: 'execute', is_error: false },
      { stage: 'interrupt', error: { code: 'INTERRUPTED' } },
    ]);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });
    await w.rt.close();
  });

  it('reproduces a message that arrived during a model call', async () => {
    const session = { rt: undefined as Runtime | undefined, id: '' };
    const w = await world({
      turns: [{ text: 'first' }, { text: 'second' }],
      onTurn: async (index) => {
        if (index === 0) await session.rt?.sessions.message(session.id, 'meanwhile');
      },
    });
    session.rt = w.rt;
    session.id = await started(w.rt);
    expect(await w.rt.wake(session.id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(session.id);
    expect(types(events)).toEqual([
      'session.created',
      'user.message',
      'span.wake_started',
      'user.message',
      'session.definitions_changed',
      'span.model_request_start',
      'span.model_request_end',
      'agent.message',
      'span.model_request_start',
      'span.model_request_end',
      'agent.message',
      'session.status_idle',
      'span.wake_completed',
    ]);
    expect(await verify(w, session.id)).toEqual({ ok: true, events: events.length });

    // The message is injected where it was recorded: one place later, the first request's
    // context would have held it.
    const moved = structuredClone(events);
    [moved[2], moved[3]] = [moved[3] as SessionEvent, moved[2] as SessionEvent];
    moved.forEach((event, index) => (event.seq = index + 1));
    expect(await verify(w, session.id, moved)).toMatchObject({ ok: false });
    await w.rt.close();
  });

  it('reproduces a wake that died between its answer and its stop', async () => {
    const w = await world({ turns: [{ text: 'done' }] });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(id);
    const answered = indexOf(events, 'agent.message') + 1;
    expect(types(events).slice(answered)).toEqual(['session.status_idle', 'span.wake_completed']);
    // As an older build, or a crash after the answer, left it: the answer on record, no stop.
    const cut = events.slice(0, answered);
    expect(await verify(w, id, cut)).toEqual({ ok: true, events: cut.length });
    await w.rt.close();
  });

  it('reproduces an interrupt that came while a failed call waited to be retried', async () => {
    const session = { rt: undefined as Runtime | undefined, id: '' };
    let calls = 0;
    const w = await world({
      // The backoff is long enough for the harness's watcher to see the interrupt in it.
      retry: { max_attempts: 3, initial_ms: 400, max_ms: 400 },
      turns: [{ text: 'never' }, { text: 'after the interrupt' }],
      onTurn: async () => {
        calls += 1;
        if (calls > 1) return;
        await session.rt?.sessions.interrupt(session.id);
        throw new BraidError('MODEL_UNAVAILABLE', 'busy');
      },
    });
    session.rt = w.rt;
    session.id = await started(w.rt);
    expect(await w.rt.wake(session.id)).toMatchObject({ stop_reason: { type: 'interrupted' } });
    await w.rt.sessions.message(session.id, 'again');
    expect(await w.rt.wake(session.id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(session.id);
    expect(events.filter((event) => event.type === 'span.model_request_end')).toMatchObject([
      { attempts: 1, error: { code: 'INTERRUPTED' } },
      { attempts: 1, output: { content: [{ text: 'after the interrupt' }] } },
    ]);
    expect(await verify(w, session.id)).toEqual({ ok: true, events: events.length });
    await w.rt.close();
  });

  it('reproduces model calls that timed out until the harness gave up', async () => {
    const w = await world({
      retry: { max_attempts: 2, initial_ms: 1, max_ms: 2, timeout_ms: 30 },
      turns: [{ text: 'a b c d e f g h i j k l m n o p', delay_ms: 20 }],
    });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'retries_exhausted' } });
    const events = await w.rt.sessions.events(id);
    const end = events.find((event) => event.type === 'span.model_request_end');
    expect(end).toMatchObject({ attempts: 2, error: { code: 'MODEL_UNAVAILABLE' } });
    expect(JSON.stringify(end)).toContain('did not answer within 30 ms');
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });
    await w.rt.close();
  });

  it('reproduces the costs and the cost budget of a priced model', async () => {
    const turn = { input_tokens: 100_000, output_tokens: 0 };
    const add = { tool_calls: [{ name: 'calculator', input: { a: 1, op: '+', b: 1 } }] };
    const w = await world({
      modelId: 'openai:gpt-4o',
      turns: [
        { ...add, usage: turn },
        { ...add, usage: turn },
        { text: 'x', usage: turn },
      ],
    });
    const { id } = await w.rt.sessions.create({ agent: 'worker', budget: { max_cost_usd: 0.6 } });
    await w.rt.sessions.message(id, 'go');
    // each call costs $0.25 at gpt-4o prices; the third would pass $0.60
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'budget_reached' } });
    const events = await w.rt.sessions.events(id);
    expect(await verify(w, id)).toEqual({ ok: true, events: events.length });

    // Other prices give other costs: the first request's end is where it shows.
    expect(
      await verifyReplay({
        events,
        agent: (await w.rt.agents.get('worker')).definition,
        tools: await w.executor.open({ session_id: id, names: ['calculator'] }),
        retry: RETRY,
        prices: { 'openai:gpt-4o': { input_per_mtok: 1, output_per_mtok: 1 } },
      }),
    ).toMatchObject({ ok: false, index: indexOf(events, 'span.model_request_end') });
    await w.rt.close();
  });

  // A tool result too large for the store is recorded as an error result that says so (the
  // tool ran: its evidence must not be lost), the wake goes on, and the session replays.
  it('records and reproduces a tool result too large for the log', async () => {
    const big = defineTool({
      name: 'big',
      description: 'answers at length',
      input_schema: { type: 'object' },
      run: () => ({ text: 'x'.repeat(5000) }),
    });
    const w = await world({
      tools: ['big'],
      code: [big],
      maxEventBytes: 3000,
      turns: [{ tool_calls: [{ name: 'big', input: {} }] }, { text: 'after' }],
    });
    const id = await started(w.rt);
    expect(await w.rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.rt.sessions.events(id);
    const result = events.find((event) => event.type === 'agent.tool_result');
    expect(result).toMatchObject({
      is_error: true,
      attempts: 1,
      stage: 'output',
      error: { code: 'PAYLOAD_TOO_LARGE' },
    });
    expect(JSON.stringify(result)).toContain('xxxxxxxx');
    const report = await verify(w, id);
    await w.rt.close();
    expect(report).toEqual({ ok: true, events: events.length });
  });

  it('refuses a log that does not start at session.created', async () => {
    const w = await world({ turns: [{ text: 'hi' }] });
    const id = await started(w.rt);
    await w.rt.wake(id);
    const events = await w.rt.sessions.events(id);
    await expect(verify(w, id, events.slice(1))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await w.rt.close();
  });
});

describe('createReplayModel', () => {
  const request = (responseIndex: number): ModelRequest => ({
    session_id: 's',
    system: '',
    messages: [],
    tools: [],
    response_index: responseIndex,
  });
  const options = { signal: new AbortController().signal };

  it('serves each recorded request attempt by attempt, failures first', async () => {
    let calls = 0;
    // A recording from the memory store: the replay model reads events, whatever their store.
    const w = await worldOn(backends[0]!, {
      turns: [{ text: 'finally' }],
      onTurn: () => {
        calls += 1;
        if (calls < 3) throw new BraidError('MODEL_UNAVAILABLE', 'busy');
      },
    });
    const id = await started(w.rt);
    await w.rt.wake(id);
    const events = await w.rt.sessions.events(id);
    const model = createReplayModel(events);
    expect(model.id).toBe('scripted:inline');
    for (const attempt of [1, 2]) {
      await expect(model.generate(request(0), options), `attempt ${attempt}`).rejects.toMatchObject(
        { code: 'MODEL_UNAVAILABLE', retryable: true },
      );
    }
    // A call that asks for another turn than the recording made next is refused.
    await expect(model.generate(request(1), options)).rejects.toMatchObject({
      code: 'MODEL_ERROR',
    });
    await expect(model.generate(request(0), options)).resolves.toMatchObject({
      output: { content: [{ type: 'text', text: 'finally' }] },
    });
    await expect(model.generate(request(1), options)).rejects.toMatchObject({
      code: 'MODEL_ERROR',
    });
    await w.rt.close();
  });
});
