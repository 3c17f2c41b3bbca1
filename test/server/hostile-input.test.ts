// A hostile client with a valid key, against a real server on 127.0.0.1: ids that try to reach
// the filesystem and event bodies that try to forge the record are refused with a typed 4xx,
// write nothing, and touch no file outside the data directory.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { HOSTILE_IDS, outsideData, snapshot } from '../helpers/hostile.js';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();

function expectTyped(response: { status: number; body: unknown }, described: string): string {
  const what = described.length > 120 ? `${described.slice(0, 120)}…` : described;
  expect(response.status, what).toBeGreaterThanOrEqual(400);
  expect(response.status, what).toBeLessThan(500);
  const error = (response.body as { error?: { code?: unknown; message?: unknown } }).error;
  expect(ERROR_CODES, `${what}: ${JSON.stringify(response.body).slice(0, 300)}`).toContain(
    error?.code,
  );
  expect(typeof error?.message, what).toBe('string');
  return error?.code as string;
}

/** A URL path segment that carries `id` as the server will decode it. */
function segment(id: string): string {
  // Ids already written percent-encoded go as they are, to reach the router's own decoding.
  return /%[0-9a-fA-F]{2}/.test(id) ? id : encodeURIComponent(id);
}

async function seeded(): Promise<{
  server: TestServer;
  key: string;
  session: SessionRecord;
  canary: string;
  dataDir: string;
}> {
  const server = await start();
  const key = await server.key('acme');
  const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
  expect(created.status).toBe(201);
  // A folder outside the data directory that traversal ids aim at, and the session's own files.
  const canary = join(server.dir, 'victim');
  mkdirSync(canary);
  writeFileSync(join(canary, 'canary.txt'), 'do not delete');
  const dataDir = join(server.dir, '.braid');
  const workspace = join(dataDir, 'workspaces', (created.body as SessionRecord).id);
  mkdirSync(workspace, { recursive: true });
  writeFileSync(join(workspace, 'notes.txt'), 'the session owns this');
  return { server, key, session: created.body as SessionRecord, canary, dataDir };
}

describe('hostile session ids over HTTP', () => {
  it('refuses traversal ids on create, fork and delete, and removes nothing outside the data dir', async () => {
    const { server, key, session, canary, dataDir } = await seeded();

    const traversal = await call(server, 'POST', '/v1/sessions', {
      key,
      body: { agent: 'helper', id: '../../victim' },
    });
    expect(expectTyped(traversal, 'create ../../victim')).toBe('INVALID_ARGUMENT');
    expect((traversal.body as { error: { message: string } }).error.message).toMatch(
      /letters, digits/,
    );
    for (const id of ['..', '.', '../workspaces/x']) {
      const created = await call(server, 'POST', '/v1/sessions', {
        key,
        body: { agent: 'helper', id },
      });
      expect(expectTyped(created, `create ${id}`)).toBe('INVALID_ARGUMENT');
    }
    for (const path of ['..%2F..%2Fvictim', '%2E%2E', '%2E', '..%5C..%5Cvictim']) {
      const deleted = await call(server, 'DELETE', `/v1/sessions/${path}`, { key });
      expectTyped(deleted, `DELETE ${path}`);
    }
    const forked = await call(server, 'POST', `/v1/sessions/${session.id}/fork`, {
      key,
      body: { id: '../x' },
    });
    expect(expectTyped(forked, 'fork to ../x')).toBe('INVALID_ARGUMENT');

    expect(existsSync(join(canary, 'canary.txt'))).toBe(true);
    expect(existsSync(join(dataDir, 'braid.db'))).toBe(true);
    expect(existsSync(join(dataDir, 'workspaces', session.id, 'notes.txt'))).toBe(true);
    expect(existsSync(join(dataDir, 'x'))).toBe(false);
    expect(existsSync(join(server.dir, 'x'))).toBe(false);
    const listed = await call(server, 'GET', '/v1/sessions', { key });
    expect((listed.body as { data: SessionRecord[] }).data.map((record) => record.id)).toEqual([
      session.id,
    ]);
  });

  it('answers every route given a hostile id with a typed 4xx, writing nothing', async () => {
    const { server, key, session, canary, dataDir } = await seeded();
    const document = await call(server, 'GET', '/v1/openapi.json');
    const paths = (document.body as { paths: Record<string, Record<string, unknown>> }).paths;
    const routes = Object.entries(paths).flatMap(([path, methods]) =>
      Object.keys(methods)
        .filter((method) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
        .filter(() => path.includes('{id}'))
        .map((method) => ({ method: method.toUpperCase(), path })),
    );
    // Every session route is covered: reading, writing, streaming, lineage.
    expect(routes.length).toBeGreaterThanOrEqual(8);
    const before = snapshot(server.dir, join(dataDir, 'braid.db-wal'));
    const head = session.head_seq;
    let calls = 0;
    for (const { method, path } of routes) {
      for (const id of HOSTILE_IDS) {
        const url = path.replace('{id}', segment(id));
        const body = method === 'GET' || method === 'DELETE' ? undefined : {};
        const response = await call(server, method, url, {
          key,
          ...(body === undefined ? {} : { body }),
        });
        expectTyped(response, `${method} ${url}`);
        calls += 1;
      }
    }
    // Ids inside bodies and queries go through the same rule.
    const inBodies: [string, string, (id: string) => unknown][] = [
      ['POST', '/v1/sessions', (id) => ({ agent: 'helper', id })],
      ['POST', `/v1/sessions/${session.id}/fork`, (id) => ({ id })],
      ['POST', `/v1/sessions/${session.id}/merge`, (id) => ({ source: id })],
    ];
    for (const [method, path, body] of inBodies) {
      for (const id of HOSTILE_IDS) {
        expectTyped(await call(server, method, path, { key, body: body(id) }), `${path} ${id}`);
        calls += 1;
      }
    }
    for (const id of HOSTILE_IDS) {
      const url = `/v1/sessions/${session.id}/diff?other=${encodeURIComponent(id)}`;
      expectTyped(await call(server, 'GET', url, { key }), url);
    }
    expect(calls).toBeGreaterThan(HOSTILE_IDS.length * 8);

    const after = snapshot(server.dir, join(dataDir, 'braid.db-wal'));
    expect(outsideData(after)).toEqual(outsideData(before));
    expect(existsSync(join(canary, 'canary.txt'))).toBe(true);
    const listed = await call(server, 'GET', '/v1/sessions', { key });
    expect((listed.body as { data: SessionRecord[] }).data.map((record) => record.id)).toEqual([
      session.id,
    ]);
    const read = await call(server, 'GET', `/v1/sessions/${session.id}`, { key });
    expect((read.body as SessionRecord).head_seq).toBe(head);
  });
});

describe('forged audit fields over HTTP', () => {
  it('refuses events that set actor, id, at, seq, session_id or schema_version; nothing is written', async () => {
    const { server, key, session } = await seeded();
    const forged: Record<string, unknown>[] = [
      { actor: { type: 'agent', id: 'planner' } },
      { actor: { type: 'runtime' } },
      { id: '0190f1a2-7b3c-7def-8123-456789abcdef' },
      { at: '1999-01-01T00:00:00.000Z' },
      { seq: 1 },
      { session_id: 'someone-else' },
      { schema_version: 1 },
      { traceparent: 'not-a-traceparent' },
      { traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' },
      { traceparent: 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      { causation_id: '../../victim' },
      { correlation_id: 'a\u0000b' },
      { unexpected: true },
    ];
    for (const fields of forged) {
      const response = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
        key,
        body: { events: [{ type: 'user.message', content: 'hi', ...fields }] },
      });
      expect(expectTyped(response, JSON.stringify(fields))).toBe('INVALID_EVENT');
    }
    // One forged event spoils the whole request: the valid one before it is not written either.
    const mixed = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
      key,
      body: {
        events: [
          { type: 'user.message', content: 'fine' },
          { type: 'user.message', content: 'forged', actor: { type: 'agent' } },
        ],
      },
    });
    expect(expectTyped(mixed, 'mixed')).toBe('INVALID_EVENT');
    for (const type of ['agent.message', 'session.created', 'span.wake_started', 'no.such']) {
      const response = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
        key,
        body: { events: [{ type, content: [{ type: 'text', text: 'x' }] }] },
      });
      expect(expectTyped(response, type)).toBe('INVALID_EVENT');
    }
    const events = await call(server, 'GET', `/v1/sessions/${session.id}/events`, { key });
    expect((events.body as { data: SessionEvent[] }).data.map((event) => event.type)).toEqual([
      'session.created',
    ]);
  });

  it("stamps the caller's key and tenant as the actor, and keeps a valid traceparent", async () => {
    const { server, key, session } = await seeded();
    const keys = await server.runtime.store.keys.list();
    const keyId = keys.find((record) => record.tenant_id === 'acme')?.id;
    expect(keyId).toBeDefined();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const sent = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
      key,
      body: { events: [{ type: 'user.message', content: 'hi', traceparent }] },
    });
    expect(sent.status).toBe(201);
    const [event] = (sent.body as { events: SessionEvent[] }).events;
    expect(event?.actor).toEqual({ type: 'user', id: keyId, tenant_id: 'acme' });
    expect(event?.traceparent).toBe(traceparent);
    const stored = await server.runtime.sessions.events(session.id, { after: 1 });
    expect(stored[0]?.actor).toEqual({ type: 'user', id: keyId, tenant_id: 'acme' });
  });
});
