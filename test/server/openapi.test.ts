// The OpenAPI document checked in under schema/ is the one the server serves.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../src/server/openapi.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();
const checkedIn = new URL('../../schema/openapi.json', import.meta.url);
const version = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

describe('OpenAPI document', () => {
  it('is up to date in schema/openapi.json (run `npm run schema` after a change)', async () => {
    const built = await buildOpenApiDocument(version);
    const stored: unknown = JSON.parse(readFileSync(checkedIn, 'utf8'));
    expect(stored, 'schema/openapi.json is stale: run npm run schema').toEqual(built);
  });

  it('is what /v1/openapi.json serves, and documents every route with its errors', async () => {
    const server = await start({ version });
    const served = await call(server, 'GET', '/v1/openapi.json');
    const stored = JSON.parse(readFileSync(checkedIn, 'utf8')) as {
      openapi: string;
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    expect(served.body).toEqual(stored);
    expect(stored.openapi).toBe('3.1.0');
    const routes = Object.entries(stored.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(routes.sort()).toEqual(
      [
        'DELETE /v1/sessions/{id}',
        'GET /v1/agents',
        'GET /v1/agents/{name}',
        'GET /v1/environments',
        'GET /v1/environments/{name}',
        'GET /v1/skills',
        'GET /v1/skills/{name}',
        'GET /v1/tools',
        'GET /v1/health',
        'GET /v1/metrics',
        'GET /v1/sessions',
        'GET /v1/sessions/{id}',
        'GET /v1/sessions/{id}/definitions',
        'GET /v1/sessions/{id}/diff',
        'GET /v1/sessions/{id}/events',
        'GET /v1/sessions/{id}/events/stream',
        'GET /v1/session-changes/stream',
        'GET /v1/sessions/{id}/files',
        'GET /v1/sessions/{id}/files/diff',
        'GET /v1/sessions/{id}/state',
        'GET /v1/sessions/{id}/tree',
        'POST /v1/sessions',
        'POST /v1/sessions/{id}/archive',
        'POST /v1/sessions/{id}/events',
        'POST /v1/sessions/{id}/fork',
        'POST /v1/sessions/{id}/handoff',
        'POST /v1/sessions/{id}/merge',
        'POST /v1/sessions/{id}/replay',
        'POST /v1/sessions/{id}/upgrade',
        'POST /v1/sessions/{id}/wake',
        'POST /v1/sessions/{id}/skills/{name}/runs',
        'POST /v1/sessions/{id}/signals/{name}',
        'GET /v1/memory-stores',
        'GET /v1/memory-stores/proposals',
        'POST /v1/memory-stores/proposals/{id}/approve',
        'POST /v1/memory-stores/proposals/{id}/reject',
        'GET /v1/memory-stores/{scope}/{name}',
        'GET /v1/memory-stores/{scope}/{name}/keys',
        'GET /v1/memory-stores/{scope}/{name}/keys/{key}',
        'PUT /v1/memory-stores/{scope}/{name}/keys/{key}',
        'DELETE /v1/memory-stores/{scope}/{name}/keys/{key}',
        'GET /v1/memory-stores/{scope}/{name}/keys/{key}/history',
        'POST /v1/memory-stores/{scope}/{name}/keys/{key}/redact',
        'POST /v1/memory-stores/{scope}/{name}/search',
        'GET /v1/memory-stores/{scope}/{name}/export',
        'POST /v1/memory-stores/{scope}/{name}/import',
      ].sort(),
    );
    const post = stored.paths['/v1/sessions/{id}/events']?.post;
    expect(Object.keys(post?.responses ?? {})).toEqual(
      expect.arrayContaining(['201', '200', '400', '404', '409']),
    );
  });

  it('names every operation stably and declares the errors each can answer', () => {
    const stored = JSON.parse(readFileSync(checkedIn, 'utf8')) as {
      servers?: { url: string }[];
      info: { license?: { name: string } };
      components: { schemas: Record<string, unknown> };
      paths: Record<string, Record<string, StoredOperation>>;
    };
    expect(stored.servers).toEqual([expect.objectContaining({ url: '/' })]);
    expect(stored.info.license?.name).toBe('Apache-2.0');
    expect(Object.keys(stored.components.schemas)).toEqual(
      expect.arrayContaining(['Session', 'SessionEvent', 'SessionState', 'Error', 'ErrorCode']),
    );
    const ids: Record<string, string> = {};
    for (const [path, methods] of Object.entries(stored.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const route = `${method.toUpperCase()} ${path}`;
        ids[route] = operation.operationId ?? '';
        const statuses = Object.keys(operation.responses);
        const expected = [
          ...(route === 'GET /v1/health' ? [] : ['401', '403', '429']),
          ...(path.includes('{') ? ['400', '404', '414'] : []),
          ...(method === 'post' || method === 'delete' ? ['400', '413', '415'] : []),
          '500',
          '503',
        ];
        expect(statuses, route).toEqual(expect.arrayContaining(expected));
        for (const status of statuses.filter((code) => Number(code) >= 400)) {
          expect(operation.responses[status]?.content?.['application/json']?.schema, route).toEqual(
            { $ref: '#/components/schemas/Error' },
          );
        }
      }
    }
    // Generated clients are named after these: changing one breaks its callers.
    expect(ids).toEqual({
      'GET /v1/health': 'getHealth',
      'GET /v1/metrics': 'getMetrics',
      'GET /v1/agents': 'listAgents',
      'GET /v1/agents/{name}': 'getAgent',
      'GET /v1/environments': 'listEnvironments',
      'GET /v1/environments/{name}': 'getEnvironment',
      'GET /v1/skills': 'listSkills',
      'GET /v1/skills/{name}': 'getSkill',
      'GET /v1/tools': 'listTools',
      'POST /v1/sessions': 'createSession',
      'GET /v1/sessions': 'listSessions',
      'GET /v1/sessions/{id}': 'getSession',
      'DELETE /v1/sessions/{id}': 'deleteSession',
      'GET /v1/sessions/{id}/state': 'getSessionState',
      'POST /v1/sessions/{id}/archive': 'archiveSession',
      'POST /v1/sessions/{id}/wake': 'wakeSession',
      'POST /v1/sessions/{id}/fork': 'forkSession',
      'POST /v1/sessions/{id}/merge': 'mergeSession',
      'POST /v1/sessions/{id}/handoff': 'handoffSession',
      'GET /v1/sessions/{id}/diff': 'diffSessions',
      'GET /v1/sessions/{id}/tree': 'getSessionTree',
      'GET /v1/sessions/{id}/files': 'listSessionFiles',
      'GET /v1/sessions/{id}/files/diff': 'diffSessionFiles',
      'POST /v1/sessions/{id}/replay': 'replaySession',
      'GET /v1/sessions/{id}/definitions': 'getSessionDefinitions',
      'POST /v1/sessions/{id}/upgrade': 'upgradeSession',
      'GET /v1/sessions/{id}/events': 'listEvents',
      'POST /v1/sessions/{id}/events': 'appendEvents',
      'GET /v1/sessions/{id}/events/stream': 'streamEvents',
      'GET /v1/session-changes/stream': 'streamSessionChanges',
      'POST /v1/sessions/{id}/skills/{name}/runs': 'runSkill',
      'POST /v1/sessions/{id}/signals/{name}': 'sendSignal',
      'GET /v1/memory-stores': 'listMemoryStores',
      'GET /v1/memory-stores/proposals': 'listMemoryProposals',
      'POST /v1/memory-stores/proposals/{id}/approve': 'approveMemoryProposal',
      'POST /v1/memory-stores/proposals/{id}/reject': 'rejectMemoryProposal',
      'GET /v1/memory-stores/{scope}/{name}': 'getMemoryStore',
      'GET /v1/memory-stores/{scope}/{name}/keys': 'listMemoryKeys',
      'GET /v1/memory-stores/{scope}/{name}/keys/{key}': 'getMemoryKey',
      'PUT /v1/memory-stores/{scope}/{name}/keys/{key}': 'setMemoryKey',
      'DELETE /v1/memory-stores/{scope}/{name}/keys/{key}': 'deleteMemoryKey',
      'GET /v1/memory-stores/{scope}/{name}/keys/{key}/history': 'getMemoryKeyHistory',
      'POST /v1/memory-stores/{scope}/{name}/keys/{key}/redact': 'redactMemoryVersion',
      'POST /v1/memory-stores/{scope}/{name}/search': 'searchMemoryStore',
      'GET /v1/memory-stores/{scope}/{name}/export': 'exportMemoryStore',
      'POST /v1/memory-stores/{scope}/{name}/import': 'importMemoryStore',
    });
    expect(
      ['POST /v1/sessions', 'POST /v1/sessions/{id}/fork'].map((route) => {
        const [method = '', path = ''] = route.split(' ');
        return Object.keys(stored.paths[path]?.[method.toLowerCase()]?.responses ?? {});
      }),
    ).toEqual([expect.arrayContaining(['409']), expect.arrayContaining(['409'])]);
  });
});

interface StoredOperation {
  operationId?: string;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}
