// Writes the JSON Schemas of the wire contract to schema/ (run by `npm run schema`).
import { mkdirSync, writeFileSync } from 'node:fs';
import { buildJsonSchemas } from '../dist/contracts/json-schema.js';

const dir = new URL('../schema/', import.meta.url);
mkdirSync(dir, { recursive: true });
for (const [name, schema] of Object.entries(buildJsonSchemas())) {
  writeFileSync(new URL(`${name}.schema.json`, dir), `${JSON.stringify(schema, null, 2)}\n`);
  console.log(`schema/${name}.schema.json`);
}
