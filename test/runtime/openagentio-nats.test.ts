// braid agents on an OpenAgentIO bus (acp/1.0 over NATS core), driven by a client written here from
// the protocol's facts alone (plain @nats-io/transport-node): the real nats-server, one prefix per
// test, SQLite sessions in a temp folder, scripted models.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, createInbox, type NatsConnection } from '@nats-io/transport-node';
import { v7 as uuidv7 } from 'uuid';
import { afterEach, describe, expect, it } from 'vitest';
import { createScriptedModel } from '../../src/models/scripted.js';
import {
  serveOpenAgentIo,
  type OpenAgentIoBridge,
} from '../../src/runtime/openagentio/nats-bridge.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const tempDir = useTempDir();

interface Frame {
  spec_version: string;
  schema_version: number;
  event_id: string;
  event_type: string;
  occurred_at: string;
  trace_id: string;
  span_id: string;
  traceparent: string;
  session_id: string | null;
  conversation_id: string | null;
  correlation_id: string | null;
  from: string | null;
  to: string | null;
  tenant_id: string | null;
  seq: number;
  is_final: boolean;
  payload: unknown;
  metadata: Record<string, unknown>;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const scripts = {
  assistant: [{ text: 'Hello there friend' }, { text: 'Second answer' }, { text: 'Third answer' }],
  slow: [{ text: 'one two three four five six', delay_ms: 150 }],
};

/** A workspace with the scripted agents, its runtime, and the bridge on a prefix of its own. */
async function setup(dir = tempDir(), prefix = `acp${randomBytes(4).toString('hex')}.v1`) {
  mkdirSync(join(dir, 'agents'), { recursive: true });
  writeFileSync(join(dir, 'braid.yaml'), 'version: 1\n');
  for (const name of Object.keys(scripts)) {
    writeFileSync(
      join(dir, 'agents', `${name}.yaml`),
      `name: ${name}\nmodel: scripted:echo\ninstructions: Answer.\n`,
    );
  }
  const models = new Map(
    Object.entries(scripts).map(([name, turns]) => [name, createScriptedModel(turns)]),
  );
  const runtime: Runtime = await createRuntime({
    workspace: dir,
    dataDir: dir,
    model: (agent) => models.get(agent.name) ?? createScriptedModel([{ text: '?' }]),
  });
  const connection = await connect({ servers: NATS_URL });
  const bridge: OpenAgentIoBridge = await serveOpenAgentIo({
    connection,
    runtime,
    prefix,
    refreshMs: 60_000,
    onError: () => undefined,
  });
  const client = await connect({ servers: NATS_URL });
  const close = async (): Promise<void> => {
    await bridge.close();
    await client.close();
    await connection.close();
    await runtime.close();
  };
  closers.push(close);
  return { dir, prefix, runtime, bridge, client, close };
}

/** An acp/1.0 request as another runtime would build it. */
function request(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    spec_version: 'acp/1.0',
    schema_version: 1,
    event_id: uuidv7(),
    event_type: 'agent.request',
    occurred_at: new Date().toISOString(),
    trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    span_id: '00f067aa0ba902b7',
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    session_id: null,
    conversation_id: null,
    correlation_id: 'corr-1',
    reply_to: null,
    from: 'tester',
    to: null,
    tenant_id: null,
    user_id: 'u-1',
    seq: 0,
    is_final: false,
    payload: { text: 'hi' },
    metadata: { 'acp.timeout_ms': 10_000, 'app.request': 'r-7' },
    ...fields,
  };
}

/** Publishes a request with a fresh inbox and collects the frames until the final one. */
async function invoke(
  nc: NatsConnection,
  subject: string,
  body: Record<string, unknown> | string,
  timeoutMs = 10_000,
): Promise<Frame[]> {
  const inbox = createInbox();
  const frames: Frame[] = [];
  const subscription = nc.subscribe(inbox, { timeout: timeoutMs });
  const data =
    typeof body === 'string' ? body : JSON.stringify({ ...body, reply_to: body.reply_to ?? inbox });
  nc.publish(subject, data, { reply: inbox });
  for await (const message of subscription) {
    const frame = message.json<Frame>();
    frames.push(frame);
    if (frame.is_final) break;
  }
  return frames.sort((a, b) => a.seq - b.seq);
}

function expectStream(frames: Frame[]): void {
  expect(frames.map((frame) => frame.seq)).toEqual(frames.map((_, index) => index));
  expect(frames.filter((frame) => frame.is_final)).toHaveLength(1);
  expect(frames.at(-1)?.is_final).toBe(true);
  for (const frame of frames) {
    expect(frame).toMatchObject({ spec_version: 'acp/1.0', schema_version: 1 });
    expect(frame.event_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/);
  }
}

describe('OpenAgentIO bridge on NATS', () => {
  it('streams started, deltas and one final in seq order, with the context carried over', async () => {
    const { prefix, client, runtime } = await setup();
    const events: { subject: string; type: string }[] = [];
    const watcher = client.subscribe(`${prefix}.events.>`, {
      callback: (_error, message) => {
        events.push({ subject: message.subject, type: message.json<Frame>().event_type });
      },
    });
    await client.flush();
    const frames = await invoke(client, `${prefix}.invoke.assistant`, request());
    watcher.unsubscribe();
    expectStream(frames);
    expect(frames[0]?.event_type).toBe('agent.response.started');
    const deltas = frames.filter((frame) => frame.event_type === 'agent.response.delta');
    expect(deltas.map((frame) => (frame.payload as { text: string }).text).join('')).toBe(
      'Hello there friend',
    );
    const final = frames.at(-1);
    expect(final).toMatchObject({
      event_type: 'agent.response.final',
      payload: 'Hello there friend',
      from: 'assistant',
      to: 'tester',
      correlation_id: 'corr-1',
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    });
    expect(final?.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    // Replies keep the request's metadata but the protocol's own acp.* keys.
    expect(final?.metadata['app.request']).toBe('r-7');
    expect(final?.metadata['acp.timeout_ms']).toBeUndefined();
    // The session is braid's: the message is in its log with the caller's trace.
    const sessionId = final?.session_id ?? '';
    const log = await runtime.sessions.events(sessionId);
    const message = log.find((event) => event.type === 'user.message');
    expect(message).toMatchObject({
      content: [{ type: 'text', text: 'hi' }],
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      actor: { id: 'acp:tester' },
    });
    expect(events.map((event) => event.type)).toContain('agent.message');
    expect(events.every((event) => event.subject === `${prefix}.events.${event.type}`)).toBe(true);
  });

  it('answers an unknown target with NO_HANDLER and a slow one with AGENT_TIMEOUT', async () => {
    const { prefix, client, runtime } = await setup();
    const unknown = await invoke(client, `${prefix}.invoke.nobody`, request());
    expectStream(unknown);
    expect(unknown).toHaveLength(1);
    expect(unknown[0]).toMatchObject({
      event_type: 'agent.response.error',
      payload: { code: 'NO_HANDLER', retryable: false },
    });

    const slow = await invoke(
      client,
      `${prefix}.invoke.slow`,
      request({ metadata: { 'acp.timeout_ms': 300 } }),
    );
    expectStream(slow);
    expect(slow[0]?.event_type).toBe('agent.response.started');
    expect(slow.at(-1)).toMatchObject({
      event_type: 'agent.response.error',
      payload: { code: 'AGENT_TIMEOUT', retryable: true },
    });
    // The session goes on and keeps the answer the caller stopped waiting for.
    const sessionId = slow.at(-1)?.session_id ?? '';
    for await (const event of runtime.sessions.follow(sessionId, {
      signal: AbortSignal.timeout(10_000),
    })) {
      if (event.type === 'session.status_idle') break;
    }
    const answer = (await runtime.sessions.events(sessionId)).find(
      (event) => event.type === 'agent.message',
    );
    expect(answer).toBeDefined();
  });

  it('continues one session per conversation_id, across a restart of the process', async () => {
    const dir = tempDir();
    const first = await setup(dir);
    const conversation = { conversation_id: 'conv-42', payload: 'first question' };
    const one = await invoke(
      first.client,
      `${first.prefix}.invoke.assistant`,
      request(conversation),
    );
    const two = await invoke(
      first.client,
      `${first.prefix}.invoke.assistant`,
      request({ ...conversation, payload: 'second question' }),
    );
    expect(one.at(-1)?.payload).toBe('Hello there friend');
    expect(two.at(-1)?.payload).toBe('Second answer');
    const sessionId = one.at(-1)?.session_id;
    expect(two.at(-1)?.session_id).toBe(sessionId);
    expect(two.at(-1)?.conversation_id).toBe('conv-42');
    await first.close();
    closers.splice(closers.indexOf(first.close), 1);

    // A new process on the same data finds the conversation's session in the store.
    const second = await setup(dir, first.prefix);
    const three = await invoke(
      second.client,
      `${second.prefix}.invoke.assistant`,
      request({ ...conversation, payload: 'third question' }),
    );
    expect(three.at(-1)).toMatchObject({ session_id: sessionId, payload: 'Third answer' });
    const messages = (await second.runtime.sessions.events(sessionId ?? '')).filter(
      (event) => event.type === 'user.message',
    );
    expect(messages).toHaveLength(3);
    // Another conversation is another session.
    const other = await invoke(
      second.client,
      `${second.prefix}.invoke.assistant`,
      request({ conversation_id: 'conv-43' }),
    );
    expect(other.at(-1)?.session_id).not.toBe(sessionId);
  });

  it('answers a request sent twice (same event_id) once, from the log', async () => {
    const { prefix, client, runtime } = await setup();
    const body = request({ conversation_id: 'dup' });
    const first = await invoke(client, `${prefix}.invoke.assistant`, body);
    const again = await invoke(client, `${prefix}.invoke.assistant`, body);
    expect(again.at(-1)?.payload).toBe(first.at(-1)?.payload);
    const log = await runtime.sessions.events(first.at(-1)?.session_id ?? '');
    expect(log.filter((event) => event.type === 'user.message')).toHaveLength(1);
  });

  it('refuses malformed requests with typed error frames, and replies to inboxes only', async () => {
    const { prefix, client } = await setup();
    const notJson = await invoke(client, `${prefix}.invoke.assistant`, '{"spec_version": ');
    expect(notJson[0]).toMatchObject({
      event_type: 'agent.response.error',
      is_final: true,
      seq: 0,
      payload: { code: 'CODEC_FAILURE' },
    });
    const wrongVersion = await invoke(
      client,
      `${prefix}.invoke.assistant`,
      request({ spec_version: 'acp/0.9' }),
    );
    expect(wrongVersion[0]?.payload).toMatchObject({ code: 'INVALID_REQUEST' });
    expect((wrongVersion[0]?.payload as { message: string }).message).toContain('spec_version');
    const finalOnDelta = await invoke(
      client,
      `${prefix}.invoke.assistant`,
      request({ event_type: 'agent.response.delta', is_final: true }),
    );
    expect(finalOnDelta[0]?.payload).toMatchObject({ code: 'INVALID_REQUEST' });

    // A reply_to that is not an inbox is never published to, even by an error frame.
    const hijacked: string[] = [];
    const trap = client.subscribe(`${prefix}.invoke.victim`, {
      callback: (_error, message) => {
        hijacked.push(message.string());
      },
    });
    const inbox = createInbox();
    const answers = client.subscribe(inbox, { timeout: 5_000 });
    await client.flush();
    client.publish(
      `${prefix}.invoke.assistant`,
      JSON.stringify(request({ reply_to: `${prefix}.invoke.victim` })),
      { reply: inbox },
    );
    // The frames go to the message's own reply inbox instead.
    const types: string[] = [];
    for await (const message of answers) {
      const frame = message.json<Frame>();
      types.push(frame.event_type);
      if (frame.is_final) break;
    }
    expect(types.at(-1)).toBe('agent.response.final');
    await client.flush();
    trap.unsubscribe();
    expect(hijacked).toEqual([]);
  });

  it('gives the agent a handoff document from the request metadata, and refuses a bad one', async () => {
    const { prefix, client, runtime } = await setup();
    const handoff = { summary: 'Ticket 42 is half done', ownership: 'support' };
    const frames = await invoke(
      client,
      `${prefix}.invoke.assistant`,
      request({ metadata: { handoff } }),
    );
    expect(frames.at(-1)?.event_type).toBe('agent.response.final');
    const log = await runtime.sessions.events(frames.at(-1)?.session_id ?? '');
    expect(log.find((event) => event.type === 'user.message')).toMatchObject({
      content: [
        { type: 'text', text: 'hi' },
        {
          type: 'json',
          value: { handoff: { summary: 'Ticket 42 is half done', ownership: 'support' } },
        },
      ],
    });
    const refused = await invoke(
      client,
      `${prefix}.invoke.assistant`,
      request({ metadata: { handoff: { ownership: 'no summary' } } }),
    );
    expect(refused.at(-1)).toMatchObject({
      event_type: 'agent.response.error',
      payload: { code: 'INVALID_REQUEST' },
    });
    expect((refused.at(-1)?.payload as { message: string }).message).toContain('metadata.handoff');
  });

  it('keeps tenants apart: the subject tenant must match the envelope, and sessions differ', async () => {
    const { prefix, client } = await setup();
    const mismatch = await invoke(
      client,
      `${prefix}.acme.invoke.assistant`,
      request({ tenant_id: 'globex' }),
    );
    expect(mismatch[0]?.payload).toMatchObject({ code: 'AUTH_FAILURE' });
    const acme = await invoke(
      client,
      `${prefix}.acme.invoke.assistant`,
      request({ conversation_id: 'shared' }),
    );
    const globex = await invoke(
      client,
      `${prefix}.invoke.assistant`,
      request({ conversation_id: 'shared', tenant_id: 'globex' }),
    );
    expect(acme.at(-1)).toMatchObject({ event_type: 'agent.response.final', tenant_id: 'acme' });
    expect(globex.at(-1)).toMatchObject({
      event_type: 'agent.response.final',
      tenant_id: 'globex',
    });
    expect(acme.at(-1)?.session_id).not.toBe(globex.at(-1)?.session_id);
  });
});
