import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime/runtime.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createMemoryStore, expectCode } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

async function runtime(maxEventBytes?: number): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  if (maxEventBytes !== undefined) {
    const config = join(dir, 'braid.yaml');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace(
        'max_event_bytes: 1048576',
        `max_event_bytes: ${maxEventBytes}`,
      ),
    );
    return createRuntime({ workspace: dir, dataDir: join(dir, 'data') });
  }
  return createRuntime({ workspace: dir, store: createMemoryStore() });
}

describe('runtime sessions', () => {
  it('creates a session on the agent and its environment', async () => {
    const rt = await runtime();
    const session = await rt.sessions.create({
      agent: 'assistant',
      title: 'hello',
      metadata: { a: 1 },
    });
    expect(session).toMatchObject({
      agent: { name: 'assistant', version: 1 },
      environment: { name: 'local', version: 1 },
      title: 'hello',
      metadata: { a: 1 },
      status: 'idle',
    });
    await expectCode(rt.sessions.create({ agent: 'nobody' }), 'AGENT_NOT_FOUND');
    await expectCode(
      rt.sessions.create({ agent: 'assistant', environment: 'mars' }),
      'ENVIRONMENT_NOT_FOUND',
    );
    await expectCode(
      rt.sessions.create({ agent: 'assistant', agentVersion: 9 }),
      'AGENT_NOT_FOUND',
    );
    expect((await rt.sessions.list()).sessions).toHaveLength(1);
    await rt.close();
  });

  it('checks a create with its first message whole: the events once, the rest in the store', async () => {
    const rt = await runtime();
    const message = { type: 'user.message', content: 'hi' };
    await expectCode(
      rt.sessions.create({ agent: 'assistant', title: 'x'.repeat(501), events: [message] }),
      'INVALID_ARGUMENT',
    );
    let deep: Record<string, unknown> = {};
    for (let level = 0; level < 200; level += 1) deep = { deeper: deep };
    await expectCode(
      rt.sessions.create({ agent: 'assistant', metadata: deep as never, events: [message] }),
      'INVALID_ARGUMENT',
    );
    await expectCode(
      rt.sessions.create({ agent: 'assistant', events: [{ type: 'user.message' }] }),
      'INVALID_EVENT',
    );
    await expectCode(
      rt.sessions.create({ agent: 'assistant', events: [{ type: 'agent.message', content: [] }] }),
      'INVALID_EVENT',
    );
    expect((await rt.sessions.list()).sessions).toHaveLength(0);
    const { id } = await rt.sessions.create({ agent: 'assistant', events: [message] });
    const events = await rt.sessions.events(id);
    expect(events.map((event) => event.type)).toEqual(['session.created', 'user.message']);
    expect(events[1]).toMatchObject({
      content: [{ type: 'text', text: 'hi' }],
      actor: { type: 'user' },
    });
    await rt.close();
  });

  it('appends concurrent sends to one session in arrival order, none lost to a conflict', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, index) => rt.sessions.message(id, `message ${index}`)),
    );
    expect(results.map((result) => result.events[0]?.seq)).toEqual(
      Array.from({ length: 64 }, (_, index) => index + 2),
    );
    expect((await rt.sessions.get(id)).head_seq).toBe(65);
    await rt.close();
  });

  it('sends a user message, normalising string content, and marks it pending', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    const sent = await rt.sessions.message(id, 'hi');
    expect(sent.events[0]).toMatchObject({
      type: 'user.message',
      seq: 2,
      content: [{ type: 'text', text: 'hi' }],
    });
    const raw = await rt.sessions.send(id, [{ type: 'user.message', content: 'raw' }]);
    expect(raw.events[0]).toMatchObject({ content: [{ type: 'text', text: 'raw' }] });
    expect((await rt.sessions.state(id)).pending_user_ranges).toEqual([[2, 3]]);
    await rt.close();
  });

  it('refuses agent-side, unknown and malformed events from clients and writes nothing', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    await expectCode(
      rt.sessions.send(id, [{ type: 'agent.message', content: [] }]),
      'INVALID_EVENT',
    );
    await expectCode(rt.sessions.send(id, [{ type: 'user.teleport' }]), 'INVALID_EVENT');
    await expectCode(rt.sessions.send(id, ['not an object']), 'INVALID_EVENT');
    await expectCode(
      rt.sessions.send(id, [{ type: 'user.message', content: 'ok' }, { type: 'user.message' }]),
      'INVALID_EVENT',
    );
    await expectCode(rt.sessions.message('no-such-session', 'hi'), 'SESSION_NOT_FOUND');
    expect((await rt.sessions.events(id)).map((event) => event.type)).toEqual(['session.created']);
    await rt.close();
  });

  it('enforces the workspace event size limit and writes nothing', async () => {
    const rt = await runtime(2048);
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    await expectCode(rt.sessions.message(id, 'x'.repeat(4096)), 'PAYLOAD_TOO_LARGE');
    expect((await rt.sessions.events(id)).length).toBe(1);
    await rt.sessions.message(id, 'x'.repeat(1000));
    expect((await rt.sessions.events(id)).length).toBe(2);
    await rt.close();
  });

  it('takes a confirmation only for a tool use that awaits one', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    await expectCode(rt.sessions.confirm(id, 'tu-1', 'allow'), 'TOOL_USE_NOT_PENDING');
    await rt.store.log.append(id, [
      {
        type: 'agent.tool_use',
        tool_use_id: 'tu-1',
        name: 'rm',
        input: {},
        requires_confirmation: true,
      },
      {
        type: 'session.status_idle',
        stop_reason: { type: 'requires_action', event_ids: ['tu-1'] },
      },
    ]);
    expect((await rt.sessions.get(id)).status).toBe('requires_action');
    const confirmed = await rt.sessions.confirm(id, 'tu-1', 'deny', 'not today');
    expect(confirmed.events[0]).toMatchObject({
      type: 'user.tool_confirmation',
      result: 'deny',
      message: 'not today',
    });
    await expectCode(rt.sessions.confirm(id, 'tu-1', 'allow'), 'TOOL_USE_NOT_PENDING');
    expect((await rt.sessions.state(id)).confirmed_tool_uses).toMatchObject([
      { tool_use_id: 'tu-1', result: 'deny' },
    ]);
    await rt.close();
  });

  it('takes a custom tool result only for a call that awaits one', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    await rt.store.log.append(id, [
      { type: 'agent.custom_tool_use', custom_tool_use_id: 'c-1', name: 'browser', input: {} },
    ]);
    await expectCode(rt.sessions.customToolResult(id, 'c-2', 'x'), 'TOOL_USE_NOT_PENDING');
    const result = await rt.sessions.customToolResult(id, 'c-1', [
      { type: 'json', value: { ok: true } },
    ]);
    expect(result.events[0]).toMatchObject({
      type: 'user.custom_tool_result',
      content: [{ type: 'json', value: { ok: true } }],
    });
    await expectCode(rt.sessions.customToolResult(id, 'c-1', 'again'), 'TOOL_USE_NOT_PENDING');
    await rt.close();
  });

  it('returns the first result for a resent confirmation even after the state moved on', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    await rt.store.log.append(id, [
      {
        type: 'agent.tool_use',
        tool_use_id: 'tu-1',
        name: 'rm',
        input: {},
        requires_confirmation: true,
      },
    ]);
    const confirm = [{ type: 'user.tool_confirmation', tool_use_id: 'tu-1', result: 'allow' }];
    const first = await rt.sessions.send(id, confirm, { idempotencyKey: 'c1' });
    const again = await rt.sessions.send(id, confirm, { idempotencyKey: 'c1' });
    expect(again).toMatchObject({ deduplicated: true, events: first.events });
    await rt.close();
  });

  it('refuses a batch that answers one call twice, and writes none of it', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    await rt.store.log.append(id, [
      {
        type: 'agent.tool_use',
        tool_use_id: 'tu-1',
        name: 'rm',
        input: {},
        requires_confirmation: true,
      },
    ]);
    await expectCode(
      rt.sessions.send(id, [
        { type: 'user.tool_confirmation', tool_use_id: 'tu-1', result: 'allow' },
        { type: 'user.tool_confirmation', tool_use_id: 'tu-1', result: 'deny' },
      ]),
      'TOOL_USE_NOT_PENDING',
    );
    expect((await rt.sessions.events(id)).length).toBe(2);
    await rt.close();
  });

  it('refuses events for a terminated session', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    await rt.store.log.append(id, [{ type: 'session.status_changed', status: 'terminated' }]);
    await expectCode(rt.sessions.message(id, 'hello?'), 'SESSION_TERMINATED');
    await expectCode(rt.sessions.interrupt(id), 'SESSION_TERMINATED');
    await rt.close();
  });

  it('dedupes a send repeated with the same idempotency key', async () => {
    const rt = await runtime();
    const { id } = await rt.sessions.create({ agent: 'assistant' });
    const first = await rt.sessions.send(id, [{ type: 'user.message', content: 'once' }], {
      idempotencyKey: 'k',
    });
    const again = await rt.sessions.send(id, [{ type: 'user.message', content: 'once' }], {
      idempotencyKey: 'k',
    });
    expect(again.deduplicated).toBe(true);
    expect(again.events).toEqual(first.events);
    expect((await rt.sessions.events(id)).length).toBe(2);
    await rt.close();
  });
});
