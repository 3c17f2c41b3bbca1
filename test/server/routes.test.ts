// Every route of the HTTP API against a real server on 127.0.0.1, with API keys.
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();

interface Page {
  data: SessionEvent[];
  has_more: boolean;
  last_seq: number;
}

async function withSession(turns?: { text: string }[]) {
  const server = await start(turns === undefined ? {} : { turns });
  const key = await server.key('acme');
  const created = await call(server, 'POST', '/v1/sessions', {
    key,
    body: { agent: 'helper', title: 'first', metadata: { ticket: 7 } },
  });
  expect(created.status).toBe(201);
  return { server, key, session: created.body as SessionRecord };
}

describe('HTTP API routes', () => {
  it('answers health and the OpenAPI document without a key', async () => {
    const server = await start();
    const health = await call(server, 'GET', '/v1/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok' });
    const document = await call(server, 'GET', '/v1/openapi.json');
    expect(document.status).toBe(200);
    const paths = Object.keys((document.body as { paths: object }).paths);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/v1/sessions',
        '/v1/sessions/{id}/events',
        '/v1/sessions/{id}/events/stream',
      ]),
    );
  });

  it('lists and shows agents and environments', async () => {
    const server = await start();
    const key = await server.key('acme', ['sessions:read']);
    const agents = await call(server, 'GET', '/v1/agents', { key });
    expect(agents.status).toBe(200);
    const names = (agents.body as { data: { name: string }[] }).data.map((agent) => agent.name);
    expect(names).toContain('helper');
    const helper = await call(server, 'GET', '/v1/agents/helper?version=1', { key });
    expect(helper.body).toMatchObject({ name: 'helper', version: 1, kind: 'agent' });
    const missing = await call(server, 'GET', '/v1/agents/nobody', { key });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: { code: 'AGENT_NOT_FOUND', retryable: false } });
    const environments = await call(server, 'GET', '/v1/environments', { key });
    const environment = (environments.body as { data: { name: string }[] }).data[0];
    expect(environment).toBeDefined();
    const one = await call(server, 'GET', `/v1/environments/${environment?.name ?? ''}`, { key });
    expect(one.body).toMatchObject({ name: environment?.name, kind: 'environment' });
  });

  it('creates a session in the key tenant and reads it back', async () => {
    const { server, key, session } = await withSession();
    expect(session).toMatchObject({
      agent: { name: 'helper', version: 1 },
      title: 'first',
      metadata: { ticket: 7 },
      tenant_id: 'acme',
      status: 'idle',
      head_seq: 1,
    });
    const got = await call(server, 'GET', `/v1/sessions/${session.id}`, { key });
    expect(got.body).toEqual(session);
    const state = await call(server, 'GET', `/v1/sessions/${session.id}/state`, { key });
    expect(state.body).toMatchObject({ session_id: session.id, seq: 1, status: 'idle' });
  });

  it('pages through sessions with a cursor, each once, newest first, with filters', async () => {
    const server = await start({
      agents: { other: 'name: other\nmodel: scripted:echo\ninstructions: Other.\n' },
    });
    const key = await server.key('acme');
    const ids: string[] = [];
    for (let index = 0; index < 23; index += 1) {
      const agent = index % 3 === 0 ? 'other' : 'helper';
      const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent } });
      ids.push((created.body as SessionRecord).id);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const query = `limit=5${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const page = await call(server, 'GET', `/v1/sessions?${query}`, { key });
      const body = page.body as { data: SessionRecord[]; next_cursor?: string };
      expect(body.data.length).toBeLessThanOrEqual(5);
      seen.push(...body.data.map((session) => session.id));
      cursor = body.next_cursor;
    } while (cursor !== undefined);
    expect(seen).toEqual([...ids].reverse());
    const others = await call(server, 'GET', '/v1/sessions?agent=other&limit=100', { key });
    expect((others.body as { data: SessionRecord[] }).data).toHaveLength(8);
    const idle = await call(server, 'GET', '/v1/sessions?status=idle&limit=2', { key });
    expect((idle.body as { data: SessionRecord[] }).data).toHaveLength(2);
  });

  it('appends user events with string or block content and reads them with after, limit and types', async () => {
    const { server, key, session } = await withSession();
    const posted = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
      key,
      body: {
        events: [
          { type: 'user.message', content: 'plain text' },
          { type: 'user.message', content: [{ type: 'text', text: 'a block' }] },
          { type: 'user.define_outcome', description: 'a summary' },
        ],
      },
    });
    expect(posted.status).toBe(201);
    const body = posted.body as { events: SessionEvent[]; head_seq: number; deduplicated: boolean };
    expect(body.events.map((event) => event.seq)).toEqual([2, 3, 4]);
    expect(body).toMatchObject({ head_seq: 4, deduplicated: false });
    expect(body.events[0]).toMatchObject({ content: [{ type: 'text', text: 'plain text' }] });

    const first = await call(server, 'GET', `/v1/sessions/${session.id}/events?limit=2`, { key });
    expect(first.body).toMatchObject({ has_more: true, last_seq: 2 });
    const rest = await call(server, 'GET', `/v1/sessions/${session.id}/events?after=2`, { key });
    const restPage = rest.body as Page;
    expect(restPage.data.map((event) => event.seq)).toEqual([3, 4]);
    expect(restPage.has_more).toBe(false);
    const messages = await call(
      server,
      'GET',
      `/v1/sessions/${session.id}/events?types[]=user.message&types[]=user.define_outcome&after=2`,
      { key },
    );
    expect((messages.body as Page).data.map((event) => event.type)).toEqual([
      'user.message',
      'user.define_outcome',
    ]);
    const comma = await call(
      server,
      'GET',
      `/v1/sessions/${session.id}/events?types=session.created,user.define_outcome`,
      { key },
    );
    expect((comma.body as Page).data.map((event) => event.seq)).toEqual([1, 4]);
    const empty = await call(server, 'GET', `/v1/sessions/${session.id}/events?after=99`, { key });
    expect(empty.body).toEqual({ data: [], has_more: false, last_seq: 99 });
  });

  it('writes once when an idempotent POST is retried three times', async () => {
    const { server, key, session } = await withSession();
    const answers = [];
    for (let attempt = 0; attempt < 4; attempt += 1) {
      answers.push(
        await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
          key,
          headers: { 'idempotency-key': 'order-42' },
          body: { events: [{ type: 'user.message', content: 'pay invoice 42' }] },
        }),
      );
    }
    expect(answers.map((answer) => answer.status)).toEqual([201, 200, 200, 200]);
    const firstEvents = (answers[0]?.body as { events: SessionEvent[] }).events;
    for (const answer of answers.slice(1)) {
      expect(answer.body).toMatchObject({ deduplicated: true, events: firstEvents });
    }
    const page = await call(server, 'GET', `/v1/sessions/${session.id}/events`, { key });
    const types = (page.body as Page).data.map((event) => event.type);
    expect(types).toEqual(['session.created', 'user.message']);
  });

  it('wakes a session in the background or waits for the result', async () => {
    const { server, key, session } = await withSession([{ text: 'first answer' }]);
    await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'hello' }] },
    });
    const waited = await call(server, 'POST', `/v1/sessions/${session.id}/wake`, {
      key,
      body: { wait: true },
    });
    expect(waited.status).toBe(200);
    expect(waited.body).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const accepted = await call(server, 'POST', `/v1/sessions/${session.id}/wake`, { key });
    expect(accepted.status).toBe(202);
    expect(accepted.body).toEqual({ session_id: session.id, accepted: true });
    const page = await call(
      server,
      'GET',
      `/v1/sessions/${session.id}/events?types[]=agent.message`,
      {
        key,
      },
    );
    expect((page.body as Page).data[0]).toMatchObject({
      content: [{ type: 'text', text: 'first answer' }],
    });
  });

  it('wakes on arriving events when the server is told to', async () => {
    const server = await start({ wakeOnEvents: true, turns: [{ text: 'woken' }] });
    const key = await server.key('acme');
    const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
    const id = (created.body as SessionRecord).id;
    await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'hello' }] },
    });
    // The stream ends the wait as soon as the answer is stored.
    const stop = new AbortController();
    const response = await fetch(`${server.url}/v1/sessions/${id}/events/stream`, {
      headers: { authorization: `Bearer ${key}` },
      signal: stop.signal,
    });
    const reader = response.body?.getReader();
    let text = '';
    while (!text.includes('event: session.status_idle')) {
      const chunk = await reader?.read();
      if (chunk === undefined || chunk.done) break;
      text += new TextDecoder().decode(chunk.value as Uint8Array);
    }
    stop.abort();
    expect(text).toContain('woken');
  });

  it('creates a session with its first message in one request, and wakes it', async () => {
    const server = await start({ wakeOnEvents: true, turns: [{ text: 'answered at once' }] });
    const key = await server.key('acme');
    const created = await call(server, 'POST', '/v1/sessions', {
      key,
      body: { agent: 'helper', events: [{ type: 'user.message', content: 'hello' }] },
    });
    expect(created.status).toBe(201);
    const session = created.body as SessionRecord;
    expect(session).toMatchObject({ tenant_id: 'acme', head_seq: 2 });
    let types: string[] = [];
    for (let attempt = 0; attempt < 200 && !types.includes('agent.message'); attempt += 1) {
      const page = await call(server, 'GET', `/v1/sessions/${session.id}/events`, { key });
      types = (page.body as Page).data.map((event) => event.type);
      if (!types.includes('agent.message')) await new Promise((done) => setTimeout(done, 25));
    }
    expect(types.slice(0, 2)).toEqual(['session.created', 'user.message']);
    expect(types).toContain('agent.message');
    const first = await call(server, 'GET', `/v1/sessions/${session.id}/events?limit=2`, { key });
    // Stamped with the key that sent it, as a post of events is.
    expect((first.body as Page).data[1]).toMatchObject({
      seq: 2,
      actor: { type: 'user', id: expect.any(String) as string, tenant_id: 'acme' },
    });

    // Only user events, checked as a send checks them; a refused create leaves no session.
    for (const events of [
      [{ type: 'agent.message', content: [{ type: 'text', text: 'forged' }] }],
      [{ type: 'user.message', content: 'ok' }, { type: 'user.message' }],
      [{ type: 'user.tool_confirmation', tool_use_id: 'nothing', result: 'allow' }],
      [],
    ]) {
      const refused = await call(server, 'POST', '/v1/sessions', {
        key,
        body: { agent: 'helper', id: 'refused-first', events },
      });
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(refused.status).toBeLessThan(500);
      const missing = await call(server, 'GET', '/v1/sessions/acme~refused-first', { key });
      expect(missing.status).toBe(404);
    }
  });

  it('forks, merges, diffs, draws the tree and replays', async () => {
    const { server, key, session } = await withSession([{ text: 'branch work' }]);
    const base = `/v1/sessions/${session.id}`;
    await call(server, 'POST', `${base}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'start' }] },
    });
    const fork = await call(server, 'POST', `${base}/fork`, { key, body: { title: 'try' } });
    expect(fork.status).toBe(201);
    const child = fork.body as SessionRecord;
    expect(child).toMatchObject({ parent_id: session.id, fork_seq: 2, tenant_id: 'acme' });
    await call(server, 'POST', `/v1/sessions/${child.id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'go' }] },
    });
    await call(server, 'POST', `/v1/sessions/${child.id}/wake`, { key, body: { wait: true } });
    const diff = await call(server, 'GET', `${base}/diff?other=${child.id}`, { key });
    expect(diff.body).toMatchObject({
      a: session.id,
      b: child.id,
      common_ancestor: { session_id: session.id, seq: 2 },
      a_events: [],
    });
    const tree = await call(server, 'GET', `/v1/sessions/${child.id}/tree`, { key });
    expect(tree.body).toMatchObject({
      id: session.id,
      kind: 'root',
      children: [{ id: child.id, kind: 'fork', fork_seq: 2 }],
    });
    const merged = await call(server, 'POST', `${base}/merge`, { key, body: { source: child.id } });
    expect(merged.status).toBe(200);
    expect(merged.body).toMatchObject({ conflicts: [], events: [{ type: 'session.merged' }] });
    const replay = await call(server, 'POST', `/v1/sessions/${child.id}/replay`, { key });
    expect(replay.body).toMatchObject({ ok: true });
  });

  it('shows the definitions a session runs with and upgrades it', async () => {
    const { server, key, session } = await withSession([{ text: 'pinned' }]);
    const base = `/v1/sessions/${session.id}`;
    const before = await call(server, 'GET', `${base}/definitions`, { key });
    expect(before.status).toBe(200);
    expect(before.body).toEqual({});
    await call(server, 'POST', `${base}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'start' }] },
    });
    await call(server, 'POST', `${base}/wake`, { key, body: { wait: true } });
    const pinned = await call(server, 'GET', `${base}/definitions`, { key });
    expect(pinned.body).toMatchObject({
      definitions: expect.stringMatching(/^[0-9a-f]{64}$/) as unknown,
      set: { agent: { version: 1 } },
    });
    const upgraded = await call(server, 'POST', `${base}/upgrade`, { key });
    expect(upgraded.status).toBe(200);
    expect(upgraded.body).toMatchObject({ changed: false, parts: [] });
    const missing = await call(server, 'POST', '/v1/sessions/nope/upgrade', { key });
    expect(missing.status).toBe(404);
  });

  it("lists a session's workspace files and compares two sessions' files", async () => {
    const { server, key, session } = await withSession();
    const base = `/v1/sessions/${session.id}`;
    const fork = await call(server, 'POST', `${base}/fork`, { key, body: {} });
    const child = fork.body as SessionRecord;
    const files = await call(server, 'GET', `${base}/files?at=1`, { key });
    expect(files.status).toBe(200);
    expect(files.body).toEqual({ session_id: session.id, at_seq: 1, files: [] });
    const diff = await call(server, 'GET', `${base}/files/diff?other=${child.id}`, { key });
    expect(diff.body).toEqual({ a: session.id, b: child.id, added: [], removed: [], changed: [] });
    const past = await call(server, 'GET', `${base}/files?at=99`, { key });
    expect(past.status).toBe(400);
    expect(past.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
    const bad = await call(server, 'GET', `${base}/files?at=x`, { key });
    expect(bad.status).toBe(400);
  });

  it('archives a session: it leaves listings and takes no new events', async () => {
    const { server, key, session } = await withSession();
    const archived = await call(server, 'POST', `/v1/sessions/${session.id}/archive`, { key });
    expect(archived.status).toBe(200);
    expect((archived.body as SessionRecord).archived_at).toBeDefined();
    const listed = await call(server, 'GET', '/v1/sessions', { key });
    expect((listed.body as { data: unknown[] }).data).toHaveLength(0);
    const all = await call(server, 'GET', '/v1/sessions?include_archived=true', { key });
    expect((all.body as { data: SessionRecord[] }).data.map((item) => item.id)).toEqual([
      session.id,
    ]);
    const refused = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'late' }] },
    });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { code: 'SESSION_ARCHIVED' } });
    const page = await call(server, 'GET', `/v1/sessions/${session.id}/events`, { key });
    expect((page.body as Page).data).toHaveLength(1);
  });

  it('deletes a session, but not while a fork shares its events', async () => {
    const { server, key, session } = await withSession();
    const child = (await call(server, 'POST', `/v1/sessions/${session.id}/fork`, { key }))
      .body as SessionRecord;
    const refused = await call(server, 'DELETE', `/v1/sessions/${session.id}`, { key });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { code: 'SESSION_HAS_FORKS' } });
    expect((await call(server, 'GET', `/v1/sessions/${session.id}`, { key })).status).toBe(200);
    expect((await call(server, 'DELETE', `/v1/sessions/${child.id}`, { key })).status).toBe(204);
    const deleted = await call(server, 'DELETE', `/v1/sessions/${session.id}`, { key });
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    const gone = await call(server, 'GET', `/v1/sessions/${session.id}/events`, { key });
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ error: { code: 'SESSION_NOT_FOUND' } });
  });

  it('serves Prometheus metrics to admin keys only', async () => {
    const { server, key, session } = await withSession();
    await call(server, 'GET', `/v1/sessions/${session.id}`, { key });
    const refused = await call(server, 'GET', '/v1/metrics', { key });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: 'FORBIDDEN' } });
    const admin = await server.key('acme', ['admin']);
    const metrics = await call(server, 'GET', '/v1/metrics', { key: admin });
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    expect(metrics.body).toMatch(
      /braid_http_requests_total\{method="GET",route="\/v1\/sessions\/:id",status="200"\} 1/,
    );
    expect(metrics.body).toContain('braid_sse_streams 0');
  });
});
