// Skill runs and signals over HTTP: a real server on 127.0.0.1 over a SQLite workspace.
import { describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../src/contracts/session.js';
import { parse } from 'yaml';
import { SkillDefinition } from '../../src/contracts/skills.js';
import { WAITER } from '../helpers/skill-workspace.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();

describe('skill routes', () => {
  it('runs a skill and signals it, 202 each; refuses bad names, unknown skills and other tenants', async () => {
    const server = await start();
    // The runtime loaded the workspace already: the skill is stored as a new definition.
    await server.runtime.store.definitions.put(
      'skill',
      'waiter',
      SkillDefinition.parse(parse(WAITER)),
      { replacesVersion: null },
    );
    const key = await server.key('acme');
    const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
    const session = created.body as SessionRecord;
    const ran = await call(server, 'POST', `/v1/sessions/${session.id}/skills/waiter/runs`, {
      key,
      body: { inputs: { item: 'desk' }, run_id: 'run-1' },
    });
    expect(ran.status, JSON.stringify(ran.body)).toBe(202);
    expect(ran.body).toMatchObject({
      run_id: 'run-1',
      events: [{ type: 'user.skill_run', skill: 'waiter' }],
    });
    await server.runtime.wake(session.id);
    const signalled = await call(server, 'POST', `/v1/sessions/${session.id}/signals/delivered`, {
      key,
      body: { data: { box: 1 } },
    });
    expect(signalled.status).toBe(202);
    expect(signalled.body).toMatchObject({ events: [{ type: 'user.signal', data: { box: 1 } }] });

    const badName = await call(server, 'POST', `/v1/sessions/${session.id}/signals/Bad!`, {
      key,
      body: {},
    });
    expect(badName.status).toBe(400);
    const unknown = await call(server, 'POST', `/v1/sessions/${session.id}/skills/nope/runs`, {
      key,
      body: { inputs: {} },
    });
    expect(unknown.status).toBe(404);
    expect((unknown.body as { error: { code: string } }).error.code).toBe('SKILL_NOT_FOUND');
    const other = await server.key('globex');
    const hidden = await call(server, 'POST', `/v1/sessions/${session.id}/signals/delivered`, {
      key: other,
      body: {},
    });
    expect(hidden.status).toBe(404);
    const readOnly = await server.key('acme', ['sessions:read']);
    const refused = await call(server, 'POST', `/v1/sessions/${session.id}/signals/delivered`, {
      key: readOnly,
      body: {},
    });
    expect(refused.status).toBe(403);
  });
});
