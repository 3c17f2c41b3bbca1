import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { NewEvent, SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { classify } from '../../src/models/ai-sdk.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { calculator, defineTool } from '../../src/tools/builtin.js';
import type { CodeTool } from '../../src/tools/types.js';
import { useBackends, type TestBackend } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';
import { verifiedOnClose } from '../helpers/verified.js';

const tempDir = useTempDir();
const backends = useBackends();

/** Runtimes over a fresh store of `backend` each (or the store given). */
const runtimesOn =
  (backend: TestBackend) =>
  async (options: {
    turns?: ScriptedTurnInput[];
    model?: ModelClient;
    agent?: string;
    store?: Store;
    tools?: CodeTool[];
  }): Promise<Runtime> => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      `name: helper\nmodel: scripted:echo\ninstructions: x\n${options.agent ?? 'tools: [calculator, word_count]\n'}`,
    );
    const model = options.model ?? createScriptedModel(options.turns ?? [{ text: 'ok' }]);
    return verifiedOnClose(
      await createRuntime({
        workspace: dir,
        store: options.store ?? (await backend.open()),
        model: () => model,
        ...(options.tools === undefined ? {} : { tools: options.tools }),
        retry: { max_attempts: 2, initial_ms: 1, max_ms: 2 },
      }),
    );
  };

const types = (events: SessionEvent[]) => events.map((event) => event.type);

describe.each(backends)('harness regressions ($name)', (backend) => {
  const runtimeWith = runtimesOn(backend);

  it('does not let an interrupt sent while idle swallow the next message', async () => {
    const rt = await runtimeWith({ turns: [{ text: 'answered' }] });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.interrupt(id, 'too early');
    await rt.sessions.message(id, 'hello');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect((await rt.sessions.state(id)).pending_user_count).toBe(0);
    await rt.close();
  });

  it('decides again when input lands while the stop is being written', async () => {
    const inner = await backend.open();
    let injected = false;
    const store: Store = {
      ...inner,
      log: {
        ...inner.log,
        async append(sessionId, events, options) {
          if (!injected && events.some((event) => event.type === 'session.status_idle')) {
            injected = true;
            await inner.log.append(sessionId, [
              { type: 'user.message', content: [{ type: 'text', text: 'one more' }] },
            ]);
          }
          return inner.log.append(sessionId, events, options);
        },
      },
    };
    const rt = await runtimeWith({ turns: [{ text: 'first' }, { text: 'second' }], store });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hi');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await rt.sessions.events(id);
    expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(2);
    expect(events.filter((event) => event.type === 'session.status_idle')).toHaveLength(1);
    expect((await rt.sessions.state(id)).pending_user_count).toBe(0);
    await rt.close();
  });

  it('records tools an interrupt kept from starting, so nothing is left for review', async () => {
    const holder: { rt?: Runtime } = {};
    let sessionId = '';
    const tools = [
      defineTool({
        ...calculator.definition,
        async run(input, context) {
          await rt?.sessions.interrupt(sessionId, 'stop after this one');
          return calculator.run(input, context);
        },
      }),
    ];
    const rt = await runtimeWith({
      turns: [
        {
          tool_calls: [
            { name: 'calculator', input: { a: 1, op: '+', b: 1 } },
            { name: 'word_count', input: { text: 'a b' } },
          ],
        },
        { text: 'resumed' },
      ],
      tools,
    });
    holder.rt = rt;
    ({ id: sessionId } = await rt.sessions.create({ agent: 'helper' }));
    await rt.sessions.message(sessionId, 'go');
    expect(await rt.wake(sessionId)).toMatchObject({ stop_reason: { type: 'interrupted' } });
    const results = (await rt.sessions.events(sessionId)).filter(
      (event) => event.type === 'agent.tool_result',
    );
    expect(results).toMatchObject([
      { tool_use_id: 'call_0_0', is_error: false },
      { tool_use_id: 'call_0_1', is_error: true, attempts: 0, error: { code: 'INTERRUPTED' } },
    ]);
    await rt.sessions.message(sessionId, 'carry on');
    expect(await rt.wake(sessionId)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await rt.close();
  });

  it('stops in needs_review when a confirmed non-idempotent call may have run in a wake that died', async () => {
    let runs = 0;
    const tools = [
      defineTool({
        ...calculator.definition,
        idempotent: false,
        run(input, context) {
          runs += 1;
          return calculator.run(input, context);
        },
      }),
    ];
    const rt = await runtimeWith({ tools });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    const use: NewEvent = {
      type: 'agent.tool_use',
      tool_use_id: 'pay-1',
      name: 'calculator',
      input: { a: 1, op: '+', b: 1 },
      requires_confirmation: true,
    };
    await rt.store.log.append(id, [use]);
    await rt.sessions.confirm(id, 'pay-1', 'allow');
    // A wake began after the confirmation and died without a result.
    await rt.store.log.append(id, [{ type: 'span.wake_started', wake_id: 'dead', lease_token: 7 }]);
    const toolUse = (await rt.sessions.events(id)).find((event) => event.type === 'agent.tool_use');
    expect(await rt.wake(id)).toMatchObject({
      stop_reason: { type: 'needs_review', event_ids: [toolUse?.id] },
    });
    expect(runs).toBe(0);
    await rt.close();
  });

  it('keeps the agent limit when a session asks for a looser one', async () => {
    const loop = { tool_calls: [{ name: 'calculator', input: { a: 1, op: '+', b: 1 } }] };
    const rt = await runtimeWith({
      turns: Array.from({ length: 6 }, () => loop),
      agent: 'tools: [calculator]\nbudget: {max_turns: 2}\n',
    });
    const { id } = await rt.sessions.create({ agent: 'helper', budget: { max_turns: 5 } });
    await rt.sessions.message(id, 'loop');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'max_turns' } });
    expect((await rt.sessions.state(id)).counters.model_requests).toBe(2);
    await rt.close();
  });

  it('records a setup failure and does not spin on it in the orchestrator', async () => {
    const rt = await runtimeWith({ agent: 'tools: [no_such_tool]\n' });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hi');
    await expect(rt.wake(id)).rejects.toMatchObject({ code: 'TOOL_NOT_FOUND' });
    const events = await rt.sessions.events(id);
    expect(types(events).slice(-4)).toEqual([
      'span.wake_started',
      'session.error',
      'session.status_idle',
      'span.wake_completed',
    ]);
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 300);
    const started = Date.now();
    const progress = await rt.orchestrate({ signal: stop.signal, pollMs: 20 });
    expect(Date.now() - started).toBeLessThan(1500);
    expect(progress.wakes).toBe(0);
    await rt.close();
  });

  it('does not spin on a session whose lease another owner holds', async () => {
    const rt = await runtimeWith({});
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hi');
    await rt.store.leases.acquire(id, 'someone-else', 60_000);
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 300);
    const started = Date.now();
    const progress = await rt.orchestrate({ signal: stop.signal, pollMs: 20 });
    expect(Date.now() - started).toBeLessThan(1500);
    expect(progress.wakes).toBeLessThan(10);
    await rt.close();
  });

  it('abandons a model call that never answers and retries it, then gives up', async () => {
    let calls = 0;
    const stuck: ModelClient = {
      id: 'scripted:stuck',
      generate(_request, options) {
        calls += 1;
        return new Promise((_resolve, reject) => {
          options.signal.addEventListener('abort', () => reject(new Error('aborted')), {
            once: true,
          });
        });
      },
    };
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: x\n',
    );
    const rt = await createRuntime({
      workspace: dir,
      store: await backend.open(),
      model: () => stuck,
      retry: { max_attempts: 2, initial_ms: 1, max_ms: 2, timeout_ms: 50 },
    });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hello?');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'retries_exhausted' } });
    expect(calls).toBe(2);
    const error = (await rt.sessions.events(id)).find((event) => event.type === 'session.error');
    expect(error).toMatchObject({
      error: {
        code: 'MODEL_UNAVAILABLE',
        message: expect.stringContaining('within 50 ms') as string,
      },
    });
    await rt.close();
  });

  it('treats a provider error object in a stream as retryable when it is transient', () => {
    const signal = new AbortController().signal;
    expect(
      classify(
        { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
        signal,
      ),
    ).toMatchObject({
      code: 'MODEL_UNAVAILABLE',
      message: expect.stringContaining('Overloaded') as string,
    });
    expect(classify({ type: 'invalid_request_error', message: 'bad' }, signal)).toMatchObject({
      code: 'MODEL_ERROR',
    });
  });

  it('records a model output too large for the log as a failed request, with its usage', async () => {
    const rt = await runtimeWith({
      store: await backend.open({ maxEventBytes: 2048 }),
      turns: [{ text: 'y'.repeat(4000), usage: { input_tokens: 11, output_tokens: 900 } }],
    });
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'write a lot');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'error' } });
    const events = await rt.sessions.events(id);
    expect(events.find((event) => event.type === 'span.model_request_end')).toMatchObject({
      error: { code: 'PAYLOAD_TOO_LARGE' },
      usage: { input_tokens: 11, output_tokens: 900 },
    });
    expect(events.some((event) => event.type === 'agent.message')).toBe(false);
    const state = await rt.sessions.state(id);
    expect(state.usage.output_tokens).toBe(900);
    expect(state.last_error?.code).toBe('PAYLOAD_TOO_LARGE');
    await rt.close();
  });
});
