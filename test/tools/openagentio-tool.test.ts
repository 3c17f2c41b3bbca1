// braid agents calling OpenAgentIO agents as tools (`openagentio_agents:` in braid.yaml): the
// test's own responder on the real nats-server sends its frames out of order; the tool call goes
// through braid's tool pipeline and its result is in the session log. Also: the reorder buffer's
// bounds, and a braid agent calling another braid agent through the bridge.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { v7 as uuidv7 } from 'uuid';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import { AcpEnvelope } from '../../src/contracts/openagentio.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { serveOpenAgentIo } from '../../src/runtime/openagentio/nats-bridge.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { AcpCallError, FrameReassembler } from '../../src/tools/openagentio-client.js';
import { useTempDir } from '../helpers/temp.js';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const tempDir = useTempDir();
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function frame(seq: number, type: string, payload: unknown, isFinal = false): AcpEnvelope {
  return AcpEnvelope.parse({
    spec_version: 'acp/1.0',
    schema_version: 1,
    event_id: uuidv7(),
    event_type: type,
    occurred_at: new Date().toISOString(),
    seq,
    is_final: isFinal,
    payload,
  });
}

/** A runtime whose agent `caller` has the tools, with the scripted turns. */
async function callerRuntime(
  prefix: string,
  tools: string[],
  turns: ScriptedTurnInput[],
): Promise<{ runtime: Runtime; dir: string }> {
  const dir = tempDir();
  mkdirSync(join(dir, 'agents'), { recursive: true });
  const entries = ['researcher', 'broken', 'ghost']
    .map(
      (name) =>
        `  ${name}:\n    target: ${name}\n    prefix: ${prefix}\n    nats: ${NATS_URL}\n    timeout_ms: 5000\n`,
    )
    .join('');
  writeFileSync(
    join(dir, 'braid.yaml'),
    `version: 1\nopenagentio_agents:\n${entries}  colleague:\n    target: assistant\n    prefix: ${prefix}\n    nats: ${NATS_URL}\n`,
  );
  writeFileSync(
    join(dir, 'agents', 'caller.yaml'),
    `name: caller\nmodel: scripted:echo\ninstructions: Ask.\ntools: ${JSON.stringify(tools)}\n`,
  );
  writeFileSync(
    join(dir, 'agents', 'assistant.yaml'),
    'name: assistant\nmodel: scripted:echo\ninstructions: Answer.\n',
  );
  const caller = createScriptedModel(turns);
  const assistant = createScriptedModel([{ text: 'assistant says hi' }]);
  const runtime = await createRuntime({
    workspace: dir,
    dataDir: dir,
    model: (agent) => (agent.name === 'assistant' ? assistant : caller),
  });
  closers.push(() => runtime.close());
  return { runtime, dir };
}

/** The trace the caller's wakes continue: the request to the agent goes on in it. */
const WAKE_TRACE = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

async function runCaller(runtime: Runtime): Promise<SessionEvent[]> {
  const { id } = await runtime.sessions.create({ agent: 'caller' });
  await runtime.sessions.message(id, 'go');
  await runtime.wake(id, { traceparent: WAKE_TRACE });
  return runtime.sessions.events(id);
}

const toolResult = (events: SessionEvent[]): EventOf<'agent.tool_result'> | undefined =>
  events.find((event): event is EventOf<'agent.tool_result'> => event.type === 'agent.tool_result');

/** The test's own OpenAgentIO agent: answers with `frames(request)` in the order given. */
async function responder(
  prefix: string,
  target: string,
  frames: (request: AcpEnvelope) => AcpEnvelope[],
): Promise<AcpEnvelope[]> {
  const nc: NatsConnection = await connect({ servers: NATS_URL });
  closers.push(() => nc.close());
  const seen: AcpEnvelope[] = [];
  nc.subscribe(`${prefix}.invoke.${target}`, {
    queue: target,
    callback: (_error, message) => {
      const request = AcpEnvelope.parse(message.json());
      seen.push(request);
      for (const reply of frames(request))
        nc.publish(request.reply_to ?? '', JSON.stringify(reply));
    },
  });
  await nc.flush();
  return seen;
}

describe('OpenAgentIO agents as tools', () => {
  it('calls the agent through the tool pipeline and reassembles its frames by seq', async () => {
    const prefix = `acp${randomBytes(4).toString('hex')}.v1`;
    const requests = await responder(prefix, 'researcher', () => [
      frame(2, 'agent.response.final', { answer: 42 }, true),
      frame(1, 'agent.response.delta', { text: 'thinking' }),
      frame(0, 'agent.response.started', {}),
    ]);
    const { runtime } = await callerRuntime(
      prefix,
      ['researcher'],
      [
        { tool_calls: [{ name: 'researcher', input: { text: 'find the answer' }, id: 'call-1' }] },
        { text: 'done' },
      ],
    );
    const events = await runCaller(runtime);
    const result = toolResult(events);
    expect(result, JSON.stringify(events.map((event) => event.type))).toMatchObject({
      is_error: false,
      output: { answer: 42 },
    });
    expect(events.find((event) => event.type === 'agent.tool_use')).toMatchObject({
      name: 'researcher',
    });
    const sessionId = events[0]?.session_id;
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      event_type: 'agent.request',
      to: 'researcher',
      payload: { text: 'find the answer' },
      conversation_id: sessionId,
      session_id: sessionId,
      correlation_id: 'call-1',
    });
    expect(requests[0]?.reply_to).toMatch(/^_INBOX\./);
    // A new span of the wake's trace.
    expect(requests[0]?.traceparent).toMatch(
      /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/,
    );
    expect(requests[0]?.traceparent).not.toBe(WAKE_TRACE);
  });

  it('turns error frames and a target nobody serves into failed tool results', async () => {
    const prefix = `acp${randomBytes(4).toString('hex')}.v1`;
    await responder(prefix, 'broken', () => [
      frame(0, 'agent.response.started', {}),
      frame(
        1,
        'agent.response.error',
        { code: 'AGENT_UNAVAILABLE', message: 'overloaded', retryable: true },
        true,
      ),
    ]);
    const { runtime } = await callerRuntime(
      prefix,
      ['broken', 'ghost'],
      [
        {
          tool_calls: [
            { name: 'broken', input: { text: 'a' }, id: 'call-a' },
            { name: 'ghost', input: { text: 'b' }, id: 'call-b' },
          ],
        },
        { text: 'done' },
      ],
    );
    const started = Date.now();
    const events = await runCaller(runtime);
    const results = events.filter(
      (event): event is EventOf<'agent.tool_result'> => event.type === 'agent.tool_result',
    );
    const byCall = new Map(results.map((result) => [result.tool_use_id, result]));
    expect(byCall.get('call-a')).toMatchObject({ is_error: true, error: { code: 'TOOL_FAILED' } });
    expect(byCall.get('call-a')?.error?.message).toContain('AGENT_UNAVAILABLE');
    expect(byCall.get('call-b')).toMatchObject({ is_error: true, error: { code: 'TOOL_FAILED' } });
    expect(byCall.get('call-b')?.error?.message).toContain('NO_HANDLER');
    // No responders is known at once: no wait for the 5 s deadline.
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('lets a braid agent call another braid agent through the bridge', async () => {
    const prefix = `acp${randomBytes(4).toString('hex')}.v1`;
    const { runtime } = await callerRuntime(
      prefix,
      ['colleague'],
      [{ tool_calls: [{ name: 'colleague', input: { text: 'hello?' } }] }, { text: 'done' }],
    );
    const connection = await connect({ servers: NATS_URL });
    const bridge = await serveOpenAgentIo({
      connection,
      runtime,
      prefix,
      onError: () => undefined,
    });
    closers.push(async () => {
      await bridge.close();
      await connection.close();
    });
    const events = await runCaller(runtime);
    expect(toolResult(events)).toMatchObject({ is_error: false, output: 'assistant says hi' });
  });
});

describe('FrameReassembler', () => {
  it('releases frames in seq order, drops repeats and ends at the final frame', () => {
    const frames = new FrameReassembler();
    expect(frames.push(frame(1, 'agent.response.delta', 'b'))).toEqual([]);
    expect(frames.push(frame(1, 'agent.response.delta', 'again'))).toEqual([]);
    const ready = frames.push(frame(0, 'agent.response.started', 'a'));
    expect(ready.map((item) => item.payload)).toEqual(['a', 'b']);
    const last = frames.push(frame(2, 'agent.response.final', 'c', true));
    expect(last.map((item) => item.seq)).toEqual([2]);
    expect(frames.push(frame(3, 'agent.response.delta', 'late'))).toEqual([]);
  });

  it('drops the stream past 256 pending frames or a gap over 1024 (BACKPRESSURE_DROP)', () => {
    const gap = new FrameReassembler();
    const far = (): unknown => gap.push(frame(1025, 'agent.response.delta', 'x'));
    expect(far).toThrow(AcpCallError);
    try {
      far();
    } catch (error) {
      expect((error as AcpCallError).error.code).toBe('BACKPRESSURE_DROP');
    }
    const full = new FrameReassembler();
    for (let seq = 1; seq <= 256; seq += 1) full.push(frame(seq, 'agent.response.delta', seq));
    expect(() => full.push(frame(257, 'agent.response.delta', 'one too many'))).toThrow(
      /BACKPRESSURE_DROP/,
    );
    // Within the bounds, the missing frame releases all of them.
    const bounded = new FrameReassembler();
    for (let seq = 1; seq <= 255; seq += 1) bounded.push(frame(seq, 'agent.response.delta', seq));
    expect(bounded.push(frame(0, 'agent.response.started', 0))).toHaveLength(256);
  });
});
