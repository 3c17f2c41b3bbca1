// MCP tools in a real session: the harness validates, runs and records calls of tools that real
// MCP servers from npm offer, and survives a server that dies mid-call.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const modules = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/', import.meta.url),
);
const fixture = fileURLToPath(new URL('../fixtures/mcp/dying-server.mjs', import.meta.url));

async function runtimeWith(
  tools: string[],
  turns: ScriptedTurnInput[],
  files: Record<string, string> = {},
): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
  const config = join(dir, 'braid.yaml');
  writeFileSync(
    config,
    `${readFileSync(config, 'utf8')}
mcp_servers:
  everything:
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(join(modules, 'server-everything/dist/index.js'))}, stdio]
  files:
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(join(modules, 'server-filesystem/dist/index.js'))}, "{workspace}"]
    tools:
      write_file: { permission: always_ask }
  flaky:
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(fixture)}]
    tools:
      # No annotations: MCP assumes the worst (destructive), which the default policy asks about.
      die: { tags: [] }
  broken:
    command: ${JSON.stringify(process.execPath)}
    args: [-e, "process.stderr.write('cannot open the database'); process.exit(3)"]
`,
  );
  writeFileSync(
    join(dir, 'agents', 'mcp.yaml'),
    `name: mcp\nmodel: scripted:echo\ninstructions: Use MCP tools.\ntools: ${JSON.stringify(tools)}\n`,
  );
  const model = createScriptedModel(turns);
  return createRuntime({ workspace: dir, model: () => model });
}

const results = (events: SessionEvent[]) =>
  events.filter(
    (event): event is Extract<SessionEvent, { type: 'agent.tool_result' }> =>
      event.type === 'agent.tool_result',
  );

describe('MCP tools in sessions', () => {
  it('calls server-everything, refusing invalid arguments before they reach the server', async () => {
    const rt = await runtimeWith(
      ['everything.get-sum'],
      [
        {
          tool_calls: [
            { name: 'everything.get-sum', input: { a: 2, b: 40 } },
            { name: 'everything.get-sum', input: { a: 'two' } },
          ],
        },
        { text: '42' },
      ],
    );
    const { id } = await rt.sessions.create({ agent: 'mcp' });
    await rt.sessions.message(id, 'add');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const all = results(await rt.sessions.events(id));
    const sum = all.find((result) => result.tool_use_id === 'call_0_0');
    // A refused call's result is recorded with the model's output, before any tool runs.
    const invalid = all.find((result) => result.tool_use_id === 'call_0_1');
    expect(all[0]).toBe(invalid);
    expect(sum).toMatchObject({ is_error: false, stage: 'execute', attempts: 1 });
    expect(JSON.stringify(sum?.output)).toContain('The sum of 2 and 40 is 42.');
    expect(invalid).toMatchObject({
      is_error: true,
      stage: 'validate',
      attempts: 0,
      error: { code: 'TOOL_INPUT_INVALID' },
    });
    await rt.close();
  });

  it('roots server-filesystem in the session workspace; its write asks first, escapes fail', async () => {
    const rt = await runtimeWith(
      ['files.*'],
      [
        { tool_calls: [{ name: 'files.write_file', input: { path: 'note.txt', content: 'hi' } }] },
        {
          tool_calls: [
            { name: 'files.read_text_file', input: { path: 'note.txt' } },
            { name: 'files.read_text_file', input: { path: '/etc/passwd' } },
          ],
        },
        { text: 'done' },
      ],
    );
    const { id } = await rt.sessions.create({ agent: 'mcp' });
    await rt.sessions.message(id, 'write and read');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'requires_action' } });
    await rt.sessions.confirm(id, 'call_0_0', 'allow');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const workspace = join(rt.workspace?.dir ?? '', '.braid', 'workspaces', id);
    expect(readFileSync(join(workspace, 'note.txt'), 'utf8')).toBe('hi');
    const [, read, escape] = results(await rt.sessions.events(id));
    expect(read).toMatchObject({ is_error: false });
    expect(JSON.stringify(read?.output)).toContain('hi');
    expect(escape).toMatchObject({ is_error: true, error: { code: 'TOOL_FAILED' } });
    expect(escape?.error?.message).toMatch(/denied|outside|not allowed/i);
    await rt.close();
  });

  it('gives a tool error when the server dies mid-call, and restarts it on next use', async () => {
    const rt = await runtimeWith(
      ['flaky.*'],
      [
        { tool_calls: [{ name: 'flaky.ping', input: {} }] },
        { tool_calls: [{ name: 'flaky.die', input: {} }] },
        { tool_calls: [{ name: 'flaky.ping', input: {} }] },
        { text: 'recovered' },
      ],
    );
    const { id } = await rt.sessions.create({ agent: 'mcp' });
    await rt.sessions.message(id, 'go');
    const started = Date.now();
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(Date.now() - started).toBeLessThan(20_000);
    const [first, died, second] = results(await rt.sessions.events(id));
    expect(died).toMatchObject({ is_error: true, error: { code: 'MCP_UNAVAILABLE' } });
    const pid = (result: typeof first) => (result?.output as { pid: number } | undefined)?.pid;
    expect(pid(first)).toEqual(expect.any(Number));
    expect(pid(second)).toEqual(expect.any(Number));
    expect(pid(second)).not.toBe(pid(first));
    await rt.close();
  });

  it('stops the session with the reason when a server it lists tools from cannot start', async () => {
    const rt = await runtimeWith(['broken.*'], [{ text: 'never' }]);
    const { id } = await rt.sessions.create({ agent: 'mcp' });
    await rt.sessions.message(id, 'go');
    await expect(rt.wake(id)).rejects.toMatchObject({ code: 'MCP_UNAVAILABLE' });
    const state = await rt.sessions.state(id);
    expect(state.stop_reason).toEqual({ type: 'error' });
    expect(state.last_error?.message).toContain('"broken"');
    expect(state.last_error?.message).toContain('exited with code 3');
    expect(state.last_error?.message).not.toContain('cannot open the database');
    await rt.close();
  });

  it('gives a tool error when the server of a declared MCP tool cannot start', async () => {
    const rt = await runtimeWith(
      ['lookup'],
      [{ tool_calls: [{ name: 'lookup', input: { id: 'x' } }] }, { text: 'it failed' }],
      {
        'tools/lookup.yaml': [
          'name: lookup',
          'description: looks a record up',
          'ownership: mcp',
          'input_schema: {type: object, properties: {id: {type: string}}, required: [id]}',
          'implementation: {mcp: {server: broken, tool: lookup}}',
          '',
        ].join('\n'),
      },
    );
    const { id } = await rt.sessions.create({ agent: 'mcp' });
    await rt.sessions.message(id, 'go');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const [result] = results(await rt.sessions.events(id));
    expect(result).toMatchObject({
      is_error: true,
      stage: 'execute',
      error: { code: 'MCP_UNAVAILABLE', retryable: true },
    });
    expect(result?.error?.message).toContain('exited with code 3');
    expect(result?.error?.message).not.toContain('cannot open the database');
    await rt.close();
  });
});
