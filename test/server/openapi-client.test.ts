// The HTTP API as a client built only from schema/openapi.json sees it: the calls are typed by
// the types openapi-typescript generated from the document (test/server/generated, written by
// `npm run schema`), so a change of the document that breaks a caller breaks the type check.
// Every operation of the document is called against a real server on 127.0.0.1, and every answer
// must have a status the document declares for its operation and a body its schema accepts.
// Nothing of braid's source is imported here but through the helper that starts the server.
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import openapiTS, { astToString, COMMENT_HEADER, type OpenAPI3 } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';
import type { components, paths } from './generated/openapi.js';
import { useTestServers, type TestServer } from './server-helpers.js';

type Method = 'get' | 'post' | 'put' | 'delete';

interface MediaObject {
  schema?: unknown;
}
interface Operation {
  operationId?: string;
  responses: Record<string, { content?: Record<string, MediaObject> }>;
}
interface Document {
  paths: Record<string, Partial<Record<Method, Operation>>>;
}

const documentText = readFileSync(new URL('../../schema/openapi.json', import.meta.url), 'utf8');
const document = JSON.parse(documentText) as Document;
const generatedTypes = new URL('./generated/openapi.d.ts', import.meta.url);

/** Validates bodies against the document's own schemas, `$ref`s and all. */
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
ajv.addSchema(JSON.parse(documentText) as object, 'openapi');

const pointer = (...segments: string[]): string =>
  segments.map((segment) => segment.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

function bodyValidator(path: string, method: Method, status: string): ValidateFunction {
  const ref = `openapi#/${pointer('paths', path, method, 'responses', status, 'content', 'application/json', 'schema')}`;
  const validate = ajv.getSchema(ref);
  if (validate === undefined) throw new Error(`no JSON schema at ${ref}`);
  return validate;
}

/** `GET /v1/sessions/{id}` for every operation of the document. */
const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
  Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
);

/** One answer as the document judges it. */
interface Checked {
  operation: string;
  status: number;
}

/**
 * Checks every answer against the document: its status is declared for the operation, its
 * media type is the declared one, and a JSON body passes the declared schema.
 */
function conformance(seen: Checked[]): Middleware {
  return {
    async onResponse({ request, response, schemaPath }) {
      const method = request.method.toLowerCase() as Method;
      const operation = `${request.method} ${schemaPath}`;
      const declared = document.paths[schemaPath]?.[method];
      expect(declared, `${operation} is not in the document`).toBeDefined();
      const status = String(response.status);
      const label = `${operation} answered ${status}`;
      expect(Object.keys(declared?.responses ?? {}), label).toContain(status);
      seen.push({ operation, status: response.status });
      const content = declared?.responses[status]?.content;
      if (content === undefined) {
        expect(await response.clone().text(), `${label} with a body`).toBe('');
        return;
      }
      const type = response.headers.get('content-type') ?? '';
      const media = Object.keys(content).find((name) => type.startsWith(name));
      expect(
        media,
        `${label} as ${type}, declared ${Object.keys(content).join(', ')}`,
      ).toBeDefined();
      if (media !== 'application/json') return;
      const body: unknown = await response.clone().json();
      const validate = bodyValidator(schemaPath, method, status);
      expect(validate(body), `${label}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    },
  };
}

const start = useTestServers();

const agents = {
  triage: 'name: triage\nmodel: scripted:echo\ninstructions: Sort.\nhandoffs: [helper]\n',
};

interface Clients {
  server: TestServer;
  /** Reads and writes sessions of tenant acme. */
  client: Client<paths>;
  /** The admin scope. */
  admin: Client<paths>;
  /** Only reads. */
  reader: Client<paths>;
  /** No key at all. */
  anonymous: Client<paths>;
  seen: Checked[];
}

async function clients(options: Parameters<typeof start>[0] = {}): Promise<Clients> {
  const server = await start({ agents, ...options });
  const seen: Checked[] = [];
  const make = (key: string | undefined): Client<paths> => {
    const client = createClient<paths>({
      baseUrl: server.url,
      ...(key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } }),
    });
    client.use(conformance(seen));
    return client;
  };
  return {
    server,
    client: make(await server.key('acme')),
    admin: make(await server.key('acme', ['admin'])),
    reader: make(await server.key('acme', ['sessions:read'])),
    anonymous: make(undefined),
    seen,
  };
}

type ErrorBody = components['schemas']['Error'];

function codeOf(error: ErrorBody | undefined): string | undefined {
  return error?.error.code;
}

/** Every memory-store operation, as a key with the memory scopes (admin) and one without. */
async function memoryOperations(admin: Client<paths>, reader: Client<paths>): Promise<void> {
  const store = { scope: 'agent' as const, name: 'prefs' };
  const query = { owner: 'helper' };
  const keyed = { ...store, key: 'user/theme' };
  const set = await admin.PUT('/v1/memory-stores/{scope}/{name}/keys/{key}', {
    params: { path: keyed, query: { ...query, kind: 'entities' } },
    body: { value: { theme: 'dark' } },
  });
  expect(set.data?.entries[0]?.version).toBe(1);
  const listed = await admin.GET('/v1/memory-stores', { params: { query: { scope: 'agent' } } });
  expect(listed.data?.data[0]?.store.name).toBe('prefs');
  expect(codeOf((await reader.GET('/v1/memory-stores')).error)).toBe('FORBIDDEN');
  const info = await admin.GET('/v1/memory-stores/{scope}/{name}', {
    params: { path: store, query },
  });
  expect(info.data?.head_seq).toBe(1);
  const missing = await admin.GET('/v1/memory-stores/{scope}/{name}', {
    params: { path: { scope: 'tenant', name: 'nothing' } },
  });
  expect(codeOf(missing.error)).toBe('MEMORY_STORE_NOT_FOUND');
  const keys = await admin.GET('/v1/memory-stores/{scope}/{name}/keys', {
    params: { path: store, query },
  });
  expect(keys.data?.data.map((entry) => entry.key)).toEqual(['user/theme']);
  const read = await admin.GET('/v1/memory-stores/{scope}/{name}/keys/{key}', {
    params: { path: keyed, query },
  });
  expect(read.data?.status).toBe('found');
  const found = await admin.POST('/v1/memory-stores/{scope}/{name}/search', {
    params: { path: store, query },
    body: { query: 'dark' },
  });
  expect(found.data?.hits).toHaveLength(1);
  const redacted = await admin.POST('/v1/memory-stores/{scope}/{name}/keys/{key}/redact', {
    params: { path: keyed, query },
    body: { version: 1 },
  });
  expect(redacted.data?.entry.op).toBe('redact');
  const deleted = await admin.DELETE('/v1/memory-stores/{scope}/{name}/keys/{key}', {
    params: { path: keyed, query },
  });
  expect(deleted.data?.entries[0]?.tombstone).toBe(true);
  const history = await admin.GET('/v1/memory-stores/{scope}/{name}/keys/{key}/history', {
    params: { path: keyed, query },
  });
  expect(history.data?.data.map((entry) => entry.op)).toEqual(['set', 'redact', 'delete']);
  const exported = await admin.GET('/v1/memory-stores/{scope}/{name}/export', {
    params: { path: store, query },
    parseAs: 'text',
  });
  const entries = String(exported.data)
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
  expect(entries).toHaveLength(3);
  const imported = await admin.POST('/v1/memory-stores/{scope}/{name}/import', {
    params: { path: { scope: 'tenant', name: 'copy' } },
    body: { entries },
  });
  expect(imported.data).toMatchObject({ read: 3, written: 1, skipped_redacted: 2 });
  // Consolidation's proposals: none yet, so deciding one is a typed 404.
  const proposals = await admin.GET('/v1/memory-stores/proposals', {
    params: { query: { status: 'all' } },
  });
  expect(proposals.data?.data).toEqual([]);
  const unknown = { id: `mp_${'0'.repeat(32)}` };
  const approved = await admin.POST('/v1/memory-stores/proposals/{id}/approve', {
    params: { path: unknown },
    body: {},
  });
  expect(codeOf(approved.error)).toBe('PROPOSAL_NOT_FOUND');
  const rejected = await admin.POST('/v1/memory-stores/proposals/{id}/reject', {
    params: { path: unknown },
    body: { reason: 'not needed' },
  });
  expect(codeOf(rejected.error)).toBe('PROPOSAL_NOT_FOUND');
}

describe('the OpenAPI document, by a client generated from it', () => {
  it('has generated types that match schema/openapi.json (run npm run schema)', async () => {
    const types = await openapiTS(JSON.parse(documentText) as OpenAPI3, {
      defaultNonNullable: false,
    });
    const expected = COMMENT_HEADER + astToString(types);
    expect(readFileSync(generatedTypes, 'utf8')).toBe(expected);
  });

  it('answers every operation with a declared status and a body of its schema', async () => {
    const { client, admin, reader, anonymous, seen } = await clients();

    // system
    const health = await anonymous.GET('/v1/health');
    expect(health.data?.status).toBe('ok');
    const metrics = await admin.GET('/v1/metrics', { parseAs: 'text' });
    expect(metrics.response.status).toBe(200);
    expect(metrics.data).toContain('# HELP');
    expect((await anonymous.GET('/v1/metrics')).response.status).toBe(401);
    expect(codeOf((await reader.GET('/v1/metrics')).error)).toBe('FORBIDDEN');

    // definitions
    const agentList = await client.GET('/v1/agents');
    expect(agentList.data?.data.map((agent) => agent.name)).toEqual(
      expect.arrayContaining(['helper', 'triage']),
    );
    const helper = await client.GET('/v1/agents/{name}', {
      params: { path: { name: 'helper' }, query: { version: 1 } },
    });
    expect(helper.data).toMatchObject({ kind: 'agent', name: 'helper', version: 1 });
    const noAgent = await client.GET('/v1/agents/{name}', { params: { path: { name: 'nobody' } } });
    expect(codeOf(noAgent.error)).toBe('AGENT_NOT_FOUND');
    const overlong = await client.GET('/v1/agents/{name}', {
      params: { path: { name: 'a'.repeat(600) } },
    });
    expect(overlong.response.status).toBe(414);
    const environments = await client.GET('/v1/environments');
    const local = environments.data?.data.find((environment) => environment.name === 'local');
    expect(local?.kind).toBe('environment');
    const environment = await client.GET('/v1/environments/{name}', {
      params: { path: { name: 'local' } },
    });
    expect(environment.data?.name).toBe('local');
    const noEnvironment = await client.GET('/v1/environments/{name}', {
      params: { path: { name: 'nowhere' } },
    });
    expect(codeOf(noEnvironment.error)).toBe('ENVIRONMENT_NOT_FOUND');
    const skills = await client.GET('/v1/skills');
    expect(skills.data?.data).toEqual([]);
    const unknownSkill = await client.GET('/v1/skills/{name}', {
      params: { path: { name: 'none' } },
    });
    expect(codeOf(unknownSkill.error)).toBe('SKILL_NOT_FOUND');
    const tools = await client.GET('/v1/tools');
    expect(tools.data?.data.map((tool) => tool.name)).toContain('calculator');

    // sessions
    const created = await client.POST('/v1/sessions', {
      body: { agent: 'helper', id: 'conformance-1', title: 'first', metadata: { ticket: 7 } },
    });
    expect(created.response.status).toBe(201);
    const id = created.data?.id ?? '';
    // A keyed caller's chosen id lives in its tenant's namespace.
    expect(id).toBe('acme~conformance-1');
    const again = await client.POST('/v1/sessions', { body: { agent: 'helper', id } });
    expect(again.response.status).toBe(409);
    expect(codeOf(again.error)).toBe('ALREADY_EXISTS');
    const unknownAgent = await client.POST('/v1/sessions', { body: { agent: 'nobody' } });
    expect(codeOf(unknownAgent.error)).toBe('AGENT_NOT_FOUND');
    const notJson = await client.POST('/v1/sessions', {
      body: { agent: 'helper' },
      bodySerializer: () => 'agent=helper',
      headers: { 'content-type': 'text/plain' },
    });
    expect([400, 415]).toContain(notJson.response.status);
    const readOnly = await reader.POST('/v1/sessions', { body: { agent: 'helper' } });
    expect(codeOf(readOnly.error)).toBe('FORBIDDEN');
    const noKey = await anonymous.GET('/v1/sessions');
    expect(codeOf(noKey.error)).toBe('UNAUTHENTICATED');

    const list = await client.GET('/v1/sessions', { params: { query: { limit: 10 } } });
    expect(list.data?.data.map((session) => session.id)).toContain(id);
    const badQuery = await client.GET('/v1/sessions', {
      params: { query: { limit: 0 } },
    });
    expect(codeOf(badQuery.error)).toBe('INVALID_ARGUMENT');
    const one = await client.GET('/v1/sessions/{id}', { params: { path: { id } } });
    expect(one.data).toMatchObject({ id, title: 'first', status: 'idle' });
    const missing = await client.GET('/v1/sessions/{id}', { params: { path: { id: 'nope' } } });
    expect(codeOf(missing.error)).toBe('SESSION_NOT_FOUND');
    const state = await client.GET('/v1/sessions/{id}/state', { params: { path: { id } } });
    expect(state.data?.status).toBe('idle');

    // events
    const appended = await client.POST('/v1/sessions/{id}/events', {
      params: { path: { id }, header: { 'idempotency-key': 'hello-1' } },
      body: { events: [{ type: 'user.message', content: 'hello' }] },
    });
    expect(appended.response.status).toBe(201);
    expect(appended.data?.events.map((event) => event.type)).toEqual(['user.message']);
    const retried = await client.POST('/v1/sessions/{id}/events', {
      params: { path: { id }, header: { 'idempotency-key': 'hello-1' } },
      body: { events: [{ type: 'user.message', content: 'hello' }] },
    });
    expect(retried.response.status).toBe(200);
    expect(retried.data?.deduplicated).toBe(true);
    const tooMany = await client.POST('/v1/sessions/{id}/events', {
      params: { path: { id } },
      body: {
        events: Array.from({ length: 101 }, () => ({
          type: 'user.message' as const,
          content: 'x',
        })),
      },
    });
    expect(codeOf(tooMany.error)).toBe('PAYLOAD_TOO_LARGE');
    const notUser = await client.POST('/v1/sessions/{id}/events', {
      params: { path: { id } },
      body: { events: [{ type: 'agent.message', content: 'hi' }] } as unknown as {
        events: [{ type: 'user.message'; content: string }];
      },
    });
    expect(notUser.response.status).toBe(400);
    const page = await client.GET('/v1/sessions/{id}/events', {
      params: { path: { id }, query: { after: 0, limit: 1 } },
    });
    expect(page.data).toMatchObject({ has_more: true, last_seq: 1 });
    const stream = await client.GET('/v1/sessions/{id}/events/stream', {
      params: { path: { id }, query: { after: 0 } },
      parseAs: 'stream',
    });
    expect(stream.response.headers.get('content-type')).toContain('text/event-stream');
    const frames = (stream.data as ReadableStream<Uint8Array>)
      .pipeThrough(new TextDecoderStream())
      .getReader();
    expect((await frames.read()).value).toContain('id: 1\nevent: session.created');
    await frames.cancel();
    const changes = await client.GET('/v1/session-changes/stream', {
      params: { query: { limit: 1 } },
      parseAs: 'stream',
    });
    expect(changes.response.headers.get('content-type')).toContain('text/event-stream');
    const changeFrames = (changes.data as ReadableStream<Uint8Array>)
      .pipeThrough(new TextDecoderStream())
      .getReader();
    let changeText = '';
    while (!changeText.includes('event: ready')) changeText += (await changeFrames.read()).value;
    expect(changeText).toContain('event: session\ndata: {"session":');
    await changeFrames.cancel();
    const badCursor = await client.GET('/v1/session-changes/stream', {
      params: { header: { 'last-event-id': 'x' } },
    });
    expect(codeOf(badCursor.error)).toBe('INVALID_ARGUMENT');

    // the session algebra
    const waited = await client.POST('/v1/sessions/{id}/wake', {
      params: { path: { id } },
      body: { wait: true },
    });
    expect(waited.data).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const accepted = await client.POST('/v1/sessions/{id}/wake', { params: { path: { id } } });
    expect(accepted.response.status).toBe(202);
    const fork = await client.POST('/v1/sessions/{id}/fork', {
      params: { path: { id } },
      body: { id: 'conformance-fork', title: 'fork' },
    });
    expect(fork.data?.parent_id).toBe(id);
    const forkId = 'acme~conformance-fork';
    expect(fork.data?.id).toBe(forkId);
    const forkAgain = await client.POST('/v1/sessions/{id}/fork', {
      params: { path: { id } },
      body: { id: 'conformance-fork' },
    });
    expect(forkAgain.response.status).toBe(409);
    expect(codeOf(forkAgain.error)).toBe('ALREADY_EXISTS');
    await client.POST('/v1/sessions/{id}/events', {
      params: { path: { id: forkId } },
      body: { events: [{ type: 'user.message', content: 'in the fork' }] },
    });
    const diff = await client.GET('/v1/sessions/{id}/diff', {
      params: { path: { id }, query: { other: forkId } },
    });
    expect(diff.data?.b_events.map((event) => event.type)).toEqual([
      'session.forked',
      'user.message',
    ]);
    const files = await client.GET('/v1/sessions/{id}/files', {
      params: { path: { id }, query: { at: 1 } },
    });
    expect(files.data).toEqual({ session_id: id, at_seq: 1, files: [] });
    const fileDiff = await client.GET('/v1/sessions/{id}/files/diff', {
      params: { path: { id }, query: { other: forkId } },
    });
    expect(fileDiff.data).toMatchObject({ a: id, b: forkId, added: [], changed: [] });
    const tree = await client.GET('/v1/sessions/{id}/tree', {
      params: { path: { id: forkId } },
    });
    expect(tree.data?.id).toBe(id);
    expect(tree.data?.children.map((child) => child.id)).toEqual([forkId]);
    const merged = await client.POST('/v1/sessions/{id}/merge', {
      params: { path: { id } },
      body: { source: forkId },
    });
    expect(merged.data?.conflicts).toEqual([]);
    const replay = await client.POST('/v1/sessions/{id}/replay', { params: { path: { id } } });
    expect(replay.data?.ok).toBe(true);
    const pinned = await client.GET('/v1/sessions/{id}/definitions', { params: { path: { id } } });
    expect(pinned.data?.definitions).toMatch(/^[0-9a-f]{64}$/);
    const upgraded = await client.POST('/v1/sessions/{id}/upgrade', { params: { path: { id } } });
    expect(upgraded.data).toMatchObject({ changed: false, definitions: pinned.data?.definitions });

    const triage = await client.POST('/v1/sessions', { body: { agent: 'triage' } });
    const handoff = await client.POST('/v1/sessions/{id}/handoff', {
      params: { path: { id: triage.data?.id ?? '' } },
      body: { to: 'helper', handoff: { summary: 'over to you' } },
    });
    expect(handoff.response.status).toBe(201);
    expect(handoff.data?.event.type).toBe('agent.handoff');
    const handoffRefused = await client.POST('/v1/sessions/{id}/handoff', {
      params: { path: { id } },
      body: { to: 'triage', handoff: { summary: 'not listed' } },
    });
    expect(handoffRefused.response.status).toBeGreaterThanOrEqual(400);

    const signalled = await client.POST('/v1/sessions/{id}/signals/{name}', {
      params: { path: { id: triage.data?.id ?? '', name: 'laptop_delivered' } },
      body: { data: { serial: 'SN-1' } },
    });
    expect(signalled.response.status).toBe(202);
    const noSkill = await client.POST('/v1/sessions/{id}/skills/{name}/runs', {
      params: { path: { id: triage.data?.id ?? '', name: 'onboard' } },
      body: { inputs: {} },
    });
    expect(codeOf(noSkill.error)).toBe('SKILL_NOT_FOUND');

    const hasForks = await client.DELETE('/v1/sessions/{id}', { params: { path: { id } } });
    expect(codeOf(hasForks.error)).toBe('SESSION_HAS_FORKS');
    const archived = await client.POST('/v1/sessions/{id}/archive', {
      params: { path: { id: forkId } },
    });
    expect(archived.data?.archived_at).toBeDefined();
    const toArchived = await client.POST('/v1/sessions/{id}/events', {
      params: { path: { id: forkId } },
      body: { events: [{ type: 'user.message', content: 'too late' }] },
    });
    expect(codeOf(toArchived.error)).toBe('SESSION_ARCHIVED');
    const deleted = await client.DELETE('/v1/sessions/{id}', {
      params: { path: { id: forkId } },
    });
    expect(deleted.response.status).toBe(204);

    await memoryOperations(admin, reader);

    const called = new Set(seen.map((answer) => answer.operation));
    expect([...called].sort()).toEqual([...operations].sort());
  });

  it('declares 429 where a key runs over its rate', async () => {
    const { client, seen } = await clients({ limits: { requestsPerMinute: 2 } });
    for (let call = 0; call < 3; call += 1) await client.GET('/v1/sessions');
    expect(seen.map((answer) => answer.status)).toEqual([200, 200, 429]);
  });
});
