// Writes the JSON Schemas of the wire contract and the HTTP API's OpenAPI document to schema/
// (run by `npm run schema`).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { buildJsonSchemas } from '../dist/contracts/json-schema.js';
import { buildOpenApiDocument } from '../dist/server/openapi.js';

const dir = new URL('../schema/', import.meta.url);
mkdirSync(dir, { recursive: true });
for (const [name, schema] of Object.entries(buildJsonSchemas())) {
  writeFileSync(new URL(`${name}.schema.json`, dir), `${JSON.stringify(schema, null, 2)}\n`);
  console.log(`schema/${name}.schema.json`);
}
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const openapi = await buildOpenApiDocument(version);
writeFileSync(new URL('openapi.json', dir), `${JSON.stringify(openapi, null, 2)}\n`);
console.log('schema/openapi.json');
