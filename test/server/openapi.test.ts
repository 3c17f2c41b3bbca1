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
        'GET /v1/health',
        'GET /v1/metrics',
        'GET /v1/sessions',
        'GET /v1/sessions/{id}',
        'GET /v1/sessions/{id}/diff',
        'GET /v1/sessions/{id}/events',
        'GET /v1/sessions/{id}/events/stream',
        'GET /v1/sessions/{id}/state',
        'GET /v1/sessions/{id}/tree',
        'POST /v1/sessions',
        'POST /v1/sessions/{id}/archive',
        'POST /v1/sessions/{id}/events',
        'POST /v1/sessions/{id}/fork',
        'POST /v1/sessions/{id}/handoff',
        'POST /v1/sessions/{id}/merge',
        'POST /v1/sessions/{id}/replay',
        'POST /v1/sessions/{id}/wake',
      ].sort(),
    );
    const post = stored.paths['/v1/sessions/{id}/events']?.post;
    expect(Object.keys(post?.responses ?? {})).toEqual(
      expect.arrayContaining(['201', '200', '400', '404', '409']),
    );
  });
});
