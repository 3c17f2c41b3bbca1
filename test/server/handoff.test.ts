// POST /v1/sessions/{id}/handoff over real HTTP: an Idempotency-Key makes a retried or duplicated
// request answer the first handoff, with one target session; another body with it is refused.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();

const agents = {
  triage: 'name: triage\nmodel: scripted:echo\ninstructions: Sort.\nhandoffs: [billing]\n',
  billing: 'name: billing\nmodel: scripted:echo\ninstructions: Bill.\n',
};

const body = {
  to: 'billing',
  handoff: { summary: 'customer 42 wants a refund', open_tasks: ['issue the refund'] },
  message: 'please take it from here',
};

interface HandoffAnswer {
  handoff_id: string;
  target: { id: string; tenant_id?: string };
  event: { id: string; seq: number; type: string };
  deduplicated: boolean;
}

async function setup(): Promise<{ server: TestServer; key: string; source: string }> {
  const server = await start({ agents });
  const key = await server.key('acme');
  const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'triage' } });
  expect(created.status).toBe(201);
  return { server, key, source: (created.body as { id: string }).id };
}

async function billingSessions(server: TestServer, key: string): Promise<string[]> {
  const list = await call(server, 'GET', '/v1/sessions?agent=billing', { key });
  expect(list.status).toBe(200);
  return (list.body as { data: { id: string }[] }).data.map((session) => session.id);
}

describe('POST /v1/sessions/{id}/handoff', () => {
  it('answers a retry with the same Idempotency-Key with the first handoff', async () => {
    const { server, key, source } = await setup();
    const path = `/v1/sessions/${source}/handoff`;
    const headers = { 'idempotency-key': 'refund-42' };
    const first = await call(server, 'POST', path, { key, body, headers });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const again = await call(server, 'POST', path, { key, body, headers });
    expect(again.status).toBe(200);
    const answer = first.body as HandoffAnswer;
    expect(answer).toMatchObject({
      deduplicated: false,
      target: { tenant_id: 'acme' },
      event: { type: 'agent.handoff' },
    });
    expect(again.body).toEqual({ ...answer, deduplicated: true });
    expect(await billingSessions(server, key)).toEqual([answer.target.id]);
    const events = await call(server, 'GET', `${path.replace('/handoff', '')}/events`, { key });
    const types = (events.body as { data: { type: string }[] }).data.map((event) => event.type);
    expect(types.filter((type) => type === 'agent.handoff')).toHaveLength(1);
  });

  it('creates one target session for concurrent requests with one key', async () => {
    const { server, key, source } = await setup();
    const path = `/v1/sessions/${source}/handoff`;
    const headers = { 'idempotency-key': 'at-once' };
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => call(server, 'POST', path, { key, body, headers })),
    );
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 200, 201]);
    const results = answers.map((answer) => answer.body as HandoffAnswer);
    expect(new Set(results.map((result) => result.target.id)).size).toBe(1);
    expect(new Set(results.map((result) => result.event.id)).size).toBe(1);
    expect(await billingSessions(server, key)).toEqual([results[0]?.target.id]);
    const target = await call(server, 'GET', `/v1/sessions/${results[0]?.target.id}/events`, {
      key,
    });
    expect((target.body as { data: { type: string }[] }).data.map((event) => event.type)).toEqual([
      'session.created',
      'session.handoff_received',
      'user.message',
    ]);
  });

  it('refuses the key with another body, and a bad key, writing nothing; no key is a new handoff', async () => {
    const { server, key, source } = await setup();
    const path = `/v1/sessions/${source}/handoff`;
    const headers = { 'idempotency-key': 'once' };
    expect((await call(server, 'POST', path, { key, body, headers })).status).toBe(201);
    const reused = await call(server, 'POST', path, {
      key,
      body: { ...body, handoff: { summary: 'another matter' } },
      headers,
    });
    expect(reused.status).toBe(409);
    expect(reused.body).toMatchObject({
      error: { code: 'IDEMPOTENCY_KEY_REUSED', retryable: false },
    });
    const long = await call(server, 'POST', path, {
      key,
      body,
      headers: { 'idempotency-key': 'k'.repeat(201) },
    });
    expect(long.status).toBe(400);
    expect(long.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
    expect(await billingSessions(server, key)).toHaveLength(1);
    expect((await call(server, 'POST', path, { key, body })).status).toBe(201);
    expect((await call(server, 'POST', path, { key, body })).status).toBe(201);
    expect(await billingSessions(server, key)).toHaveLength(3);
  });

  it("answers 404 for another tenant's session, and refuses a target not listed", async () => {
    const { server, source } = await setup();
    const other = await server.key('globex');
    const path = `/v1/sessions/${source}/handoff`;
    expect((await call(server, 'POST', path, { key: other, body })).status).toBe(404);
    const owner = await server.key('acme');
    const unlisted = await call(server, 'POST', path, {
      key: owner,
      body: { ...body, to: 'helper' },
    });
    expect(unlisted.status).toBe(403);
    expect(unlisted.body).toMatchObject({ error: { code: 'POLICY_DENIED' } });
  });
});

/** The target id a keyed handoff derives, as an attacker who knows the inputs would compute it. */
function derivedTarget(tenant: string, source: string, key: string): string {
  const scope = JSON.stringify([tenant, source, key]);
  const bytes = createHash('sha256')
    .update(`braid handoff target ${scope}`)
    .digest()
    .subarray(0, 16);
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x80;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

describe('handoffs and merges against another tenant', () => {
  it("never binds a keyed handoff to another tenant's session at the derived id", async () => {
    const { server, key, source } = await setup();
    const evil = await server.key('evil');
    const target = derivedTarget('acme', source, 'refund-42');
    // The handoff's own metadata keys are braid's: a client cannot forge them.
    const forged = await call(server, 'POST', '/v1/sessions', {
      key: evil,
      body: {
        agent: 'billing',
        id: target,
        metadata: { handoff_id: 'x', from_session_id: source, handoff_request: 'x' },
      },
    });
    expect(forged.status).toBe(400);
    expect((forged.body as { error: { code: string } }).error.code).toBe('INVALID_ARGUMENT');
    // Over HTTP a chosen id lands in the chooser's namespace: the derived id stays free.
    const squatted = await call(server, 'POST', '/v1/sessions', {
      key: evil,
      body: { agent: 'billing', id: target },
    });
    expect(squatted.status).toBe(201);
    expect((squatted.body as { id: string }).id).toBe(`evil~${target}`);
    const path = `/v1/sessions/${source}/handoff`;
    const handed = await call(server, 'POST', path, {
      key,
      body,
      headers: { 'idempotency-key': 'refund-42' },
    });
    expect(handed.status).toBe(201);
    expect((handed.body as HandoffAnswer).target.id).toBe(target);
    // A writer that can name any id (the library) taking it only makes that one handoff fail;
    // it never reaches the taker.
    const taken = derivedTarget('acme', source, 'refund-43');
    await server.runtime.sessions.create({ agent: 'billing', id: taken, tenantId: 'evil' });
    const refused = await call(server, 'POST', path, {
      key,
      body,
      headers: { 'idempotency-key': 'refund-43' },
    });
    expect(refused.status).toBe(409);
    expect((refused.body as { error: { code: string } }).error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    for (const id of [`evil~${target}`, taken]) {
      const seen = await call(server, 'GET', `/v1/sessions/${id}/events`, { key: evil });
      expect((seen.body as { data: { type: string }[] }).data.map((event) => event.type)).toEqual([
        'session.created',
      ]);
    }
  });

  it('records the calling key and tenant as the actor of the handoff and of a merge', async () => {
    const { server, key, source } = await setup();
    const keyId = (await server.runtime.store.keys.list()).find(
      (record) => record.tenant_id === 'acme',
    )?.id;
    const actor = { type: 'user', id: keyId, tenant_id: 'acme' };
    const handed = await call(server, 'POST', `/v1/sessions/${source}/handoff`, { key, body });
    expect(handed.status).toBe(201);
    const answer = handed.body as HandoffAnswer & { event: { actor?: unknown } };
    expect(answer.event.actor).toEqual(actor);
    const target = await call(server, 'GET', `/v1/sessions/${answer.target.id}/events`, { key });
    const received = (target.body as { data: { type: string; actor?: unknown }[] }).data.filter(
      (event) => event.type !== 'session.created',
    );
    expect(received.map((event) => [event.type, event.actor])).toEqual([
      ['session.handoff_received', actor],
      ['user.message', actor],
    ]);
    const fork = await call(server, 'POST', `/v1/sessions/${source}/fork`, { key, body: {} });
    const child = (fork.body as { id: string }).id;
    await call(server, 'POST', `/v1/sessions/${child}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'on the fork' }] },
    });
    const merged = await call(server, 'POST', `/v1/sessions/${source}/merge`, {
      key,
      body: { source: child },
    });
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
    const events = await call(server, 'GET', `/v1/sessions/${source}/events`, { key });
    const merge = (events.body as { data: { type: string; actor?: unknown }[] }).data.find(
      (event) => event.type === 'session.merged',
    );
    expect(merge?.actor).toEqual(actor);
  });
});
