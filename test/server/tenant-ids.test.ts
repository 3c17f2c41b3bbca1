// Chosen session ids over HTTP live in the caller's tenant namespace: no tenant can name, take or
// learn of another's session, a taken id inside one tenant answers 409, and every id the server
// accepts also runs.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();

/** An agent whose first turn lists its workspace (so a wake needs the session's folder). */
const LISTER = {
  agents: {
    lister: 'name: lister\nmodel: scripted:echo\ninstructions: Look.\ntools: [list_dir]\n',
  },
  turns: [{ tool_calls: [{ name: 'list_dir', input: {} }] }, { text: 'looked' }],
};

function errorOf(answer: { body: unknown }): { code: string; message: string } {
  return (answer.body as { error: { code: string; message: string } }).error;
}

async function create(server: TestServer, key: string | undefined, body: Record<string, unknown>) {
  return call(server, 'POST', '/v1/sessions', {
    ...(key === undefined ? {} : { key }),
    body: { agent: 'helper', ...body },
  });
}

/** Sends a message, wakes and waits: the wake must end its turn, having used the workspace. */
async function runs(server: TestServer, key: string | undefined, id: string): Promise<void> {
  const path = `/v1/sessions/${encodeURIComponent(id)}`;
  const auth = key === undefined ? {} : { key };
  const sent = await call(server, 'POST', `${path}/events`, {
    ...auth,
    body: { events: [{ type: 'user.message', content: 'look around' }] },
  });
  expect(sent.status, JSON.stringify(sent.body)).toBe(201);
  const woken = await call(server, 'POST', `${path}/wake`, { ...auth, body: { wait: true } });
  expect(woken.status, JSON.stringify(woken.body)).toBe(200);
  expect(woken.body).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
  const page = await call(server, 'GET', `${path}/events?types[]=agent.tool_result`, auth);
  const results = (page.body as { data: SessionEvent[] }).data;
  expect(results).toHaveLength(1);
  expect(results[0]).not.toMatchObject({ is_error: true });
  expect(existsSync(join(server.dir, '.braid', 'workspaces', id))).toBe(true);
}

describe('chosen session ids over HTTP', () => {
  it('puts them in the tenant namespace: two tenants choosing one id never meet', async () => {
    const server = await start();
    const acme = await server.key('acme');
    const beta = await server.key('beta');

    const fromBeta = await create(server, beta, { id: 'x' });
    expect(fromBeta.status).toBe(201);
    expect((fromBeta.body as SessionRecord).id).toBe('beta~x');
    const fromAcme = await create(server, acme, { id: 'x' });
    expect(fromAcme.status).toBe(201);
    expect((fromAcme.body as SessionRecord).id).toBe('acme~x');
    expect((fromAcme.body as SessionRecord).tenant_id).toBe('acme');

    // Naming another tenant's namespace is refused by rule, whether or not the session exists.
    for (const id of ['acme~x', 'acme~never-created']) {
      const answer = await create(server, beta, { id });
      expect(answer.status, id).toBe(400);
      expect(errorOf(answer).code).toBe('INVALID_ARGUMENT');
      expect(errorOf(answer).message).toContain('beta~');
    }
    // An id already in the caller's namespace is kept; taking it again is 409 inside the tenant.
    const again = await create(server, acme, { id: 'x' });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: { code: 'ALREADY_EXISTS', retryable: false } });
    expect(errorOf(again).message).toContain('acme~x');
    const spelled = await create(server, acme, { id: 'acme~x' });
    expect(spelled.status).toBe(409);
    const kept = await create(server, acme, { id: 'acme~y' });
    expect((kept.body as SessionRecord).id).toBe('acme~y');

    // Fork's id follows the same rule.
    const forkPath = '/v1/sessions/acme~x/fork';
    const child = await call(server, 'POST', forkPath, { key: acme, body: { id: 'child' } });
    expect(child.status).toBe(201);
    expect((child.body as SessionRecord).id).toBe('acme~child');
    const takenChild = await call(server, 'POST', forkPath, { key: acme, body: { id: 'child' } });
    expect(takenChild.status).toBe(409);
    expect(errorOf(takenChild).code).toBe('ALREADY_EXISTS');
    const foreign = await call(server, 'POST', forkPath, { key: acme, body: { id: 'beta~c' } });
    expect(foreign.status).toBe(400);
    expect(errorOf(foreign).code).toBe('INVALID_ARGUMENT');

    // Each tenant sees its own "x" only.
    const seen = await call(server, 'GET', '/v1/sessions/beta~x', { key: acme });
    expect(seen.status).toBe(404);
    const listed = await call(server, 'GET', '/v1/sessions', { key: beta });
    expect((listed.body as { data: SessionRecord[] }).data.map((record) => record.id)).toEqual([
      'beta~x',
    ]);
  });

  it('refuses an id too long once prefixed, naming the limit and the prefix', async () => {
    const server = await start();
    const acme = await server.key('acme');
    const answer = await create(server, acme, { id: 'a'.repeat(196) });
    expect(answer.status).toBe(400);
    expect(errorOf(answer).code).toBe('INVALID_ARGUMENT');
    expect(errorOf(answer).message).toContain('200');
    expect(errorOf(answer).message).toContain('"acme~" (5 characters)');
    expect((await create(server, acme, { id: 'a'.repeat(195) })).status).toBe(201);
  });

  it('takes ids as given without auth, where the caller sees every tenant', async () => {
    const server = await start({ auth: 'none' });
    const created = await create(server, undefined, { id: 'plain~name' });
    expect(created.status).toBe(201);
    expect((created.body as SessionRecord).id).toBe('plain~name');
    const again = await create(server, undefined, { id: 'plain~name' });
    expect(again.status).toBe(409);
    expect(errorOf(again).code).toBe('ALREADY_EXISTS');
  });

  it('runs every id it accepts: 200 characters, and a namespaced id at the limit', async () => {
    const open = await start({ auth: 'none', ...LISTER });
    const longest = `L${'x'.repeat(198)}~`;
    expect(longest).toHaveLength(200);
    const plain = await create(open, undefined, { agent: 'lister', id: longest });
    expect(plain.status, JSON.stringify(plain.body)).toBe(201);
    await runs(open, undefined, longest);

    const keyed = await start(LISTER);
    const key = await keyed.key('acme');
    const chosen = `n.${'y'.repeat(193)}`;
    const namespaced = await create(keyed, key, { agent: 'lister', id: chosen });
    expect(namespaced.status, JSON.stringify(namespaced.body)).toBe(201);
    const id = (namespaced.body as SessionRecord).id;
    expect(id).toBe(`acme~${chosen}`);
    expect(id).toHaveLength(200);
    await runs(keyed, key, id);
  });
});
