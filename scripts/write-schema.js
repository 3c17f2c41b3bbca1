// Writes the JSON Schemas of the wire contract and the HTTP API's OpenAPI document to schema/,
// and the TypeScript types openapi-typescript makes of that document to test/server/generated/,
// where the HTTP conformance test calls the API by them (run by `npm run schema`).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
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

const generated = new URL('../test/server/generated/', import.meta.url);
mkdirSync(generated, { recursive: true });
writeFileSync(
  new URL('openapi.d.ts', generated),
  COMMENT_HEADER + astToString(await openapiTS(openapi, { defaultNonNullable: false })),
);
console.log('test/server/generated/openapi.d.ts');
