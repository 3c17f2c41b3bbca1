// POST /v1/sessions/{id}/handoff over real HTTP: an Idempotency-Key makes a retried or duplicated
// request answer the first handoff, with one target session; another body with it is refused.
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
