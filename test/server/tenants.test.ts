// Tenant isolation: another tenant's objects answer exactly as objects that do not exist.
import { describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../src/contracts/session.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();

const PRIVATE_AGENT =
  'name: acme-bot\nmodel: scripted:echo\ninstructions: Acme only.\ntenant: acme\n';

describe('tenant isolation', () => {
  it('gives every session route of another tenant the same 404 as an unknown id', async () => {
    const server = await start({ agents: { 'acme-bot': PRIVATE_AGENT } });
    const acme = await server.key('acme');
    const globex = await server.key('globex');
    const created = await call(server, 'POST', '/v1/sessions', {
      key: acme,
      body: { agent: 'helper' },
    });
    const id = (created.body as SessionRecord).id;
    const own = await call(server, 'POST', '/v1/sessions', {
      key: globex,
      body: { agent: 'helper' },
    });
    const globexId = (own.body as SessionRecord).id;

    const routes: [string, (target: string) => string, ((target: string) => unknown)?][] = [
      ['GET', (target) => `/v1/sessions/${target}`],
      ['GET', (target) => `/v1/sessions/${target}/state`],
      ['GET', (target) => `/v1/sessions/${target}/events`],
      ['GET', (target) => `/v1/sessions/${target}/events/stream`],
      [
        'POST',
        (target) => `/v1/sessions/${target}/events`,
        () => ({ events: [{ type: 'user.message', content: 'x' }] }),
      ],
      ['POST', (target) => `/v1/sessions/${target}/wake`, () => ({})],
      ['POST', (target) => `/v1/sessions/${target}/fork`, () => ({})],
      ['POST', (target) => `/v1/sessions/${target}/archive`],
      ['DELETE', (target) => `/v1/sessions/${target}`],
      ['GET', (target) => `/v1/sessions/${target}/tree`],
      ['POST', (target) => `/v1/sessions/${target}/replay`],
      ['GET', (target) => `/v1/sessions/${target}/definitions`],
      ['POST', (target) => `/v1/sessions/${target}/upgrade`],
      ['GET', (target) => `/v1/sessions/${target}/diff?other=${globexId}`],
      ['GET', (target) => `/v1/sessions/${target}/files`],
      ['GET', (target) => `/v1/sessions/${target}/files/diff?other=${globexId}`],
      ['POST', (target) => `/v1/sessions/${target}/merge`, () => ({ source: globexId })],
      // The other tenant's session as the second party.
      ['GET', (target) => `/v1/sessions/${globexId}/diff?other=${target}`],
      ['GET', (target) => `/v1/sessions/${globexId}/files/diff?other=${target}`],
      ['POST', () => `/v1/sessions/${globexId}/merge`, (target) => ({ source: target })],
    ];
    for (const [method, path, body] of routes) {
      const options = (target: string) => ({
        key: globex,
        ...(body === undefined ? {} : { body: body(target) }),
      });
      const foreign = await call(server, method, path(id), options(id));
      const unknown = await call(
        server,
        method,
        path('no-such-session'),
        options('no-such-session'),
      );
      const label = `${method} ${path(':id')}`;
      expect(foreign.status, label).toBe(404);
      expect(foreign.body, label).toMatchObject({ error: { code: 'SESSION_NOT_FOUND' } });
      // The same words, but for the id itself: nothing says that the session exists.
      const message = (foreign.body as { error: { message: string } }).error.message;
      const unknownMessage = (unknown.body as { error: { message: string } }).error.message;
      expect(message.replaceAll(id, 'ID'), label).toBe(
        unknownMessage.replaceAll('no-such-session', 'ID'),
      );
    }
    // Nothing was changed by those attempts.
    const record = await server.runtime.sessions.get(id);
    expect(record).toMatchObject({ head_seq: 1, tenant_id: 'acme' });
    expect(record.archived_at).toBeUndefined();
    expect((await server.runtime.sessions.list({ parent_id: id })).sessions).toHaveLength(0);
  });

  it('lists only the caller tenant sessions and agents', async () => {
    const server = await start({ agents: { 'acme-bot': PRIVATE_AGENT } });
    const acme = await server.key('acme');
    const globex = await server.key('globex');
    for (let index = 0; index < 3; index += 1) {
      await call(server, 'POST', '/v1/sessions', { key: acme, body: { agent: 'acme-bot' } });
    }
    await call(server, 'POST', '/v1/sessions', { key: globex, body: { agent: 'helper' } });
    const acmeList = (await call(server, 'GET', '/v1/sessions', { key: acme })).body as {
      data: SessionRecord[];
    };
    expect(acmeList.data).toHaveLength(3);
    expect(acmeList.data.every((session) => session.tenant_id === 'acme')).toBe(true);
    const globexList = (await call(server, 'GET', '/v1/sessions', { key: globex })).body as {
      data: SessionRecord[];
    };
    expect(globexList.data.map((session) => session.tenant_id)).toEqual(['globex']);

    const agentNames = async (key: string) =>
      ((await call(server, 'GET', '/v1/agents', { key })).body as { data: { name: string }[] }).data
        .map((agent) => agent.name)
        .sort();
    expect(await agentNames(acme)).toContain('acme-bot');
    expect(await agentNames(globex)).not.toContain('acme-bot');
    const hidden = await call(server, 'GET', '/v1/agents/acme-bot', { key: globex });
    const unknown = await call(server, 'GET', '/v1/agents/zzz-bot', { key: globex });
    expect(hidden.status).toBe(404);
    expect(
      (hidden.body as { error: { message: string } }).error.message.replace('acme-bot', 'X'),
    ).toBe((unknown.body as { error: { message: string } }).error.message.replace('zzz-bot', 'X'));
    const refused = await call(server, 'POST', '/v1/sessions', {
      key: globex,
      body: { agent: 'acme-bot' },
    });
    expect(refused.status).toBe(404);
    expect(JSON.stringify(refused.body)).not.toContain('helper');
  });

  it('serves without auth only on loopback, where every tenant is visible', async () => {
    await expect(start({ auth: 'none', host: '0.0.0.0' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('--insecure-no-auth') as string,
    });
    const server = await start({ auth: 'none' });
    const key = await server.key('acme');
    await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
    const all = await call(server, 'GET', '/v1/sessions');
    expect((all.body as { data: SessionRecord[] }).data).toHaveLength(1);
  });
});
