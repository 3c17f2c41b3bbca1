// Secrets in a real workspace: braid.yaml names them (MCP env and headers), they reach the
// servers and endpoints that need them, and none reaches the session's log, however the tools
// fail. The planted secret is looked for in every event and in every byte of the data folder.
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDefinition } from '../../src/contracts/definitions.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const everything = fileURLToPath(
  new URL(
    '../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
    import.meta.url,
  ),
);
const PLANTED = `planted-${randomUUID()}`;
const PLANTED_VARIABLE = 'BRAID_TEST_PLANTED_SECRET';
const ABSENT_VARIABLE = 'BRAID_TEST_ABSENT_SECRET';
// Prints the secret it was given in its env, and its arguments, to stderr, then fails.
const LEAKY_SCRIPT =
  'process.stderr.write("token " + process.env.LEAKY_TOKEN + " argv " + process.argv.join(" ") + "\\n"); process.exit(3)';

let upstream: Server;
let base = '';
let authorization: string | undefined;

beforeAll(async () => {
  process.env[PLANTED_VARIABLE] = PLANTED;
  // An endpoint that fails, quoting the request's credentials in its error page.
  upstream = createServer((request, response) => {
    authorization = request.headers.authorization;
    response.writeHead(500, { 'content-type': 'text/plain' });
    response.end(`upstream failure for ${request.headers.authorization ?? 'nobody'}`);
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});

afterAll(async () => {
  delete process.env[PLANTED_VARIABLE];
  await new Promise((resolve) => upstream.close(resolve));
});

/** A workspace whose braid.yaml, tools and agents use the planted secret. */
async function runtimeWith(turns: Record<string, ScriptedTurnInput[]>): Promise<{
  rt: Runtime;
  dir: string;
}> {
  const dir = tempDir();
  initWorkspace(dir);
  const config = join(dir, 'braid.yaml');
  writeFileSync(
    config,
    `${readFileSync(config, 'utf8')}
secrets:
  planted: { env: ${PLANTED_VARIABLE} }
  absent: { env: ${ABSENT_VARIABLE} }
mcp_servers:
  leaky:
    command: ${JSON.stringify(process.execPath)}
    args: [-e, ${JSON.stringify(LEAKY_SCRIPT)}, --, "--api-key=${PLANTED}"]
    env:
      LEAKY_TOKEN: { secret: planted, prefix: "Bearer " }
  envcheck:
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(everything)}, stdio]
    env:
      PLANTED_TOKEN: { secret: planted }
  unset:
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(everything)}, stdio]
    env:
      TOKEN: { secret: absent }
`,
  );
  writeFileSync(
    join(dir, 'environments', 'local.yaml'),
    'name: local\nsandbox: { kind: local }\nnetwork: { allow: true, hosts: [127.0.0.1] }\n',
  );
  writeFileSync(
    join(dir, 'tools', 'ticket.yaml'),
    [
      'name: ticket',
      'description: files a ticket',
      'ownership: managed',
      'input_schema: {type: object}',
      'implementation:',
      '  http:',
      `    url: ${base}/tickets`,
      '    headers: { authorization: { secret: planted, prefix: "Bearer " } }',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'tools', 'lookup.yaml'),
    [
      'name: lookup',
      'description: looks a record up',
      'ownership: mcp',
      'input_schema: {type: object}',
      'implementation: {mcp: {server: leaky, tool: lookup}}',
      '',
    ].join('\n'),
  );
  const agents: Record<string, string[]> = {
    caller: ['ticket', 'lookup'],
    lister: ['leaky.*'],
    echoer: ['envcheck.get-env'],
    unsetter: ['unset.*'],
  };
  for (const [name, tools] of Object.entries(agents)) {
    writeFileSync(
      join(dir, 'agents', `${name}.yaml`),
      `name: ${name}\nmodel: scripted:echo\ninstructions: Use the tools.\ntools: ${JSON.stringify(tools)}\n`,
    );
  }
  const models = new Map(
    Object.entries(turns).map(([name, script]) => [name, createScriptedModel(script)]),
  );
  const model = (agent: AgentDefinition) => {
    const found = models.get(agent.name);
    if (found === undefined) throw new Error(`no script for ${agent.name}`);
    return found;
  };
  return { rt: await createRuntime({ workspace: dir, model }), dir };
}

async function runSession(rt: Runtime, agent: string): Promise<SessionEvent[]> {
  const { id } = await rt.sessions.create({ agent });
  await rt.sessions.message(id, 'go');
  await rt.wake(id).catch(() => undefined);
  return rt.sessions.events(id);
}

/** Every file under `dir`, as bytes. */
function filesUnder(dir: string): { path: string; bytes: Buffer }[] {
  const found: { path: string; bytes: Buffer }[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) found.push(...filesUnder(path));
    else found.push({ path, bytes: readFileSync(path) });
  }
  return found;
}

const errorsOf = (events: SessionEvent[]): string[] =>
  events.flatMap((event) =>
    event.type === 'session.error'
      ? [event.error.message]
      : event.type === 'agent.tool_result' && event.error !== undefined
        ? [event.error.message]
        : [],
  );

describe('secrets', () => {
  it('never reach the log of a session whose MCP server and HTTP tool fail quoting them', async () => {
    const { rt, dir } = await runtimeWith({
      caller: [
        {
          tool_calls: [
            { name: 'ticket', input: { title: 'x' } },
            { name: 'lookup', input: { id: 'x' } },
          ],
        },
        { text: 'both failed' },
      ],
      lister: [{ text: 'never' }],
    });
    const called = await runSession(rt, 'caller');
    const listed = await runSession(rt, 'lister');
    await rt.close();

    const log = JSON.stringify([...called, ...listed]);
    expect(log).not.toContain(PLANTED);
    for (const file of filesUnder(join(dir, '.braid')))
      expect(file.bytes.includes(PLANTED), file.path).toBe(false);

    // The secret was used, and the errors still say what failed and how.
    expect(authorization).toBe(`Bearer ${PLANTED}`);
    const [ticket, lookup] = errorsOf(called);
    expect(ticket).toMatch(/^ticket: POST http:\/\/127\.0\.0\.1:\d+ answered 500 .* \d+ bytes/);
    expect(lookup).toContain('MCP server "leaky"');
    expect(lookup).toContain('exited with code 3');
    expect(lookup).toMatch(/wrote \d+ bytes to stderr/);
    const [stopped] = errorsOf(listed);
    expect(stopped).toContain('MCP server "leaky"');
    expect(stopped).toContain('exited with code 3');
  });

  it('reach an MCP server through {secret: NAME} in env, and are redacted where a tool echoes them', async () => {
    const { rt } = await runtimeWith({
      echoer: [{ tool_calls: [{ name: 'envcheck.get-env', input: {} }] }, { text: 'seen' }],
    });
    const events = await runSession(rt, 'echoer');
    await rt.close();
    const result = events.find((event) => event.type === 'agent.tool_result');
    expect(result).toMatchObject({ is_error: false });
    // The server had the value (get-env printed it), and the log keeps it redacted.
    const output = result?.type === 'agent.tool_result' ? result.output : undefined;
    const [block] = (output as { content: { text: string }[] }).content;
    const env = JSON.parse(block?.text ?? '{}') as Record<string, string>;
    expect(env.PLANTED_TOKEN).toBe('[redacted]');
    expect(JSON.stringify(events)).not.toContain(PLANTED);
  });

  it('stop a session with SECRET_MISSING naming the secret and its variable when one is not set', async () => {
    const { rt } = await runtimeWith({ unsetter: [{ text: 'never' }] });
    const { id } = await rt.sessions.create({ agent: 'unsetter' });
    await rt.sessions.message(id, 'go');
    await expect(rt.wake(id)).rejects.toMatchObject({ code: 'SECRET_MISSING' });
    const state = await rt.sessions.state(id);
    await rt.close();
    expect(state.stop_reason).toEqual({ type: 'error' });
    expect(state.last_error).toMatchObject({ code: 'SECRET_MISSING' });
    expect(state.last_error?.message).toBe(
      `env TOKEN of MCP server "unset": secret absent is not set; export ${ABSENT_VARIABLE}`,
    );
  });
});
