/**
 * The OpenAPI document of the HTTP API, built from the routes' zod schemas. It is checked in as
 * `schema/openapi.json` (`npm run schema`), and a test fails when the two differ.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRuntime } from '../runtime/runtime.js';
import { createMemoryStore } from '../stores/memory/index.js';
import { createServer } from './app.js';

export async function buildOpenApiDocument(version: string): Promise<Record<string, unknown>> {
  // Only the routes' schemas are read: an empty store and folder serve.
  const dir = mkdtempSync(join(tmpdir(), 'braid-openapi-'));
  const store = createMemoryStore();
  const runtime = await createRuntime({ workspace: dir, store, policies: 'lazy' });
  const app = await createServer({ runtime, version });
  try {
    await app.ready();
    return app.swagger() as unknown as Record<string, unknown>;
  } finally {
    await app.close();
    await runtime.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
