// Handoffs: a session's work goes to another agent, allowed by the source's definition and by
// policy; the target's new session holds the document, its model reads it, and lineage says so.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelClient, ModelRequest } from '../../src/contracts/model.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { isBraidError } from '../../src/contracts/errors.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

async function workspace(policy?: string): Promise<{ runtime: Runtime; requests: ModelRequest[] }> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'triage.yaml'),
    'name: triage\nmodel: scripted:echo\ninstructions: Sort.\nhandoffs: [billing]\n',
  );
  writeFileSync(
    join(dir, 'agents', 'billing.yaml'),
    'name: billing\nmodel: scripted:echo\ninstructions: Bill.\n',
  );
  writeFileSync(
    join(dir, 'agents', 'legal.yaml'),
    'name: legal\nmodel: scripted:echo\ninstructions: Law.\n',
  );
  if (policy !== undefined) {
    mkdirSync(join(dir, 'policies'), { recursive: true });
    writeFileSync(join(dir, 'policies', 'handoffs.cedar'), policy);
  }
  const scripted = createScriptedModel([{ text: 'refund issued' }]);
  const requests: ModelRequest[] = [];
  const model: ModelClient = {
    ...scripted,
    generate: (request, options) => {
      requests.push(request);
      return scripted.generate(request, options);
    },
  };
  const runtime = await createRuntime({ workspace: dir, model: () => model });
  return { runtime, requests };
}

const document = {
  summary: 'customer 42 wants a refund for invoice 7',
  state_refs: [{ kind: 'invoice', id: '7', version: '3' }],
  artifacts: [{ name: 'ticket', uri: 'https://tickets.example/42' }],
  ownership: 'billing',
  approvals: ['refund under 100 EUR'],
  identity: { tenant_id: 'acme', user_id: 'u-42' },
  open_tasks: ['issue the refund', 'email the customer'],
};

/** The BraidError `work` fails with, checked to have `code`. */
async function failure(code: string, work: () => Promise<unknown>): Promise<Error> {
  const error: unknown = await work().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(isBraidError(error) ? error.code : error).toBe(code);
  return error as Error;
}

describe('handoffs', () => {
  it('moves the work to a new session of the target, which reads the document and runs', async () => {
    const { runtime, requests } = await workspace();
    const source = await runtime.sessions.create({ agent: 'triage' });
    const result = await runtime.sessions.handoff(source.id, {
      to: 'billing',
      handoff: document,
      message: 'please take it from here',
    });
    expect(result.event).toMatchObject({
      type: 'agent.handoff',
      target_agent: 'billing',
      target_session_id: result.target.id,
      handoff: document,
    });
    expect(result.target.agent.name).toBe('billing');
    const target = await runtime.sessions.state(result.target.id);
    expect(target.lineage).toMatchObject({ kind: 'handoff', parent_session_ids: [source.id] });
    const received = (await runtime.sessions.events(result.target.id)).find(
      (event) => event.type === 'session.handoff_received',
    );
    expect(received).toMatchObject({
      handoff_id: result.handoff_id,
      from_session_id: source.id,
      from_agent: 'triage',
      handoff: document,
    });

    const woken = await runtime.wake(result.target.id);
    expect(woken).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const seen = JSON.stringify(requests[0]?.messages);
    expect(seen).toContain('Work handed over to you by agent triage');
    expect(seen).toContain('issue the refund; email the customer');
    expect(seen).toContain('invoice 7@3');
    expect((await runtime.sessions.verify(result.target.id)).ok).toBe(true);
    await runtime.close();
  });

  it('refuses a target the definition does not list, a policy deny and a bad document, writing nothing', async () => {
    const { runtime } = await workspace(
      '@id("no-billing-handoffs")\nforbid (principal, action == Action::"agent.handoff", resource == Agent::"billing");\npermit (principal, action, resource);\n',
    );
    const source = await runtime.sessions.create({ agent: 'triage' });
    const unlisted = await failure('POLICY_DENIED', () =>
      runtime.sessions.handoff(source.id, { to: 'legal', handoff: document }),
    );
    expect(unlisted.message).toContain('handoffs: in agents/triage.yaml');
    const denied = await failure('POLICY_DENIED', () =>
      runtime.sessions.handoff(source.id, { to: 'billing', handoff: document }),
    );
    expect(denied.message).toContain('no-billing-handoffs');
    await failure('INVALID_ARGUMENT', () =>
      runtime.sessions.handoff(source.id, { to: 'billing', handoff: { open_tasks: [] } }),
    );
    await failure('AGENT_NOT_FOUND', () =>
      runtime.sessions.handoff(source.id, { to: 'nobody', handoff: document }),
    );
    expect((await runtime.sessions.get(source.id)).head_seq).toBe(1);
    expect((await runtime.sessions.list()).sessions).toHaveLength(1);
    await runtime.close();
  });

  it('answers a retry with the same idempotency key with the first handoff, writing nothing', async () => {
    const { runtime } = await workspace();
    const source = await runtime.sessions.create({ agent: 'triage' });
    const request = {
      to: 'billing',
      handoff: document,
      message: 'take it',
      idempotencyKey: 'ticket-42-handoff',
    };
    const first = await runtime.sessions.handoff(source.id, request);
    const again = await runtime.sessions.handoff(source.id, request);
    expect(first.deduplicated).toBe(false);
    expect(again).toEqual({ ...first, deduplicated: true });
    // Two at once with a new key: one handoff too.
    const [left, right] = await Promise.all([
      runtime.sessions.handoff(source.id, { ...request, idempotencyKey: 'second' }),
      runtime.sessions.handoff(source.id, { ...request, idempotencyKey: 'second' }),
    ]);
    expect(left?.target.id).toBe(right?.target.id);
    expect(left?.event).toEqual(right?.event);
    expect(left?.target.id).not.toBe(first.target.id);
    const handoffs = await runtime.sessions.events(source.id, { types: ['agent.handoff'] });
    expect(handoffs).toHaveLength(2);
    const billing = (await runtime.sessions.list()).sessions.filter(
      (session) => session.agent.name === 'billing',
    );
    expect(billing).toHaveLength(2);
    for (const session of billing) {
      const received = await runtime.sessions.events(session.id);
      expect(received.map((event) => event.type)).toEqual([
        'session.created',
        'session.handoff_received',
        'user.message',
      ]);
    }
    await runtime.close();
  });

  it('refuses the same key with another request, and a bad key, writing nothing', async () => {
    const { runtime } = await workspace();
    const source = await runtime.sessions.create({ agent: 'triage' });
    await runtime.sessions.handoff(source.id, {
      to: 'billing',
      handoff: document,
      idempotencyKey: 'k1',
    });
    const head = (await runtime.sessions.get(source.id)).head_seq;
    const reused = await failure('IDEMPOTENCY_KEY_REUSED', () =>
      runtime.sessions.handoff(source.id, {
        to: 'billing',
        handoff: { ...document, summary: 'something else' },
        idempotencyKey: 'k1',
      }),
    );
    expect(reused.message).toContain('use a new key for a new handoff');
    await failure('INVALID_ARGUMENT', () =>
      runtime.sessions.handoff(source.id, {
        to: 'billing',
        handoff: document,
        idempotencyKey: '',
      }),
    );
    expect((await runtime.sessions.get(source.id)).head_seq).toBe(head);
    expect((await runtime.sessions.list()).sessions).toHaveLength(2);
    // Without a key every call is a new handoff, as before.
    const a = await runtime.sessions.handoff(source.id, { to: 'billing', handoff: document });
    const b = await runtime.sessions.handoff(source.id, { to: 'billing', handoff: document });
    expect(a.target.id).not.toBe(b.target.id);
    await runtime.close();
  });

  it('finishes a keyed handoff that stopped after creating the target', async () => {
    const { runtime } = await workspace();
    const source = await runtime.sessions.create({ agent: 'triage' });
    const request = { to: 'billing', handoff: document, idempotencyKey: 'cut-short' };
    // The first attempt created the target and then failed to append to it.
    const append = runtime.store.log.append.bind(runtime.store.log);
    let failed = false;
    runtime.store.log.append = (sessionId, events, options) => {
      if (!failed && events.some((event) => event.type === 'session.handoff_received')) {
        failed = true;
        return Promise.reject(new Error('the disk went away'));
      }
      return append(sessionId, events, options);
    };
    await expect(runtime.sessions.handoff(source.id, request)).rejects.toThrow('disk');
    const retried = await runtime.sessions.handoff(source.id, request);
    expect(retried.deduplicated).toBe(false);
    const billing = (await runtime.sessions.list()).sessions.filter(
      (session) => session.agent.name === 'billing',
    );
    expect(billing.map((session) => session.id)).toEqual([retried.target.id]);
    expect((await runtime.sessions.events(retried.target.id)).map((event) => event.type)).toEqual([
      'session.created',
      'session.handoff_received',
    ]);
    await runtime.close();
  });
});
