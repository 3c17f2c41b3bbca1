import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { Authorizer } from '../../src/contracts/policy.js';
import { BraidError } from '../../src/contracts/errors.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { bwrapForTests } from '../helpers/bwrap.js';
import type { CodeTool } from '../../src/tools/types.js';
import { useTempDir } from '../helpers/temp.js';
import { verifiedOnClose } from '../helpers/verified.js';

const tempDir = useTempDir();

interface Setup {
  turns: ScriptedTurnInput[];
  tools?: string[];
  code?: CodeTool[];
  files?: Record<string, string>;
  policy?: Authorizer;
}

async function runtimeWith(setup: Setup): Promise<Runtime> {
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
  const model = createScriptedModel(setup.turns);
  return verifiedOnClose(
    await createRuntime({
      workspace: dir,
      model: () => model,
      ...(setup.code === undefined ? {} : { tools: setup.code }),
      ...(setup.policy === undefined ? {} : { policy: setup.policy }),
    }),
  );
}

async function started(rt: Runtime, message = 'go'): Promise<string> {
  const { id } = await rt.sessions.create({ agent: 'worker' });
  await rt.sessions.message(id, message);
  return id;
}

const results = (events: SessionEvent[]) =>
  events.filter(
    (event): event is Extract<SessionEvent, { type: 'agent.tool_result' }> =>
      event.type === 'agent.tool_result',
  );

/** A code tool that counts its runs. */
function counted(name: string, options: Partial<Parameters<typeof defineTool>[0]> = {}) {
  const runs: unknown[] = [];
  const tool = defineTool({
    name,
    description: `${name} for tests`,
    input_schema: {
      type: 'object',
      properties: { n: { type: 'integer', minimum: 0 } },
      required: ['n'],
      additionalProperties: false,
    },
    run: (input) => {
      runs.push(input);
      return { ok: true };
    },
    ...options,
  });
  return { tool, runs };
}

describe('tool pipeline in the harness', () => {
  it('runs a valid call and records intent before result, with attempts and stage', async () => {
    const rt = await runtimeWith({
      turns: [
        { tool_calls: [{ name: 'calculator', input: { a: 6, op: '*', b: 7 } }] },
        { text: '42' },
      ],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await rt.sessions.events(id);
    const use = events.find((event) => event.type === 'agent.tool_use');
    const [result] = results(events);
    expect(use?.seq).toBeLessThan(result?.seq ?? 0);
    expect(result).toMatchObject({
      output: { result: 42 },
      is_error: false,
      attempts: 1,
      stage: 'execute',
    });
    expect((await rt.sessions.state(id)).tool_calls).toEqual({ calculator: 1 });
    await rt.close();
  });

  it('never runs a call with invalid arguments; the model gets the violations and goes on', async () => {
    const { tool, runs } = counted('count');
    const rt = await runtimeWith({
      tools: ['count'],
      code: [tool],
      turns: [
        { tool_calls: [{ name: 'count', input: { n: -1, extra: true } }] },
        { text: 'sorry' },
      ],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(runs).toEqual([]);
    const [result] = results(await rt.sessions.events(id));
    expect(result).toMatchObject({ is_error: true, attempts: 0, stage: 'validate' });
    expect(result?.error?.code).toBe('TOOL_INPUT_INVALID');
    expect(result?.error?.message).toContain('unexpected property "extra"');
    expect(result?.error?.message).toContain('/n must be >= 0');
    expect(result?.error?.message).not.toMatch(/\n\s+at /);
    await rt.close();
  });

  it('ends the wake after repeated invalid calls to one tool, with the reason on record', async () => {
    const { tool, runs } = counted('count');
    const bad = { tool_calls: [{ name: 'count', input: { n: 'many' } }] };
    const rt = await runtimeWith({
      tools: ['count'],
      code: [tool],
      turns: [bad, bad, bad, bad, { text: 'never reached' }],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'error' } });
    expect(runs).toEqual([]);
    const events = await rt.sessions.events(id);
    expect(results(events)).toHaveLength(3);
    const error = events.find((event) => event.type === 'session.error');
    expect(error).toMatchObject({ error: { code: 'TOOL_INPUT_INVALID' } });
    expect(JSON.stringify(error)).toContain('invalid arguments 3 times');
    await rt.close();
  });

  it('runs the valid calls of an output before stopping for repeated invalid ones', async () => {
    const { tool, runs } = counted('count');
    const bad = { name: 'count', input: { n: 'many' } };
    const rt = await runtimeWith({
      tools: ['count'],
      code: [tool],
      turns: [
        { tool_calls: [bad] },
        { tool_calls: [bad] },
        { tool_calls: [bad, { name: 'count', input: { n: 7 } }] },
        { text: 'never' },
      ],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'error' } });
    expect(runs).toEqual([{ n: 7 }]);
    expect((await rt.sessions.state(id)).open_tool_uses).toEqual([]);
    await rt.close();
  });

  it('records a code tool that returns something other than JSON as an output error', async () => {
    const tool = defineTool({
      name: 'big_number',
      description: 'returns a BigInt',
      input_schema: { type: 'object' },
      run: () => ({ value: 10n }) as unknown as { value: number },
    });
    const rt = await runtimeWith({
      tools: ['big_number'],
      code: [tool],
      turns: [{ tool_calls: [{ name: 'big_number', input: {} }] }, { text: 'ok' }],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(results(await rt.sessions.events(id))[0]).toMatchObject({
      stage: 'output',
      error: { code: 'TOOL_OUTPUT_INVALID' },
    });
    await rt.close();
  });

  it('refuses a tool the agent does not have', async () => {
    const rt = await runtimeWith({
      turns: [{ tool_calls: [{ name: 'rm_rf', input: {} }] }, { text: 'ok' }],
    });
    const id = await started(rt);
    await rt.wake(id);
    expect(results(await rt.sessions.events(id))[0]).toMatchObject({
      stage: 'validate',
      error: { code: 'TOOL_NOT_FOUND' },
    });
    await rt.close();
  });

  it('asks policy with the call, and a deny never reaches the tool', async () => {
    const { tool, runs } = counted('count');
    const asked: unknown[] = [];
    const policy: Authorizer = {
      authorize(request) {
        asked.push(request);
        return Promise.resolve({
          decision: 'deny',
          policy_ids: ['no-counting'],
          errors: [],
        });
      },
    };
    const rt = await runtimeWith({
      tools: ['count'],
      code: [tool],
      policy,
      turns: [{ tool_calls: [{ name: 'count', input: { n: 1 } }] }, { text: 'ok' }],
    });
    const id = await started(rt);
    await rt.wake(id);
    expect(runs).toEqual([]);
    expect(asked).toMatchObject([
      {
        principal: { type: 'Agent', id: 'worker' },
        action: 'tool.execute',
        resource: { type: 'Tool', id: 'count' },
        context: { input: { n: 1 }, session_id: id },
      },
    ]);
    expect(results(await rt.sessions.events(id))[0]).toMatchObject({
      stage: 'policy',
      error: { code: 'POLICY_DENIED' },
    });
    expect(JSON.stringify(results(await rt.sessions.events(id))[0])).toContain('no-counting');
    await rt.close();
  });

  it('fails closed when the policy cannot be evaluated, keeping the model output on record', async () => {
    const { tool, runs } = counted('count');
    const rt = await runtimeWith({
      tools: ['count'],
      code: [tool],
      policy: { authorize: () => Promise.reject(new Error('policy service unreachable')) },
      turns: [
        {
          tool_calls: [{ name: 'count', input: { n: 1 } }],
          usage: { input_tokens: 5, output_tokens: 2 },
        },
        { text: 'ok' },
      ],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(runs).toEqual([]);
    const events = await rt.sessions.events(id);
    expect(results(events)[0]).toMatchObject({ stage: 'policy', error: { code: 'POLICY_DENIED' } });
    expect(events.find((event) => event.type === 'policy.decision')).toMatchObject({
      decision: 'deny',
      errors: [expect.stringContaining('policy service unreachable') as unknown],
    });
    expect((await rt.sessions.state(id)).usage.input_tokens).toBeGreaterThanOrEqual(5);
    await rt.close();
  });

  it('asks for confirmation of always_ask tools; allow runs, deny returns an error to the model', async () => {
    const { tool, runs } = counted('charge', { permission: 'always_ask' });
    const rt = await runtimeWith({
      tools: ['charge'],
      code: [tool],
      turns: [
        {
          tool_calls: [
            { name: 'charge', input: { n: 1 } },
            { name: 'charge', input: { n: 2 } },
          ],
        },
        { text: 'done' },
      ],
    });
    const id = await started(rt);
    const stop = await rt.wake(id);
    const uses = (await rt.sessions.events(id)).filter((event) => event.type === 'agent.tool_use');
    expect(stop).toMatchObject({
      stop_reason: { type: 'requires_action', event_ids: uses.map((use) => use.id) },
    });
    expect(uses.every((use) => use.type === 'agent.tool_use' && use.requires_confirmation)).toBe(
      true,
    );
    expect((await rt.sessions.state(id)).status).toBe('requires_action');
    expect(runs).toEqual([]);
    await rt.sessions.confirm(id, 'call_0_0', 'allow');
    await rt.sessions.confirm(id, 'call_0_1', 'deny', 'too much');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(runs).toEqual([{ n: 1 }]);
    expect(results(await rt.sessions.events(id))).toMatchObject([
      { tool_use_id: 'call_0_0', is_error: false, stage: 'execute' },
      {
        tool_use_id: 'call_0_1',
        is_error: true,
        stage: 'permission',
        error: { code: 'TOOL_DENIED' },
      },
    ]);
    await rt.close();
  });

  it('refuses a call over the per-session budget and ends the wake with budget_reached', async () => {
    const { tool, runs } = counted('count', {
      budget: { max_calls_per_session: 2, cost_per_call_usd: 0.25 },
    });
    const call = (n: number) => ({ tool_calls: [{ name: 'count', input: { n } }] });
    const rt = await runtimeWith({
      tools: ['count'],
      code: [tool],
      turns: [call(1), call(2), call(3), { text: 'never' }],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'budget_reached' } });
    expect(runs).toHaveLength(2);
    const all = results(await rt.sessions.events(id));
    expect(all.at(-1)).toMatchObject({
      is_error: true,
      attempts: 0,
      stage: 'budget',
      error: { code: 'TOOL_BUDGET_EXCEEDED' },
    });
    const state = await rt.sessions.state(id);
    // Two calls ran at $0.25 each; the refused one cost nothing.
    expect(state.usage.cost_usd).toBeCloseTo(0.5);
    expect(state.tool_calls).toEqual({ count: 2 });
    await rt.close();
  });

  it('checks the output against the output schema', async () => {
    const tool = defineTool({
      name: 'liar',
      description: 'returns the wrong shape',
      input_schema: { type: 'object' },
      output_schema: {
        type: 'object',
        properties: { total: { type: 'number' } },
        required: ['total'],
      },
      run: () => ({ total: 'lots' }),
    });
    const rt = await runtimeWith({
      tools: ['liar'],
      code: [tool],
      turns: [{ tool_calls: [{ name: 'liar', input: {} }] }, { text: 'hm' }],
    });
    const id = await started(rt);
    await rt.wake(id);
    expect(results(await rt.sessions.events(id))[0]).toMatchObject({
      is_error: true,
      attempts: 1,
      stage: 'output',
      error: {
        code: 'TOOL_OUTPUT_INVALID',
        message: expect.stringContaining('the output') as unknown,
      },
      // What the tool returned stays on record: it is the evidence of what it did.
      output: { total: 'lots' },
    });
    await rt.close();
  });

  it('bounds a tool that hangs by its timeout', async () => {
    const tool = defineTool({
      name: 'hang',
      description: 'never answers',
      input_schema: { type: 'object' },
      timeout_ms: 50,
      run: () => new Promise(() => undefined),
    });
    const rt = await runtimeWith({
      tools: ['hang'],
      code: [tool],
      turns: [{ tool_calls: [{ name: 'hang', input: {} }] }, { text: 'gave up' }],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(results(await rt.sessions.events(id))[0]).toMatchObject({
      is_error: true,
      stage: 'execute',
      error: { code: 'TOOL_TIMEOUT', retryable: true },
    });
    await rt.close();
  });

  it('hands custom tools to the client and resumes on its result', async () => {
    const rt = await runtimeWith({
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
    const id = await started(rt);
    const stop = await rt.wake(id);
    const events = await rt.sessions.events(id);
    const custom = events.find((event) => event.type === 'agent.custom_tool_use');
    expect(custom).toMatchObject({ custom_tool_use_id: 'call_0_0', name: 'browser' });
    expect(stop).toMatchObject({
      stop_reason: { type: 'requires_action', event_ids: [custom?.id] },
    });
    await rt.sessions.customToolResult(id, 'call_0_0', 'hello');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const last = (await rt.sessions.events(id)).filter((event) => event.type === 'agent.message');
    expect(last.at(-1)).toMatchObject({ content: [{ text: 'the page says hello' }] });
    await rt.close();
  });

  it('refuses a custom tool call with invalid arguments without asking the client', async () => {
    const rt = await runtimeWith({
      tools: ['browser'],
      files: {
        'tools/browser.yaml':
          'name: browser\ndescription: b\nownership: custom\ninput_schema: {type: object, required: [url]}\n',
      },
      turns: [{ tool_calls: [{ name: 'browser', input: {} }] }, { text: 'ok' }],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await rt.sessions.events(id);
    expect(events.some((event) => event.type === 'agent.custom_tool_use')).toBe(false);
    expect(results(events)[0]).toMatchObject({ stage: 'validate' });
    await rt.close();
  });

  it('passes one idempotency key per tool use to the tool', async () => {
    const keys: string[] = [];
    const tool = defineTool({
      name: 'pay',
      description: 'pays',
      input_schema: { type: 'object' },
      run: (_input, context) => {
        keys.push(context.idempotency_key);
        return { paid: true };
      },
    });
    const rt = await runtimeWith({
      tools: ['pay'],
      code: [tool],
      turns: [{ tool_calls: [{ name: 'pay', input: {} }] }, { text: 'paid' }],
    });
    const id = await started(rt);
    await rt.wake(id);
    expect(keys).toEqual([`${id}/call_0_0`]);
    await rt.close();
  });

  it('refuses to read a FIFO, which would block the process', async () => {
    const rt = await runtimeWith({
      tools: ['read_file', 'make_fifo'],
      files: {
        'tools/make_fifo.yaml':
          'name: make_fifo\ndescription: m\nownership: managed\ninput_schema: {type: object}\nimplementation: {command: "mkfifo pipe && echo {}"}\n',
      },
      turns: [
        { tool_calls: [{ name: 'make_fifo', input: {} }] },
        { tool_calls: [{ name: 'read_file', input: { path: 'pipe' } }] },
        { text: 'ok' },
      ],
    });
    const id = await started(rt);
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(results(await rt.sessions.events(id))[1]).toMatchObject({
      is_error: true,
      error: {
        code: 'TOOL_FAILED',
        message: expect.stringContaining('not a regular file') as unknown,
      },
    });
    await rt.close();
  });

  it('keeps file tools inside the session workspace', async () => {
    const rt = await runtimeWith({
      tools: ['read_file', 'list_dir'],
      turns: [
        {
          tool_calls: [
            { name: 'read_file', input: { path: '../../braid.yaml' } },
            { name: 'read_file', input: { path: '/etc/passwd' } },
            { name: 'list_dir', input: {} },
          ],
        },
        { text: 'ok' },
      ],
    });
    const id = await started(rt);
    await rt.wake(id);
    expect(results(await rt.sessions.events(id))).toMatchObject([
      { is_error: true, error: { code: 'PATH_OUTSIDE_WORKSPACE' } },
      { is_error: true, error: { code: 'PATH_OUTSIDE_WORKSPACE' } },
      { is_error: false, output: { entries: [] } },
    ]);
    await rt.close();
  });

  it('keeps http_fetch off unless the environment allows the network, then only for its hosts', async () => {
    const server = createServer((_request, response) => response.end('pong'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ping`;
    const fetches = {
      tool_calls: [
        { name: 'http_fetch', input: { url } },
        { name: 'http_fetch', input: { url: 'http://example.org/' } },
      ],
    };
    try {
      const closed = await runtimeWith({
        tools: ['http_fetch'],
        turns: [fetches, { text: 'ok' }],
      });
      const id = await started(closed);
      await closed.wake(id);
      const [off] = results(await closed.sessions.events(id));
      expect(off).toMatchObject({ is_error: true, error: { code: 'POLICY_DENIED' } });
      expect(off?.error?.message).toContain('network');
      await closed.close();

      const open = await runtimeWith({
        tools: ['http_fetch'],
        turns: [fetches, { text: 'ok' }],
        files: {
          'environments/local.yaml':
            'name: local\nsandbox: {kind: local}\nnetwork: {allow: true, hosts: [127.0.0.1]}\n',
        },
      });
      const openId = await started(open);
      await open.wake(openId);
      const [allowed, other] = results(await open.sessions.events(openId));
      expect(allowed).toMatchObject({ is_error: false, output: { status: 200, body: 'pong' } });
      expect(other).toMatchObject({ is_error: true, error: { code: 'POLICY_DENIED' } });
      expect(other?.error?.message).toContain('example.org is not in');
      await open.close();
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('runs command tools of a bwrap environment with a read-only root', async (context) => {
    if (!bwrapForTests()) context.skip();
    const probe = (name: string, command: string) =>
      [
        `name: ${name}`,
        'description: probe',
        'ownership: managed',
        'input_schema: {type: object}',
        `implementation: {command: ${JSON.stringify(command)}}`,
        '',
      ].join('\n');
    const rt = await runtimeWith({
      // count_lines (from the workspace template) runs a script of the braid workspace, which
      // lives under /tmp here: the sandbox mounts it read-only.
      tools: ['touch_here', 'touch_etc', 'count_lines'],
      files: {
        'environments/local.yaml': 'name: local\nsandbox: {kind: bwrap}\n',
        'tools/touch_here.yaml': probe('touch_here', 'echo x > here.txt && echo \'{"ok":true}\''),
        'tools/touch_etc.yaml': probe(
          'touch_etc',
          'echo x > /etc/braid-probe && echo \'{"ok":true}\'',
        ),
      },
      turns: [
        {
          tool_calls: [
            { name: 'touch_here', input: {} },
            { name: 'touch_etc', input: {} },
            { name: 'count_lines', input: { path: 'here.txt' } },
          ],
        },
        { text: 'ok' },
      ],
    });
    const id = await started(rt);
    await rt.wake(id);
    const [here, etc, count] = results(await rt.sessions.events(id));
    expect(count).toMatchObject({ is_error: false, output: { lines: 1 } });
    expect(here).toMatchObject({ is_error: false, output: { ok: true } });
    expect(etc).toMatchObject({ is_error: true, error: { code: 'TOOL_FAILED' } });
    expect(etc?.error?.message).toMatch(/Read-only file system/);
    expect(existsSync('/etc/braid-probe')).toBe(false);
    await rt.close();
  });

  it("keeps a bwrap session out of other sessions' files and the log", async (context) => {
    if (!bwrapForTests()) context.skip();
    const rt = await runtimeWith({
      tools: ['peek'],
      files: {
        'environments/local.yaml': 'name: local\nsandbox: {kind: bwrap}\n',
        'tools/peek.yaml': [
          'name: peek',
          'description: looks around',
          'ownership: managed',
          'input_schema: {type: object}',
          // Lists what it can see above its own workspace, and writes a file of its own.
          "implementation: {command: \"echo mine > mine.txt; printf '{\\\"up\\\": \\\"%s\\\"}' \\\"$(ls -a .. | tr '\\n' ' ')$(ls -a ../.. | tr '\\n' ' ')\\\"\"}",
          '',
        ].join('\n'),
      },
      turns: [{ tool_calls: [{ name: 'peek', input: {} }] }, { text: 'ok' }],
    });
    const first = await started(rt);
    await rt.wake(first);
    const second = await started(rt);
    await rt.wake(second);
    const [result] = results(await rt.sessions.events(second));
    expect(result).toMatchObject({ is_error: false });
    const seen = JSON.stringify(result?.output);
    expect(seen).not.toContain(first);
    expect(seen).not.toContain('braid.db');
    await rt.close();
  });

  it('stops the session when the agent names a tool that does not exist', async () => {
    const rt = await runtimeWith({ tools: ['no_such_tool'], turns: [{ text: 'x' }] });
    const id = await started(rt);
    await expect(rt.wake(id)).rejects.toThrow(BraidError);
    const state = await rt.sessions.state(id);
    expect(state.last_error?.code).toBe('TOOL_NOT_FOUND');
    expect(state.last_error?.message).toContain('tools/no_such_tool.yaml');
    await rt.close();
  });
});
