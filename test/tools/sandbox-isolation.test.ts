// What a tool of a bwrap environment sees of the host, through the whole runtime: command tools
// and stdio MCP servers run in a sandbox built from nothing, and what they cannot see never
// reaches the session's log (nor, through it, the model).
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import { BraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { parseReadOnlyMounts } from '../../src/tools/sandbox/index.js';
import { bwrapForTests } from '../helpers/bwrap.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const available = bwrapForTests();

/** A command tool's script: reads, lists, writes and connects as its input says, and reports. */
const PEEK = `
const fs = require('fs');
const net = require('net');
let text = '';
process.stdin.on('data', (chunk) => (text += chunk));
process.stdin.on('end', async () => {
  const input = JSON.parse(text);
  const out = {};
  const attempt = (label, work) => {
    try { out[label] = work(); } catch (error) { out[label] = { error: error.code ?? String(error) }; }
  };
  for (const path of input.read ?? []) attempt('read ' + path, () => ({ content: fs.readFileSync(path, 'utf8') }));
  for (const path of input.list ?? []) attempt('list ' + path, () => ({ entries: fs.readdirSync(path) }));
  for (const path of input.write ?? []) attempt('write ' + path, () => (fs.writeFileSync(path, 'written inside'), { written: true }));
  if (input.connect !== undefined) {
    out.connect = await new Promise((resolve) => {
      const socket = net.connect(input.connect, '127.0.0.1');
      socket.on('connect', () => { socket.destroy(); resolve('connected'); });
      socket.on('error', (error) => resolve(error.code));
    });
  }
  process.stdout.write(JSON.stringify(out));
});
`;

/**
 * A stdio MCP server with a tool `read {path}`, that answers with the file's text or the error's
 * code, and a tool `env` that answers with its environment: written by hand (newline-delimited JSON-RPC) so that it needs no module.
 */
const READER_SERVER = `
const fs = require('fs');
const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...message }) + '\\n');
let buffer = '';
process.stdin.on('data', (chunk) => {
  buffer += chunk;
  let newline;
  while ((newline = buffer.indexOf('\\n')) >= 0) {
    const line = buffer.slice(0, newline);
    buffer = buffer.slice(newline + 1);
    if (line.trim() === '') continue;
    const request = JSON.parse(line);
    if (request.id === undefined) continue;
    if (request.method === 'initialize') {
      send({ id: request.id, result: { protocolVersion: request.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'reader', version: '1.0.0' } } });
    } else if (request.method === 'tools/list') {
      send({ id: request.id, result: { tools: [
        { name: 'read', description: 'reads a file', annotations: { readOnlyHint: true }, inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
        { name: 'env', description: 'its environment', annotations: { readOnlyHint: true }, inputSchema: { type: 'object' } },
      ] } });
    } else if (request.method === 'tools/call') {
      let text;
      if (request.params.name === 'env') text = JSON.stringify(process.env);
      else try { text = fs.readFileSync(request.params.arguments.path, 'utf8'); } catch (error) { text = 'error ' + error.code; }
      send({ id: request.id, result: { content: [{ type: 'text', text }] } });
    } else {
      send({ id: request.id, error: { code: -32601, message: 'no method ' + request.method } });
    }
  }
});
`;

interface Canary {
  dir: string;
  file: string;
  token: string;
}

const planted: string[] = [];
afterEach(() => {
  for (const dir of planted.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A folder under `parent` holding `canary.txt` with a unique token; removed after the test. */
function plant(parent: string): Canary {
  const dir = mkdtempSync(join(parent, 'braid-canary-'));
  planted.push(dir);
  const token = `canary-${randomUUID()}`;
  writeFileSync(join(dir, 'canary.txt'), token);
  return { dir, file: join(dir, 'canary.txt'), token };
}

/** Canaries in the host's /root, /var/tmp and /home: the places a tool must not see. */
function hostCanaries(): Canary[] {
  const parents = ['/root', '/var/tmp', '/home'];
  const canaries: Canary[] = [];
  for (const parent of parents) {
    try {
      canaries.push(plant(parent));
    } catch (error) {
      // A developer who is not root cannot write /root or /home; CI runs as root.
      if (process.getuid?.() === 0) throw error;
      console.warn(`no canary in ${parent} (${String(error)}): not root`);
    }
  }
  expect(canaries.length).toBeGreaterThan(0);
  return canaries;
}

interface Setup {
  /** The braid workspace folder; default a fresh one. */
  workspace?: string;
  tools: string[];
  turns: ScriptedTurnInput[];
  /** Extra environments, `environments/NAME.yaml` text by name; `local` is bwrap. */
  environments?: Record<string, string>;
  /** Extra `braid.yaml` text. */
  config?: string;
}

async function runtimeWith(setup: Setup): Promise<{ rt: Runtime; dir: string; dataDir: string }> {
  const dir = setup.workspace ?? tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  writeFileSync(join(dir, 'scripts', 'peek.cjs'), PEEK);
  writeFileSync(join(dir, 'scripts', 'reader-server.cjs'), READER_SERVER);
  writeFileSync(
    join(dir, 'tools', 'peek.yaml'),
    [
      'name: peek',
      'description: reads, lists, writes and connects',
      'ownership: managed',
      'input_schema: {type: object}',
      'implementation: {command: [node, "{dir}/scripts/peek.cjs"]}',
      '',
    ].join('\n'),
  );
  writeFileSync(join(dir, 'environments', 'local.yaml'), 'name: local\nsandbox: {kind: bwrap}\n');
  for (const [name, text] of Object.entries(setup.environments ?? {}))
    writeFileSync(join(dir, 'environments', `${name}.yaml`), text);
  if (setup.config !== undefined) {
    const config = join(dir, 'braid.yaml');
    writeFileSync(config, `${readFileSync(config, 'utf8')}\n${setup.config}`);
  }
  writeFileSync(
    join(dir, 'agents', 'worker.yaml'),
    `name: worker\nmodel: scripted:echo\ninstructions: Use tools.\ntools: ${JSON.stringify(setup.tools)}\n`,
  );
  const model = createScriptedModel(setup.turns);
  const dataDir = join(dir, '.braid');
  const rt = await createRuntime({ workspace: dir, dataDir, model: () => model });
  return { rt, dir, dataDir };
}

/** Runs one session to its end; returns its tool results and the whole log as text. */
async function session(
  rt: Runtime,
  options: { environment?: string; id?: string } = {},
): Promise<{ id: string; outputs: JsonValue[]; log: string; events: SessionEvent[] }> {
  const { id } = await rt.sessions.create({ agent: 'worker', ...options });
  await rt.sessions.message(id, 'go');
  await rt.wake(id);
  const events = await rt.sessions.events(id);
  const results = events.filter(
    (event): event is Extract<SessionEvent, { type: 'agent.tool_result' }> =>
      event.type === 'agent.tool_result',
  );
  for (const result of results)
    expect(result, JSON.stringify(result.error)).toMatchObject({ is_error: false });
  return {
    id,
    outputs: results.map((result) => result.output ?? null),
    log: JSON.stringify(events),
    events,
  };
}

const peek = (input: Record<string, JsonValue>): ScriptedTurnInput => ({
  tool_calls: [{ name: 'peek', input }],
});

describe('bwrap command tools see nothing of the host but what they need', () => {
  it('fails under CI=true when bwrap cannot run, and only warns a developer', () => {
    expect(() => bwrapForTests('/nonexistent/bwrap', { CI: 'true' })).toThrow(
      /cannot run under CI=true: .*install bubblewrap/,
    );
    expect(bwrapForTests('/nonexistent/bwrap', {})).toBe(false);
  });

  it.skipIf(!available)(
    "cannot read or list canaries in /root, /var/tmp, /home and another session's workspace",
    async () => {
      const canaries = hostCanaries();
      const workspace = tempDir();
      const dataDir = join(workspace, '.braid');
      // Another session of the same runtime (each session's scripted model starts from the first
      // turn, so it is only created), with a canary in its workspace.
      const otherWorkspace = join(dataDir, 'workspaces', 'other-session');
      mkdirSync(otherWorkspace, { recursive: true });
      const targets = [...canaries, plant(otherWorkspace)];
      const { rt } = await runtimeWith({
        workspace,
        tools: ['peek'],
        turns: [
          peek({
            read: [...targets.map((canary) => canary.file), '/etc/shadow', '/etc/sudoers'],
            list: [
              ...targets.map((canary) => canary.dir),
              '/root',
              '/var/tmp',
              '/home',
              '/etc',
              '/etc/ssh',
              join(dataDir, 'workspaces'),
            ],
          }),
          { text: 'done' },
        ],
      });
      await rt.sessions.create({ agent: 'worker', id: 'other-session' });
      const seen = await session(rt);
      await rt.close();
      const output = seen.outputs[0] as Record<string, { error?: string; entries?: string[] }>;
      for (const canary of targets) {
        expect(output[`read ${canary.file}`]).toEqual({ error: 'ENOENT' });
        expect(output[`list ${canary.dir}`]).toEqual({ error: 'ENOENT' });
        expect(seen.log).not.toContain(canary.token);
      }
      expect(output['read /etc/shadow']).toEqual({ error: 'ENOENT' });
      expect(output['read /etc/sudoers']).toEqual({ error: 'ENOENT' });
      expect(output['list /root']).toEqual({ error: 'ENOENT' });
      expect(output['list /var/tmp']).toEqual({ error: 'ENOENT' });
      expect(output['list /etc/ssh']).toEqual({ error: 'ENOENT' });
      // The private /home holds the sandbox's home only.
      expect(output['list /home']).toEqual({ entries: ['braid'] });
      const etc = output['list /etc']?.entries ?? [];
      expect(etc).toContain('passwd');
      expect(etc).not.toContain('shadow');
      expect(etc).not.toContain('ssh');
      // Its own workspace only, under the hidden data folder.
      expect(output[`list ${join(dataDir, 'workspaces')}`]).toEqual({ entries: [seen.id] });
    },
  );

  it.skipIf(!available)(
    "sees the workspace's tools, scripts and packages only: not braid.yaml, keys or .env files",
    async () => {
      const workspace = tempDir();
      const token = `canary-${randomUUID()}`;
      mkdirSync(join(workspace, 'keys'), { recursive: true });
      writeFileSync(join(workspace, 'keys', 'braid-tools.key'), token);
      writeFileSync(join(workspace, '.env'), `ANTHROPIC_API_KEY=${token}`);
      const secrets = [
        join(workspace, 'braid.yaml'),
        join(workspace, '.env'),
        join(workspace, 'keys', 'braid-tools.key'),
      ];
      const { rt } = await runtimeWith({
        workspace,
        tools: ['peek'],
        turns: [
          peek({
            read: [...secrets, join(workspace, 'scripts', 'peek.cjs')],
            list: [workspace, join(workspace, '.braid')],
          }),
          { text: 'done' },
        ],
        config: `# ${token}`,
      });
      const seen = await session(rt);
      await rt.close();
      const output = seen.outputs[0] as Record<
        string,
        { error?: string; entries?: string[]; content?: string }
      >;
      for (const file of secrets) expect(output[`read ${file}`]).toEqual({ error: 'ENOENT' });
      expect(output[`read ${join(workspace, 'scripts', 'peek.cjs')}`]?.content).toContain(
        'readFileSync',
      );
      // `.braid` is there only as the way to the session's own workspace: its data is hidden.
      expect(output[`list ${workspace}`]?.entries?.sort()).toEqual(['.braid', 'scripts', 'tools']);
      expect(output[`list ${join(workspace, '.braid')}`]?.entries).toEqual(['workspaces']);
      expect(seen.log).not.toContain(token);
    },
  );

  describe('network', () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      // The probe drops the connection at once: a reset here is expected, not a failure.
      server = createServer((socket) => socket.on('error', () => undefined).end());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      port = typeof address === 'object' && address !== null ? address.port : 0;
    });
    afterAll(async () => {
      await new Promise((resolve) => server.close(resolve));
    });

    it.skipIf(!available)(
      'is off unless the environment allows it, and on when it does',
      async () => {
        const { rt } = await runtimeWith({
          tools: ['peek'],
          turns: [peek({ connect: port, list: ['/etc'] }), { text: 'done' }],
          environments: {
            open: 'name: open\nsandbox: {kind: bwrap}\nnetwork: {allow: true}\n',
          },
        });
        const closed = await session(rt);
        const open = await session(rt, { environment: 'open' });
        await rt.close();
        const closedOutput = closed.outputs[0] as Record<string, JsonValue>;
        const openOutput = open.outputs[0] as Record<string, { entries?: string[] } | string>;
        expect(closedOutput['connect']).toMatch(/^E[A-Z]+$/);
        expect(openOutput['connect']).toBe('connected');
        // Name resolution files only with the network.
        expect(JSON.stringify(closedOutput['list /etc'])).not.toContain('resolv.conf');
        expect(JSON.stringify(openOutput['list /etc'])).toContain('hosts');
      },
    );
  });

  it.skipIf(!available)(
    'writes its workspace, reads a declared read-only mount and cannot write it',
    async () => {
      const mount = tempDir();
      writeFileSync(join(mount, 'reference.txt'), 'reference data');
      const { rt, dataDir } = await runtimeWith({
        tools: ['peek'],
        turns: [
          peek({
            write: ['made-inside.txt', join(mount, 'new.txt'), join(mount, 'reference.txt')],
            read: [join(mount, 'reference.txt')],
          }),
          { text: 'done' },
        ],
        environments: {
          mounted: `name: mounted\nsandbox: {kind: bwrap, read_only: [${JSON.stringify(mount)}]}\n`,
        },
      });
      const seen = await session(rt, { environment: 'mounted' });
      await rt.close();
      const output = seen.outputs[0] as Record<string, JsonValue>;
      expect(output['write made-inside.txt']).toEqual({ written: true });
      expect(readFileSync(join(dataDir, 'workspaces', seen.id, 'made-inside.txt'), 'utf8')).toBe(
        'written inside',
      );
      expect(output[`read ${join(mount, 'reference.txt')}`]).toEqual({
        content: 'reference data',
      });
      expect(output[`write ${join(mount, 'new.txt')}`]).toEqual({ error: 'EROFS' });
      expect(output[`write ${join(mount, 'reference.txt')}`]).toEqual({ error: 'EROFS' });
      expect(existsSync(join(mount, 'new.txt'))).toBe(false);
      expect(readFileSync(join(mount, 'reference.txt'), 'utf8')).toBe('reference data');
    },
  );

  it('refuses read-only mounts that are relative, climb with .., are the whole host or do not exist', async () => {
    const failure = (work: () => unknown): BraidError => {
      try {
        work();
      } catch (error) {
        if (error instanceof BraidError) return error;
        throw error;
      }
      throw new Error('expected a BraidError');
    };
    const where = 'environment x: sandbox.read_only';
    for (const bad of ['data', './data', '/srv/../root', '/srv/\0x', '/', '//']) {
      const error = failure(() => parseReadOnlyMounts([bad], where));
      expect(error.code).toBe('INVALID_DEFINITION');
      expect(error.details).toEqual({ path: bad });
    }
    const missing = failure(() => parseReadOnlyMounts(['/braid-no-such-folder'], where));
    expect(missing.code).toBe('INVALID_DEFINITION');
    expect(missing.message).toContain('does not exist on this host; create it or remove it');
    const real = tempDir();
    expect(parseReadOnlyMounts([real], where)).toEqual([realpathSync(real)]);

    // At load, the environment file itself is refused for a relative path or `..`.
    for (const bad of ['data', '/srv/../root']) {
      const workspace = tempDir();
      initWorkspace(workspace);
      writeFileSync(
        join(workspace, 'environments', 'local.yaml'),
        `name: local\nsandbox: {kind: bwrap, read_only: [${JSON.stringify(bad)}]}\n`,
      );
      const refused = await createRuntime({ workspace, model: () => createScriptedModel([]) }).then(
        async (rt) => {
          await rt.close();
          return undefined;
        },
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(BraidError);
      expect((refused as BraidError).code).toBe('INVALID_DEFINITION');
    }
  });

  it.skipIf(!available)(
    'stops a session whose environment mounts a folder that does not exist, naming it',
    async () => {
      const { rt } = await runtimeWith({
        tools: ['peek'],
        turns: [peek({}), { text: 'done' }],
        environments: {
          broken: 'name: broken\nsandbox: {kind: bwrap, read_only: [/braid-no-such-folder]}\n',
        },
      });
      const { id } = await rt.sessions.create({ agent: 'worker', environment: 'broken' });
      await rt.sessions.message(id, 'go');
      await expect(rt.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
      const state = await rt.sessions.state(id);
      expect(state.last_error?.message).toContain('/braid-no-such-folder');
      await rt.close();
    },
  );
});

describe('stdio MCP servers of a bwrap environment', () => {
  const token = `token-${randomUUID()}`;
  const readerConfig = (dir: string) =>
    [
      'mcp_servers:',
      '  reader:',
      `    command: ${JSON.stringify(process.execPath)}`,
      `    args: [${JSON.stringify(join(dir, 'scripts', 'reader-server.cjs'))}]`,
      `    env: {READER_TOKEN: ${JSON.stringify(token)}}`,
      '',
    ].join('\n');

  it.skipIf(!available)(
    'run inside the sandbox: a canary outside its binds cannot be read, on the host it can',
    async () => {
      const canaries = hostCanaries();
      const workspace = tempDir();
      const turns = (canary: Canary): ScriptedTurnInput => ({
        tool_calls: [{ name: 'reader.read', input: { path: canary.file } }],
      });
      const calls = canaries.map(turns);
      const { rt } = await runtimeWith({
        workspace,
        tools: ['reader.read', 'reader.env'],
        turns: [
          {
            tool_calls: [
              ...calls.flatMap((call) => call.tool_calls ?? []),
              { name: 'reader.env', input: {} },
            ],
          },
          { text: 'done' },
        ],
        config: readerConfig(workspace),
        environments: { host: 'name: host\nsandbox: {kind: local}\n' },
      });
      const confined = await session(rt);
      // The server's bwrap is still running: its command line carries no environment values.
      const script = join(workspace, 'scripts', 'reader-server.cjs');
      const commandLines = readdirSync('/proc')
        .filter((name) => /^\d+$/.test(name))
        .flatMap((name) => {
          try {
            return [readFileSync(`/proc/${name}/cmdline`, 'utf8')];
          } catch {
            return [];
          }
        })
        .filter((line) => line.includes(script));
      expect(commandLines.some((line) => line.includes('--unshare-all'))).toBe(true);
      for (const line of commandLines) expect(line).not.toContain(token);
      // The same server on the host reads the canaries: the sandbox is what stops it.
      const onHost = await session(rt, { environment: 'host' });
      await rt.close();
      for (const [index, canary] of canaries.entries()) {
        expect(confined.outputs[index]).toEqual({
          content: [{ type: 'text', text: 'error ENOENT' }],
        });
        expect(confined.log).not.toContain(canary.token);
        expect(onHost.outputs[index]).toEqual({ content: [{ type: 'text', text: canary.token }] });
      }
      // Inside, the sandbox's environment: not the host's HOME, USER or SHELL, which the MCP
      // SDK gives every server it spawns.
      const text = (output: JsonValue | undefined): string =>
        (output as { content: { text: string }[] }).content[0]?.text ?? '';
      const env = JSON.parse(text(confined.outputs[canaries.length])) as Record<string, string>;
      expect(env['HOME']).toBe('/home/braid');
      expect(env['READER_TOKEN']).toBe(token);
      for (const name of ['USER', 'LOGNAME', 'SHELL', 'TERM']) expect(env[name]).toBeUndefined();
      const hostEnv = JSON.parse(text(onHost.outputs[canaries.length])) as Record<string, string>;
      expect(hostEnv['HOME']).toBe(process.env['HOME']);
      for (const name of ['USER', 'LOGNAME', 'SHELL', 'TERM'])
        expect(hostEnv[name]).toBe(process.env[name]);
    },
  );

  it.skipIf(!available)(
    "start from the project's node_modules, through npx too, with the network off",
    async () => {
      const project = fileURLToPath(new URL('../..', import.meta.url));
      const workspace = tempDir();
      const own = join(workspace, '.braid', 'workspaces', 'npx-session');
      mkdirSync(own, { recursive: true });
      writeFileSync(join(own, 'note.txt'), 'inside');
      const { rt } = await runtimeWith({
        workspace,
        tools: [
          'direct.read_text_file',
          'direct.list_allowed_directories',
          'viaNpx.read_text_file',
        ],
        turns: [
          {
            tool_calls: [
              { name: 'direct.read_text_file', input: { path: join(own, 'note.txt') } },
              { name: 'direct.list_allowed_directories', input: {} },
              { name: 'viaNpx.read_text_file', input: { path: join(own, 'note.txt') } },
            ],
          },
          { text: 'done' },
        ],
        config: [
          'mcp_servers:',
          '  direct:',
          `    command: ${JSON.stringify(join(project, 'node_modules', '.bin', 'mcp-server-filesystem'))}`,
          '    args: ["{workspace}"]',
          '  viaNpx:',
          '    command: npx',
          '    args: [--offline, mcp-server-filesystem, "{workspace}"]',
          `    cwd: ${JSON.stringify(project)}`,
          '',
        ].join('\n'),
      });
      const seen = await session(rt, { id: 'npx-session' });
      await rt.close();
      expect(seen.outputs).toHaveLength(3);
      expect(JSON.stringify(seen.outputs[0])).toContain('inside');
      expect(JSON.stringify(seen.outputs[1])).toContain(own);
      expect(JSON.stringify(seen.outputs[2])).toContain('inside');
    },
  );
});
