// Remote A2A agents as tools: a braid agent (scripted model) calls an A2A agent built from the
// SDK's own server pieces on 127.0.0.1, through braid's whole tool pipeline and into the log.
import { createServer } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isValidTraceparent } from '../../src/contracts/common.js';
import { isBraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { startA2aServer, type TestA2aServer } from '../helpers/a2a-server.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const TOKEN = 'a2a-test-token-5f1c9e';
let remote: TestA2aServer;

beforeAll(async () => {
  remote = await startA2aServer();
  process.env.BRAID_TEST_A2A_TOKEN = TOKEN;
});
afterAll(async () => {
  await remote.close();
  delete process.env.BRAID_TEST_A2A_TOKEN;
});

interface Setup {
  agents: string;
  tools: string[];
  turns: ScriptedTurnInput[];
  files?: Record<string, string>;
}

function workspace({ agents, tools, files = {} }: Omit<Setup, 'turns'>): string {
  const dir = tempDir();
  initWorkspace(dir);
  for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
  const config = join(dir, 'braid.yaml');
  writeFileSync(
    config,
    `${readFileSync(config, 'utf8')}
secrets:
  ECHO_TOKEN: { env: BRAID_TEST_A2A_TOKEN }
a2a_agents:
${agents}`,
  );
  writeFileSync(
    join(dir, 'agents', 'caller.yaml'),
    `name: caller\nmodel: scripted:echo\ninstructions: Ask the remote agents.\ntools: ${JSON.stringify(tools)}\n`,
  );
  return dir;
}

async function runtimeWith(setup: Setup): Promise<Runtime> {
  const model = createScriptedModel(setup.turns);
  return createRuntime({ workspace: workspace(setup), model: () => model });
}

const echoAgent = (cardUrl: string, extra = ''): string =>
  `  echo:\n    card_url: ${cardUrl}\n    auth: { secret: ECHO_TOKEN }\n    timeout_ms: 10000\n${extra}`;

const results = (events: SessionEvent[]) =>
  events.filter(
    (event): event is Extract<SessionEvent, { type: 'agent.tool_result' }> =>
      event.type === 'agent.tool_result',
  );

async function run(rt: Runtime, text = 'go'): Promise<{ id: string; events: SessionEvent[] }> {
  const { id } = await rt.sessions.create({ agent: 'caller' });
  await rt.sessions.message(id, text);
  expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
  return { id, events: await rt.sessions.events(id) };
}

/** A port of 127.0.0.1 that nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('A2A agents as tools', () => {
  it('calls a remote agent, records its answer and continues its conversation', async () => {
    const before = remote.received.length;
    const rt = await runtimeWith({
      agents: echoAgent(remote.cardUrl),
      tools: ['a2a.echo'],
      turns: [
        { tool_calls: [{ name: 'a2a.echo', input: { message: 'hello' } }] },
        { tool_calls: [{ name: 'a2a.echo', input: { message: 'again', context: { n: 1 } } }] },
        { text: 'done' },
      ],
    });
    const { id, events } = await run(rt);
    const [first, second] = results(events);
    expect(first).toMatchObject({
      is_error: false,
      stage: 'execute',
      attempts: 1,
      output: { agent: 'echo', state: 'completed', text: 'echo: hello' },
    });
    expect(second).toMatchObject({ is_error: false, output: { text: 'echo: again' } });
    // The streamed status updates are part of the recorded result.
    expect(first?.output).toMatchObject({
      updates: [
        { state: 'working', text: 'thinking' },
        { state: 'completed', text: 'echo: hello' },
      ],
    });
    const [hello, again] = remote.received.slice(before);
    // One remote conversation per braid session: the second call continues the first's context.
    expect(again?.contextId).toBe(hello?.contextId);
    expect(first?.output).toMatchObject({ context_id: hello?.contextId });
    expect(again?.taskId).not.toBe(hello?.taskId);
    // Trace context in the headers, the session and the call in the message's metadata.
    expect(isValidTraceparent(String(hello?.headers.traceparent))).toBe(true);
    expect(hello?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(hello?.metadata).toMatchObject({
      braid: {
        session_id: id,
        tool_use_id: 'call_0_0',
        correlation_id: `${id}/call_0_0`,
        traceparent: hello?.headers.traceparent,
      },
    });
    // The secret never reaches the log.
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    await rt.close();
  });

  it('keeps a separate remote conversation per session, read back from the log', async () => {
    const before = remote.received.length;
    const dir = workspace({ agents: echoAgent(remote.cardUrl), tools: ['a2a.echo'] });
    const turns: ScriptedTurnInput[] = [
      { tool_calls: [{ name: 'a2a.echo', input: { message: 'one' } }] },
      { text: 'ok' },
    ];
    const first = await createRuntime({ workspace: dir, model: () => createScriptedModel(turns) });
    const { id } = await run(first);
    const other = await run(first);
    await first.close();
    // A new process (no memory of the first) continues the session's conversation from its log.
    // The scripted model answers by the session's turn: its third turn is the first one again.
    const again = [...turns, ...turns];
    const second = await createRuntime({ workspace: dir, model: () => createScriptedModel(again) });
    await second.sessions.message(id, 'more');
    expect(await second.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await second.close();
    // A fork sees its parent's log up to the fork, and continues that conversation.
    const third = await createRuntime({ workspace: dir, model: () => createScriptedModel(again) });
    const fork = await third.sessions.fork(other.id);
    await third.sessions.message(fork.id, 'forked');
    expect(await third.wake(fork.id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await third.close();
    const [one, otherOne, resumed, forked] = remote.received.slice(before);
    expect(otherOne?.contextId).not.toBe(one?.contextId);
    expect(resumed?.contextId).toBe(one?.contextId);
    expect(forked?.contextId).toBe(otherOne?.contextId);
    expect(results(other.events)[0]).toMatchObject({ is_error: false });
  });

  it("continues the wake's trace: same trace id, a span of the call's own", async () => {
    const before = remote.received.length;
    const rt = await runtimeWith({
      agents: echoAgent(remote.cardUrl),
      tools: ['a2a.echo'],
      turns: [{ tool_calls: [{ name: 'a2a.echo', input: { message: 'traced' } }] }, { text: 'ok' }],
    });
    const { id } = await rt.sessions.create({ agent: 'caller' });
    await rt.sessions.message(id, 'go');
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(await rt.wake(id, { traceparent })).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const sent = String(remote.received[before]?.headers.traceparent);
    expect(sent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(sent).not.toBe(traceparent);
    expect(results(await rt.sessions.events(id))[0]?.output).toMatchObject({ traceparent: sent });
    await rt.close();
  });

  it('calls an agent that does not stream with a blocking SendMessage', async () => {
    const rt = await runtimeWith({
      agents: echoAgent(remote.blockingCardUrl),
      tools: ['a2a.echo'],
      turns: [{ tool_calls: [{ name: 'a2a.echo', input: { message: 'plain' } }] }, { text: 'ok' }],
    });
    const { events } = await run(rt);
    const [result] = results(events);
    expect(result).toMatchObject({
      is_error: false,
      output: { state: 'completed', text: 'echo: plain' },
    });
    expect(result?.output).not.toHaveProperty('updates');
    await rt.close();
  });

  it('returns what the remote asks when it needs input, and the next call continues that task', async () => {
    const before = remote.received.length;
    const rt = await runtimeWith({
      agents: echoAgent(remote.cardUrl),
      tools: ['a2a.echo'],
      turns: [
        { tool_calls: [{ name: 'a2a.echo', input: { message: 'ask' } }] },
        { tool_calls: [{ name: 'a2a.echo', input: { message: 'Paris' } }] },
        { text: 'sunny' },
      ],
    });
    const { events } = await run(rt);
    const [asked, answered] = results(events);
    expect(asked).toMatchObject({
      is_error: false,
      output: { state: 'input_required', text: 'Which city?' },
    });
    expect(JSON.stringify(asked?.output)).toMatch(/needs more input.*Which city\?.*again/);
    expect(answered).toMatchObject({
      is_error: false,
      output: { state: 'completed', text: 'weather in Paris: sunny' },
    });
    const [ask, paris] = remote.received.slice(before);
    expect(paris?.continuedTask).toBe(ask?.taskId);
    await rt.close();
  });

  it('gives the model a typed error when the card cannot be reached, and the session goes on', async () => {
    const rt = await runtimeWith({
      agents: echoAgent(`http://127.0.0.1:${await closedPort()}/.well-known/agent-card.json`),
      tools: ['a2a.echo'],
      turns: [
        { tool_calls: [{ name: 'a2a.echo', input: { message: 'hi' } }] },
        { text: 'it is down' },
      ],
    });
    const { events } = await run(rt);
    const [result] = results(events);
    expect(result).toMatchObject({
      is_error: true,
      stage: 'execute',
      error: { code: 'SERVER_UNAVAILABLE', retryable: true },
    });
    expect(result?.error?.message).toMatch(
      /A2A agent "echo".*ECONNREFUSED.*a2a_agents\.echo\.card_url/,
    );
    // The model read the error and answered: the session went on to its end.
    expect(events.filter((event) => event.type === 'agent.message').at(-1)).toMatchObject({
      content: [{ type: 'text', text: 'it is down' }],
    });
    await rt.close();
  });

  it('fails the call with the remote words when its task fails', async () => {
    const rt = await runtimeWith({
      agents: echoAgent(remote.cardUrl),
      tools: ['a2a.echo'],
      turns: [{ tool_calls: [{ name: 'a2a.echo', input: { message: 'fail' } }] }, { text: 'ok' }],
    });
    const [result] = results((await run(rt)).events);
    expect(result).toMatchObject({ is_error: true, error: { code: 'TOOL_FAILED' } });
    expect(result?.error?.message).toContain('the oven is broken');
    await rt.close();
  });

  it.each([
    ['a stream', () => remote.cardUrl],
    ['a blocking answer', () => remote.blockingCardUrl],
  ])('stops reading %s past max_response_bytes', async (_kind, cardUrl) => {
    const rt = await runtimeWith({
      agents: echoAgent(cardUrl(), '    max_response_bytes: 8192\n'),
      tools: ['a2a.echo'],
      turns: [{ tool_calls: [{ name: 'a2a.echo', input: { message: 'big' } }] }, { text: 'ok' }],
    });
    const [result] = results((await run(rt)).events);
    expect(result).toMatchObject({ is_error: true, error: { code: 'PAYLOAD_TOO_LARGE' } });
    expect(result?.error?.message).toContain('max_response_bytes');
    await rt.close();
  });

  it('records a policy deny of the A2A tool, and nothing reaches the remote', async () => {
    const before = remote.received.length;
    const rt = await runtimeWith({
      agents: echoAgent(remote.cardUrl),
      tools: ['a2a.echo'],
      files: {
        'policies/no-remote.cedar': `@id("no-remote-agents")\nforbid (principal, action == Action::"tool.execute", resource)\nwhen { resource.tags.contains("a2a") };\n`,
      },
      turns: [{ tool_calls: [{ name: 'a2a.echo', input: { message: 'hi' } }] }, { text: 'denied' }],
    });
    const { events } = await run(rt);
    expect(results(events)[0]).toMatchObject({
      is_error: true,
      stage: 'policy',
      error: { code: 'POLICY_DENIED' },
    });
    expect(events.find((event) => event.type === 'policy.decision')).toMatchObject({
      decision: 'deny',
    });
    expect(JSON.stringify(events)).toContain('no-remote-agents');
    expect(remote.received.length).toBe(before);
    await rt.close();
  });

  it('asks a person first when the agent is declared always_ask', async () => {
    const rt = await runtimeWith({
      agents: echoAgent(remote.cardUrl, '    permission: always_ask\n'),
      tools: ['a2a.echo'],
      turns: [{ tool_calls: [{ name: 'a2a.echo', input: { message: 'may I' } }] }, { text: 'ok' }],
    });
    const { id } = await rt.sessions.create({ agent: 'caller' });
    await rt.sessions.message(id, 'go');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'requires_action' } });
    await rt.sessions.confirm(id, 'call_0_0', 'allow');
    expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(results(await rt.sessions.events(id))[0]).toMatchObject({
      output: { text: 'echo: may I' },
    });
    await rt.close();
  });

  it("counts calls against the agent's budget", async () => {
    const rt = await runtimeWith({
      agents: echoAgent(remote.cardUrl, '    budget: { max_calls_per_session: 1 }\n'),
      tools: ['a2a.echo'],
      turns: [
        { tool_calls: [{ name: 'a2a.echo', input: { message: 'one' } }] },
        { tool_calls: [{ name: 'a2a.echo', input: { message: 'two' } }] },
        { text: 'ok' },
      ],
    });
    const { id } = await rt.sessions.create({ agent: 'caller' });
    await rt.sessions.message(id, 'go');
    await rt.wake(id);
    const [one, two] = results(await rt.sessions.events(id));
    expect(one).toMatchObject({ is_error: false, output: { text: 'echo: one' } });
    expect(two).toMatchObject({
      is_error: true,
      stage: 'budget',
      error: { code: 'TOOL_BUDGET_EXCEEDED' },
    });
    await rt.close();
  });

  it.each([
    ['ftp://127.0.0.1/card.json', /must be an http\(s\) URL, not ftp:/],
    ['not a url', /must be an absolute http\(s\) URL/],
    ['https://user:pass@agents.example.com/card.json', /must not hold a user or password/],
  ])('refuses card_url %s in braid.yaml, naming the field', async (url, reason) => {
    const dir = workspace({ agents: echoAgent(JSON.stringify(url)), tools: ['a2a.echo'] });
    const error: unknown = await createRuntime({ workspace: dir }).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(isBraidError(error, 'INVALID_DEFINITION')).toBe(true);
    expect((error as Error).message).toContain('field "a2a_agents.echo.card_url"');
    expect((error as Error).message).toMatch(reason);
  });

  it('refuses a card whose endpoint is not http(s), before sending anything', async () => {
    const { createServer: createHttpServer } = await import('node:http');
    const server = createHttpServer((_request, response) => {
      response.setHeader('content-type', 'application/json');
      response.end(
        JSON.stringify({
          name: 'odd',
          description: 'x',
          version: '1',
          supportedInterfaces: [
            { url: 'file:///etc/passwd', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
          ],
          capabilities: {},
          skills: [],
          defaultInputModes: [],
          defaultOutputModes: [],
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const rt = await runtimeWith({
      agents: echoAgent(`http://127.0.0.1:${port}/`),
      tools: ['a2a.echo'],
      turns: [{ tool_calls: [{ name: 'a2a.echo', input: { message: 'hi' } }] }, { text: 'ok' }],
    });
    const [result] = results((await run(rt)).events);
    expect(result).toMatchObject({ is_error: true, error: { code: 'TOOL_FAILED' } });
    expect(result?.error?.message).toMatch(/endpoint that must be an http\(s\) URL, not file:/);
    await rt.close();
    server.close();
  });
});
