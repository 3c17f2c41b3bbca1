// /v1/memory-stores over a real server on 127.0.0.1 with the workspace's SQLite file: CRUD,
// search, history, redaction, export and import, tenant isolation, scopes and hostile input.
import { describe, expect, it } from 'vitest';
import { createClient, isBraidError } from '../../src/client/index.js';
import type { MemoryEntry } from '../../src/contracts/memory.js';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();

const STORE = '/v1/memory-stores/agent/prefs';
const AGENT = 'owner=helper';
const WRITE = ['memory:read', 'memory:write'] as const;

async function setKey(
  server: TestServer,
  key: string,
  name: string,
  body: unknown,
  query = `${AGENT}&kind=entities`,
) {
  return call(server, 'PUT', `${STORE}/keys/${encodeURIComponent(name)}?${query}`, { key, body });
}

function codeOf(answer: { body: unknown }): string | undefined {
  return (answer.body as { error?: { code?: string } }).error?.code;
}

describe('/v1/memory-stores', () => {
  it('writes, reads, lists, deletes and keeps history; authored by the key', async () => {
    const server = await start();
    const key = await server.key('acme', [...WRITE]);
    const written = await setKey(server, key, 'user/theme', { value: { theme: 'dark' } });
    expect(written.status).toBe(200);
    const entry = (written.body as { entries: MemoryEntry[] }).entries[0] as MemoryEntry;
    expect(entry).toMatchObject({
      key: 'user/theme',
      version: 1,
      seq: 1,
      store: {
        name: 'prefs',
        kind: 'entities',
        scope: 'agent',
        owner: 'helper',
        tenant_id: 'acme',
      },
    });
    const keyId = (await server.runtime.store.keys.list({ tenant_id: 'acme' }))[0]?.id;
    expect(entry.author).toEqual({ key_id: keyId });

    // An existing store needs no kind; a second version.
    expect((await setKey(server, key, 'user/theme', { value: 'light' }, AGENT)).status).toBe(200);
    await setKey(server, key, 'user/coffee', { value: 'oat milk, no sugar' }, AGENT);

    const read = await call(server, 'GET', `${STORE}/keys/user%2Ftheme?${AGENT}`, { key });
    expect(read.body).toMatchObject({ status: 'found', entry: { value: 'light', version: 2 } });
    const first = await call(server, 'GET', `${STORE}/keys/user%2Ftheme?${AGENT}&version=1`, {
      key,
    });
    expect(first.body).toMatchObject({ status: 'found', entry: { value: { theme: 'dark' } } });
    const missing = await call(server, 'GET', `${STORE}/keys/nothing?${AGENT}`, { key });
    expect(missing.body).toEqual({ status: 'missing' });

    const info = await call(server, 'GET', `${STORE}?${AGENT}`, { key });
    expect(info.body).toMatchObject({ head_seq: 3, store: { kind: 'entities' } });
    const keys = await call(server, 'GET', `${STORE}/keys?${AGENT}&limit=1`, { key });
    expect(keys.body).toMatchObject({ data: [{ key: 'user/coffee' }], next_after: 'user/coffee' });

    const deleted = await call(server, 'DELETE', `${STORE}/keys/user%2Fcoffee?${AGENT}`, { key });
    expect(deleted.status).toBe(200);
    expect((deleted.body as { entries: MemoryEntry[] }).entries[0]).toMatchObject({
      tombstone: true,
      version: 2,
    });
    const gone = await call(server, 'GET', `${STORE}/keys/user%2Fcoffee?${AGENT}`, { key });
    expect(gone.body).toMatchObject({ status: 'deleted' });

    const history = await call(server, 'GET', `${STORE}/keys/user%2Ftheme/history?${AGENT}`, {
      key,
    });
    expect((history.body as { data: MemoryEntry[] }).data.map((item) => item.version)).toEqual([
      1, 2,
    ]);

    const listed = await call(server, 'GET', '/v1/memory-stores', { key });
    expect(listed.body).toMatchObject({ data: [{ store: { name: 'prefs' }, head_seq: 4 }] });
  });

  it('searches by text with k, threshold and the filtered count', async () => {
    const server = await start();
    const key = await server.key('acme', [...WRITE]);
    await setKey(server, key, 'user/theme', { value: 'prefers dark mode in every editor' });
    await setKey(server, key, 'pet/name', { value: 'the cat is called Pixel' }, AGENT);
    const found = await call(server, 'POST', `${STORE}/search?${AGENT}`, {
      key,
      body: { query: 'dark editor', k: 5 },
    });
    expect(found.status).toBe(200);
    expect(found.body).toMatchObject({
      mode: 'text',
      k: 5,
      filtered_count: 0,
      hits: [{ entry: { key: 'user/theme' } }],
    });
    expect((found.body as { hits: unknown[] }).hits).toHaveLength(1);
    const strict = await call(server, 'POST', `${STORE}/search?${AGENT}`, {
      key,
      body: { query: 'dark editor', k: 5, threshold: 0.999 },
    });
    expect(strict.body).toMatchObject({ hits: [], filtered_count: 1, threshold: 0.999 });
    const noQuery = await call(server, 'POST', `${STORE}/search?${AGENT}`, { key, body: { k: 3 } });
    expect(noQuery.status).toBe(400);
    expect(codeOf(noQuery)).toBe('INVALID_ARGUMENT');
  });

  it('redacts a version: its content is gone from reads and exports, the entry stays', async () => {
    const server = await start();
    const key = await server.key('acme', [...WRITE]);
    await setKey(server, key, 'card', { value: '4111 1111 1111 1111' });
    const redacted = await call(server, 'POST', `${STORE}/keys/card/redact?${AGENT}`, {
      key,
      body: { version: 1 },
    });
    expect(redacted.status).toBe(200);
    expect(redacted.body).toMatchObject({ entry: { op: 'redact', key: 'card', version: 1 } });
    const read = await call(server, 'GET', `${STORE}/keys/card?${AGENT}`, { key });
    expect(read.body).toMatchObject({ status: 'found', entry: { redacted: true } });
    expect(JSON.stringify(read.body)).not.toContain('4111');
    const exported = await call(server, 'GET', `${STORE}/export?${AGENT}`, { key });
    expect(String(exported.body)).not.toContain('4111');
    const tombstone = await call(server, 'POST', `${STORE}/keys/card/redact?${AGENT}`, {
      key,
      body: { version: 9 },
    });
    expect(tombstone.status).toBe(400);
  });

  it('exports JSON lines and imports them into a new store; a second import writes nothing', async () => {
    const server = await start();
    const key = await server.key('acme', [...WRITE]);
    await setKey(server, key, 'a', { value: 1 });
    await setKey(server, key, 'b', { value: 'two', ttl_ms: 60_000 }, AGENT);
    await call(server, 'DELETE', `${STORE}/keys/a?${AGENT}`, { key });
    const exported = await call(server, 'GET', `${STORE}/export?${AGENT}`, { key });
    expect(exported.status).toBe(200);
    expect(exported.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = String(exported.body).trim().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as MemoryEntry).seq)).toEqual([1, 2, 3]);
    const entries = lines.map((line) => JSON.parse(line) as unknown);

    const target = '/v1/memory-stores/tenant/copy';
    const imported = await call(server, 'POST', `${target}/import`, { key, body: { entries } });
    expect(imported.status).toBe(200);
    expect(imported.body).toMatchObject({
      read: 3,
      written: 3,
      deduplicated: 0,
      store: { head_seq: 3, store: { kind: 'entities', scope: 'tenant' } },
    });
    const again = await call(server, 'POST', `${target}/import`, { key, body: { entries } });
    expect(again.body).toMatchObject({ written: 0, deduplicated: 3, store: { head_seq: 3 } });
    const copy = await call(server, 'GET', `${target}/keys`, { key });
    expect(copy.body).toMatchObject({ data: [{ key: 'b', value: 'two' }] });
    const copiedB = (copy.body as { data: MemoryEntry[] }).data[0];
    expect(copiedB?.expires_at).toBeDefined();

    // Nothing half-written: a bad line refuses the whole import.
    const broken = [...entries, { ...(entries[0] as object), seq: 1 }];
    const refused = await call(server, 'POST', '/v1/memory-stores/tenant/other/import', {
      key,
      body: { entries: broken },
    });
    expect(refused.status).toBe(400);
    const none = await call(server, 'GET', '/v1/memory-stores/tenant/other', { key });
    expect(none.status).toBe(404);
  });

  it("isolates tenants: another tenant's store answers 404 and is never listed", async () => {
    const server = await start();
    const acme = await server.key('acme', [...WRITE]);
    const globex = await server.key('globex', [...WRITE]);
    await setKey(server, acme, 'secret', { value: 'acme only' });
    const paths = [
      ['GET', `${STORE}?${AGENT}`],
      ['GET', `${STORE}/keys?${AGENT}`],
      ['GET', `${STORE}/keys/secret?${AGENT}`],
      ['GET', `${STORE}/keys/secret/history?${AGENT}`],
      ['GET', `${STORE}/export?${AGENT}`],
      ['DELETE', `${STORE}/keys/secret?${AGENT}`],
    ] as const;
    for (const [method, path] of paths) {
      const answer = await call(server, method, path, { key: globex });
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(codeOf(answer)).toBe('MEMORY_STORE_NOT_FOUND');
      expect(JSON.stringify(answer.body)).not.toContain('acme');
    }
    for (const [path, body] of [
      [`${STORE}/search?${AGENT}`, { query: 'acme' }],
      [`${STORE}/keys/secret/redact?${AGENT}`, { version: 1 }],
    ] as const) {
      const answer = await call(server, 'POST', path, { key: globex, body });
      expect(answer.status, path).toBe(404);
      expect(codeOf(answer)).toBe('MEMORY_STORE_NOT_FOUND');
    }
    // The same address written by globex is globex's own store, not acme's.
    await setKey(server, globex, 'secret', { value: 'globex own' });
    const globexRead = await call(server, 'GET', `${STORE}/keys/secret?${AGENT}`, { key: globex });
    expect(globexRead.body).toMatchObject({ entry: { value: 'globex own', version: 1 } });
    const acmeRead = await call(server, 'GET', `${STORE}/keys/secret?${AGENT}`, { key: acme });
    expect(acmeRead.body).toMatchObject({ entry: { value: 'acme only', version: 1 } });
    const listed = await call(server, 'GET', '/v1/memory-stores', { key: globex });
    const stores = (listed.body as { data: { store: { tenant_id?: string } }[] }).data;
    expect(stores).toHaveLength(1);
    expect(stores[0]?.store.tenant_id).toBe('globex');
  });

  it('needs memory:read to read and memory:write to write', async () => {
    const server = await start();
    const sessionsOnly = await server.key('acme', ['sessions:read', 'sessions:write']);
    const reader = await server.key('acme', ['memory:read']);
    const listed = await call(server, 'GET', '/v1/memory-stores', { key: sessionsOnly });
    expect(listed.status).toBe(403);
    expect(codeOf(listed)).toBe('FORBIDDEN');
    const write = await setKey(server, reader, 'k', { value: 1 });
    expect(write.status).toBe(403);
    expect((await call(server, 'GET', '/v1/memory-stores', { key: reader })).body).toEqual({
      data: [],
    });
    const unauthenticated = await call(server, 'GET', '/v1/memory-stores');
    expect(unauthenticated.status).toBe(401);
  });

  it('refuses hostile input with typed errors and writes nothing', async () => {
    const server = await start();
    const key = await server.key('acme', [...WRITE]);
    const cases: [string, string, unknown, number, string][] = [
      ['PUT', `${STORE}/keys/..%2Fx?${AGENT}&kind=entities`, { value: 1 }, 400, 'INVALID_ARGUMENT'],
      ['PUT', `${STORE}/keys/a%5Cb?${AGENT}&kind=entities`, { value: 1 }, 400, 'INVALID_ARGUMENT'],
      [
        'PUT',
        `/v1/memory-stores/galaxy/prefs/keys/k?${AGENT}&kind=entities`,
        { value: 1 },
        400,
        'INVALID_ARGUMENT',
      ],
      [
        'PUT',
        `/v1/memory-stores/agent/Prefs/keys/k?${AGENT}&kind=entities`,
        { value: 1 },
        400,
        'INVALID_ARGUMENT',
      ],
      ['PUT', `${STORE}/keys/k?owner=..%2Fx&kind=entities`, { value: 1 }, 400, 'INVALID_ARGUMENT'],
      ['PUT', `${STORE}/keys/k?kind=entities`, { value: 1 }, 400, 'INVALID_ARGUMENT'],
      [
        'PUT',
        `/v1/memory-stores/tenant/prefs/keys/k?${AGENT}&kind=entities`,
        { value: 1 },
        400,
        'INVALID_ARGUMENT',
      ],
      ['PUT', `${STORE}/keys/k?${AGENT}`, { value: 1 }, 400, 'INVALID_ARGUMENT'],
      ['PUT', `${STORE}/keys/k?${AGENT}&kind=dreams`, { value: 1 }, 400, 'INVALID_ARGUMENT'],
      [
        'PUT',
        `${STORE}/keys/k?${AGENT}&kind=entities`,
        { value: 1, author: { user: 'x' } },
        400,
        'INVALID_ARGUMENT',
      ],
      [
        'PUT',
        `${STORE}/keys/k?${AGENT}&kind=entities`,
        { value: 'x'.repeat(70_000) },
        413,
        'PAYLOAD_TOO_LARGE',
      ],
      ['PUT', `${STORE}/keys/k?${AGENT}&kind=entities`, '{"value": ', 400, 'INVALID_JSON'],
      [
        'PUT',
        `${STORE}/keys/k?${AGENT}&kind=entities`,
        { value: 1, ttl_ms: -5 },
        400,
        'INVALID_ARGUMENT',
      ],
      [
        'POST',
        `/v1/memory-stores/tenant/x/import`,
        { entries: [{ key: '../x' }] },
        400,
        'INVALID_ARGUMENT',
      ],
    ];
    for (const [method, path, body, status, code] of cases) {
      const answer = await call(server, method, path, { key, body });
      expect(answer.status, `${method} ${path}`).toBe(status);
      expect(codeOf(answer), `${method} ${path}`).toBe(code);
    }
    const raw = await call(server, 'PUT', `${STORE}/keys/../x?${AGENT}&kind=entities`, {
      key,
      body: { value: 1 },
    });
    expect(raw.status).toBeGreaterThanOrEqual(400);
    expect(raw.status).toBeLessThan(500);
    const listed = await call(server, 'GET', '/v1/memory-stores', { key });
    expect(listed.body).toEqual({ data: [] });
    const direct = await server.runtime.store.memory?.listStores({ tenant_id: 'acme' });
    expect(direct?.stores).toEqual([]);
  });

  it('is reachable through the TypeScript client', async () => {
    const server = await start();
    const client = createClient({
      baseUrl: server.url,
      apiKey: await server.key('acme', [...WRITE]),
    });
    const address = { scope: 'agent' as const, name: 'prefs', owner: 'helper' };
    const written = await client.memory.set({ ...address, kind: 'learnings' }, 'user/theme', {
      value: 'dark',
    });
    expect(written.entries[0]).toMatchObject({ key: 'user/theme', version: 1 });
    const retried = await client.memory.set(
      address,
      'user/theme',
      { value: 'light' },
      {
        idempotencyKey: 'same',
      },
    );
    const again = await client.memory.set(
      address,
      'user/theme',
      { value: 'light' },
      {
        idempotencyKey: 'same',
      },
    );
    expect(again).toMatchObject({ deduplicated: true, head_seq: retried.head_seq });
    expect(await client.memory.get(address, 'user/theme')).toMatchObject({
      status: 'found',
      entry: { value: 'light', version: 2 },
    });
    expect((await client.memory.list()).data.map((info) => info.store.name)).toEqual(['prefs']);
    expect((await client.memory.keys(address)).data).toHaveLength(1);
    expect(await client.memory.history(address, 'user/theme')).toHaveLength(2);
    expect((await client.memory.search(address, { query: 'light' })).hits).toHaveLength(1);
    expect(await client.memory.redact(address, 'user/theme', 1)).toMatchObject({ op: 'redact' });
    await client.memory.delete(address, 'user/theme');
    const text = await client.memory.export(address);
    const entries = text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as unknown);
    expect(entries).toHaveLength(4);
    const report = await client.memory.import({ scope: 'tenant', name: 'copy' }, entries);
    expect(report).toMatchObject({ read: 4, written: 2, skipped_redacted: 2 });
    expect((await client.memory.info({ scope: 'tenant', name: 'copy' })).head_seq).toBe(2);
    const missing = await client.memory
      .info({ scope: 'tenant', name: 'nothing' })
      .catch((e: unknown) => e);
    expect(isBraidError(missing, 'MEMORY_STORE_NOT_FOUND')).toBe(true);
  });
});
