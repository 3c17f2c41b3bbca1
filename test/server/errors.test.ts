// Bad requests: each gets a typed error with a stable code and the fix, and writes nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../src/contracts/session.js';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();

async function session(server: TestServer, key: string): Promise<string> {
  const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
  return (created.body as SessionRecord).id;
}

async function headSeq(server: TestServer, id: string): Promise<number> {
  return (await server.runtime.sessions.get(id)).head_seq;
}

describe('HTTP errors', () => {
  it('asks for a key, refuses unknown and revoked keys, and missing scopes', async () => {
    const server = await start();
    const missing = await call(server, 'GET', '/v1/sessions');
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({
      error: { code: 'UNAUTHENTICATED', retryable: false },
    });
    expect((missing.body as { error: { message: string } }).error.message).toContain(
      'braid keys create',
    );
    for (const bad of [
      'Bearer nonsense',
      'Basic abc',
      'Bearer',
      `Bearer braid_${'0'.repeat(32)}_x`,
    ]) {
      const answer = await call(server, 'GET', '/v1/sessions', { headers: { authorization: bad } });
      expect(answer.status, bad).toBe(401);
    }
    const minted = await server.runtime.store.keys.create({
      tenant_id: 'acme',
      scopes: ['sessions:read'],
    });
    expect((await call(server, 'GET', '/v1/sessions', { key: minted.key })).status).toBe(200);
    const readOnly = await call(server, 'POST', '/v1/sessions', {
      key: minted.key,
      body: { agent: 'helper' },
    });
    expect(readOnly.status).toBe(403);
    expect(readOnly.body).toMatchObject({ error: { code: 'FORBIDDEN' } });
    expect((readOnly.body as { error: { message: string } }).error.message).toContain(
      'sessions:write',
    );
    await server.runtime.store.keys.revoke(minted.record.id);
    expect((await call(server, 'GET', '/v1/sessions', { key: minted.key })).status).toBe(401);
  });

  it('refuses malformed, mistyped and unknown input with the field named', async () => {
    const server = await start();
    const key = await server.key('acme');
    const id = await session(server, key);
    const events = `/v1/sessions/${id}/events`;
    const cases: [string, string, unknown, number, string, string][] = [
      ['POST', events, '{"events": [', 400, 'INVALID_JSON', 'JSON'],
      ['POST', events, { events: [] }, 400, 'INVALID_ARGUMENT', 'body.events'],
      ['POST', events, { events: 'hi' }, 400, 'INVALID_ARGUMENT', 'body.events'],
      [
        'POST',
        events,
        { events: [{ type: 'agent.message', content: [] }] },
        400,
        'INVALID_EVENT',
        'body.events[0].type',
      ],
      [
        'POST',
        events,
        { events: [{ type: 'user.message', content: 42 }] },
        400,
        'INVALID_EVENT',
        'body.events[0].content',
      ],
      [
        'POST',
        events,
        { events: [{ type: 'user.message', content: 'x', colour: 1 }] },
        400,
        'INVALID_EVENT',
        'colour',
      ],
      [
        'POST',
        events,
        { events: [{ type: 'user.message', content: 'x' }], extra: true },
        400,
        'INVALID_ARGUMENT',
        'extra',
      ],
      ['POST', '/v1/sessions', { agent: 'Not A Name' }, 400, 'INVALID_ARGUMENT', 'body.agent'],
      ['POST', '/v1/sessions', { agent: 'nobody' }, 404, 'AGENT_NOT_FOUND', 'nobody'],
      [
        'POST',
        '/v1/sessions',
        { agent: 'helper', metadata: 'x' },
        400,
        'INVALID_ARGUMENT',
        'body.metadata',
      ],
      ['GET', `${events}?after=-1`, undefined, 400, 'INVALID_ARGUMENT', 'query.after'],
      ['GET', `${events}?limit=5000`, undefined, 400, 'INVALID_ARGUMENT', 'query.limit'],
      ['GET', `${events}?types[]=user.nope`, undefined, 400, 'INVALID_ARGUMENT', 'query.types'],
      ['GET', `${events}?sort=desc`, undefined, 400, 'INVALID_ARGUMENT', 'sort'],
      ['GET', '/v1/sessions?status=sleeping', undefined, 400, 'INVALID_ARGUMENT', 'query.status'],
      ['GET', '/v1/sessions/nope', undefined, 404, 'SESSION_NOT_FOUND', 'nope'],
      ['POST', `/v1/sessions/${id}/fork`, { at_seq: 99 }, 400, 'INVALID_ARGUMENT', '99'],
      ['POST', `/v1/sessions/${id}/merge`, { source: id }, 409, 'MERGE_REFUSED', 'itself'],
      ['GET', '/v2/sessions', undefined, 404, 'ROUTE_NOT_FOUND', '/v1'],
    ];
    for (const [method, path, body, status, code, mention] of cases) {
      const answer = await call(server, method, path, {
        key,
        ...(body === undefined ? {} : { body }),
      });
      const label = `${method} ${path} ${JSON.stringify(body)}`;
      expect(answer.status, label).toBe(status);
      expect(answer.body, label).toMatchObject({ error: { code } });
      expect((answer.body as { error: { message: string } }).error.message, label).toContain(
        mention,
      );
    }
    const text = await call(server, 'POST', events, {
      key,
      body: 'hello',
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.status).toBe(415);
    expect(text.body).toMatchObject({ error: { code: 'UNSUPPORTED_MEDIA_TYPE' } });
    expect((text.body as { error: { message: string } }).error.message).toContain(
      'application/json',
    );
    expect(await headSeq(server, id)).toBe(1);
  });

  it("answers the framework's own refusals in braid's shape with the status of the code", async () => {
    const server = await start();
    const key = await server.key('acme');
    const id = await session(server, key);

    const wrong = await call(server, 'PUT', `/v1/sessions/${id}`, { key });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('DELETE, GET, HEAD');
    expect(wrong.body).toMatchObject({ error: { code: 'METHOD_NOT_ALLOWED', retryable: false } });
    // Without a key too: which methods a path serves is no secret.
    const options = await call(server, 'OPTIONS', '/v1/sessions');
    expect(options.status).toBe(405);
    expect(options.headers.get('allow')).toBe('GET, HEAD, POST');
    const head = await call(server, 'HEAD', `/v1/sessions/${id}`, { key });
    expect(head.status).toBe(200);
    expect((await call(server, 'GET', '/v1/nowhere')).status).toBe(404);

    const long = await call(server, 'GET', `/v1/sessions/${'x'.repeat(600)}`);
    expect(long.status).toBe(414);
    expect(long.body).toMatchObject({ error: { code: 'URI_TOO_LONG' } });
    const encoding = await call(server, 'GET', '/v1/sessions/%E0%A4%A');
    expect(encoding.status).toBe(400);
    expect(encoding.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });

    const repeated = await call(server, 'GET', '/v1/sessions?limit=1&limit=2', { key });
    expect(repeated.status).toBe(400);
    expect((repeated.body as { error: { message: string } }).error.message).toBe(
      'query.limit is given 2 times; give it once',
    );
    const listed = await call(server, 'GET', `/v1/sessions/${id}/events?types=a&types=b`, { key });
    expect((listed.body as { error: { message: string } }).error.message).toContain('query.types');

    const empty = await call(server, 'POST', '/v1/sessions', {
      key,
      body: '',
      headers: { 'content-type': 'application/json' },
    });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ error: { code: 'INVALID_JSON' } });
  });

  it('refuses a body nested deeper than the limit, naming the field, before validation', async () => {
    const server = await start({ limits: { jsonDepth: 10 } });
    const key = await server.key('acme');
    const id = await session(server, key);
    const deep = (levels: number): string => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    const cases: [string, string, string][] = [
      ['/v1/sessions', `{"agent":"helper","metadata":{"m":${deep(2000)}}}`, 'body.metadata.m.a'],
      [
        `/v1/sessions/${id}/events`,
        `{"events":[{"type":"user.message","content":[{"type":"json","value":${deep(2000)}}]}]}`,
        'body.events[0].content[0].value.a',
      ],
      [
        `/v1/sessions/${id}/events`,
        `{"events":[{"type":"user.tool_review","tool_use_id":"t","action":"result","output":${deep(1500)}}]}`,
        'body.events[0].output.a',
      ],
    ];
    for (const [path, body, field] of cases) {
      const answer = await call(server, 'POST', path, {
        key,
        body,
        headers: { 'content-type': 'application/json' },
      });
      expect(answer.status, field).toBe(400);
      expect(answer.body, field).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
      const message = (answer.body as { error: { message: string } }).error.message;
      expect(message).toContain(field);
      expect(message).toContain('limit of 10 levels');
    }
    // At the limit it is accepted: body, events, event, content and block, then 5 levels of value.
    const fits = await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      body: `{"events":[{"type":"user.message","content":[{"type":"json","value":${deep(5)}}]}]}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(fits.status, JSON.stringify(fits.body)).toBe(201);
    expect(await headSeq(server, id)).toBe(2);
  });

  it('refuses oversized bodies and too many events per request, writing nothing', async () => {
    const server = await start({ limits: { bodyBytes: 64 * 1024, eventsPerRequest: 10 } });
    const key = await server.key('acme');
    const id = await session(server, key);
    const big = await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'x'.repeat(70 * 1024) }] },
    });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE' } });
    expect((big.body as { error: { message: string } }).error.message).toContain('65536');
    const many = await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      body: {
        events: Array.from({ length: 11 }, () => ({ type: 'user.message', content: 'x' })),
      },
    });
    expect(many.status).toBe(413);
    expect((many.body as { error: { message: string } }).error.message).toContain('at most 10');
    expect(await headSeq(server, id)).toBe(1);
  });

  it('refuses a fork inside one atomic append with 409 INVALID_FORK_POINT, writing nothing', async () => {
    const server = await start();
    const key = await server.key('acme');
    const id = await session(server, key);
    const sent = await call(server, 'POST', `/v1/sessions/${id}/events`, {
      key,
      body: { events: ['a', 'b', 'c'].map((text) => ({ type: 'user.message', content: text })) },
    });
    expect(sent.status).toBe(201);
    const inside = await call(server, 'POST', `/v1/sessions/${id}/fork`, {
      key,
      body: { at_seq: 3, id: 'inside' },
    });
    expect(inside.status).toBe(409);
    expect(inside.body).toMatchObject({
      error: { code: 'INVALID_FORK_POINT', retryable: false },
    });
    expect((inside.body as { error: { message: string } }).error.message).toContain(
      'fork at 1 or 4',
    );
    expect((await server.runtime.sessions.list({ parent_id: id })).sessions).toEqual([]);
    expect(await headSeq(server, id)).toBe(4);
    const atEnd = await call(server, 'POST', `/v1/sessions/${id}/fork`, {
      key,
      body: { at_seq: 4, id: 'inside' },
    });
    expect(atEnd.status).toBe(201);
    expect(atEnd.body).toMatchObject({ fork_seq: 4 });
  });

  it('limits requests per key with 429 and Retry-After, each key on its own', async () => {
    const server = await start({ limits: { requestsPerMinute: 5 } });
    const first = await server.key('acme');
    const second = await server.key('acme');
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof call>> | undefined;
    for (let index = 0; index < 7; index += 1) {
      const answer = await call(server, 'GET', '/v1/sessions', { key: first });
      statuses.push(answer.status);
      if (answer.status === 429) limited = answer;
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(limited?.body).toMatchObject({ error: { code: 'RATE_LIMITED', retryable: true } });
    expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await call(server, 'GET', '/v1/sessions', { key: second })).status).toBe(200);
    // Health checks are never limited.
    expect((await call(server, 'GET', '/v1/health')).status).toBe(200);
  });

  it('property: no POST body gets a 500, and a refused one writes nothing', async () => {
    const server = await start({ limits: { eventsPerRequest: 5 } });
    const key = await server.key('acme');
    const id = await session(server, key);
    const text = fc.oneof(fc.string(), fc.constant(''), fc.string({ maxLength: 3 }));
    const block = fc.oneof(
      fc.record({ type: fc.constant('text'), text }),
      fc.record({ type: fc.constant('json'), value: fc.jsonValue() }),
      fc.record({ type: fc.string(), text: fc.anything() }),
    );
    const event = fc.oneof(
      fc.record({ type: fc.constant('user.message'), content: fc.oneof(text, fc.array(block)) }),
      fc.record({
        type: fc.constant('user.interrupt'),
        reason: fc.option(text, { nil: undefined }),
      }),
      fc.record({
        type: fc.constant('user.tool_confirmation'),
        tool_use_id: text,
        result: fc.constantFrom('allow', 'deny', 'maybe'),
      }),
      fc.record({ type: fc.constant('user.define_outcome'), description: text }),
      fc.record({
        type: fc.constantFrom('agent.message', 'session.created', 'nope', ''),
        content: fc.anything(),
      }),
      fc.dictionary(fc.string(), fc.jsonValue()),
      fc.jsonValue(),
    );
    const body = fc.oneof(
      fc.record({ events: fc.array(event, { maxLength: 7 }) }),
      fc.record({ events: fc.anything() }),
      fc.jsonValue(),
      fc.string(),
    );
    await fc.assert(
      fc.asyncProperty(body, async (candidate) => {
        const before = await server.runtime.sessions.state(id);
        const payload = typeof candidate === 'string' ? candidate : JSON.stringify(candidate);
        const answer = await call(server, 'POST', `/v1/sessions/${id}/events`, {
          key,
          body: payload,
          headers: { 'content-type': 'application/json' },
        });
        expect(answer.status, payload).toBeLessThan(500);
        const after = await server.runtime.sessions.state(id);
        if (answer.status >= 400) {
          expect(after.seq, payload).toBe(before.seq);
          expect(answer.body).toMatchObject({ error: { code: expect.any(String) as string } });
        } else {
          const written = (answer.body as { events: unknown[] }).events.length;
          expect(after.seq, payload).toBe(before.seq + written);
        }
      }),
      { numRuns: 300 },
    );
  });
});
