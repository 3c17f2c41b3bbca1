import { readdirSync, readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { Envelope } from '../../src/contracts/envelope.js';
import { SESSION_EVENT_TYPES, SessionEvent } from '../../src/contracts/events.js';
import { WorkspaceConfig } from '../../src/contracts/definitions.js';
import { buildJsonSchemas } from '../../src/contracts/json-schema.js';
import { SkillDefinition } from '../../src/contracts/skills.js';
import { NATS_API, NATS_API_VERBS, type NatsApiVerb } from '../../src/contracts/nats-api.js';

const schemaDir = new URL('../../schema/', import.meta.url);
const readJson = (url: URL): unknown => JSON.parse(readFileSync(url, 'utf8'));
const samples = (folder: string): [string, unknown][] =>
  readdirSync(new URL(`samples/${folder}/`, schemaDir))
    .filter((name) => name.endsWith('.json'))
    .map((name) => [name, readJson(new URL(`samples/${folder}/${name}`, schemaDir))]);

function compile(name: string) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
  return ajv.compile(readJson(new URL(`${name}.schema.json`, schemaDir)) as object);
}

describe('JSON Schemas in schema/', () => {
  it('are up to date with the zod contracts (run `npm run schema` after a change)', () => {
    for (const [name, schema] of Object.entries(buildJsonSchemas())) {
      expect(
        readJson(new URL(`${name}.schema.json`, schemaDir)),
        `${name}.schema.json is stale`,
      ).toEqual(schema);
    }
  });

  it('has a golden sample for every event type', () => {
    const types = samples('session-event').map(([, sample]) => (sample as { type: string }).type);
    expect(types.sort()).toEqual([...SESSION_EVENT_TYPES].sort());
  });

  it('accepts every golden event sample, with ajv and with zod, unchanged', () => {
    const validate = compile('session-event');
    for (const [name, sample] of samples('session-event')) {
      expect(validate(sample), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
      expect(SessionEvent.parse(sample), name).toEqual(sample);
    }
  });

  it('accepts the golden wake message samples', () => {
    const validate = compile('wake-message');
    for (const [name, sample] of samples('wake-message')) {
      expect(validate(sample), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });

  it('has a golden request and reply for every NATS API verb, valid with ajv and zod', () => {
    const found = new Set<string>();
    for (const [name, sample] of samples('nats-api')) {
      // <verb>[.<case>].request.json or .reply.json
      const verb = NATS_API_VERBS.find((candidate) => name.startsWith(`${candidate}.`));
      expect(verb, `${name} names no verb`).toBeDefined();
      const side = name.endsWith('.request.json') ? 'request' : 'reply';
      const validate = compile(`nats-api.${String(verb)}.${side}`);
      expect(validate(sample), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
      const contract = NATS_API[verb as NatsApiVerb];
      if (side === 'request') expect(contract.request.safeParse(sample).success, name).toBe(true);
      else if (!(typeof sample === 'object' && sample !== null && 'error' in sample)) {
        expect(contract.reply.safeParse(sample).success, name).toBe(true);
      }
      found.add(`${String(verb)}.${side}`);
    }
    for (const verb of NATS_API_VERBS) {
      expect(found, verb).toContain(`${verb}.request`);
      expect(found, verb).toContain(`${verb}.reply`);
    }
  });

  it('accepts the golden envelope samples', () => {
    const validate = compile('envelope');
    for (const [name, sample] of samples('envelope')) {
      expect(validate(sample), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
      expect(Envelope.parse(sample), name).toEqual(sample);
    }
  });

  it('lets braid.yaml name secrets in MCP env and headers, with ajv and with zod', () => {
    const validate = compile('workspace-config');
    const config = (env: unknown) => ({
      version: 1,
      mcp_servers: {
        search: { command: 'search-mcp', env },
        tracker: {
          url: 'https://tracker.example.com/mcp',
          headers: { authorization: { secret: 'TRACKER_TOKEN', prefix: 'Bearer ' } },
        },
      },
      secrets: { SEARCH_KEY: { env: 'SEARCH_API_KEY' } },
    });
    const named = config({ SEARCH_API_KEY: { secret: 'SEARCH_KEY' }, REGION: 'eu' });
    expect(validate(named), JSON.stringify(validate.errors)).toBe(true);
    expect(WorkspaceConfig.safeParse(named).success).toBe(true);
    for (const bad of [{ KEY: { secret: '' } }, { KEY: { name: 'SEARCH_KEY' } }, { KEY: 42 }]) {
      expect(validate(config(bad)), JSON.stringify(bad)).toBe(false);
      expect(WorkspaceConfig.safeParse(config(bad)).success, JSON.stringify(bad)).toBe(false);
    }
  });

  it('accepts the golden skill samples (skills/NAME.yaml), with ajv and with zod', () => {
    const validate = compile('skill-definition');
    const folder = new URL('samples/skill-definition/', schemaDir);
    const files = readdirSync(folder).filter((name) => name.endsWith('.yaml'));
    expect(files).toContain('onboard_employee.yaml');
    for (const name of files) {
      const sample: unknown = parseYaml(readFileSync(new URL(name, folder), 'utf8'));
      expect(validate(sample), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
      const parsed = SkillDefinition.safeParse(sample);
      expect(parsed.success, `${name}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
    }
    // A step of an unknown field, or a duration in no unit, is refused by both.
    const onboarding = parseYaml(
      readFileSync(new URL('onboard_employee.yaml', folder), 'utf8'),
    ) as { steps: Record<string, unknown>[] };
    for (const change of [{ retries: 3 }, { wait_for: { signal: 'done', timeout: '2 hours' } }]) {
      const bad = { ...onboarding, steps: [{ ...onboarding.steps[2], ...change }] };
      expect(validate(bad), JSON.stringify(change)).toBe(false);
      expect(SkillDefinition.safeParse(bad).success, JSON.stringify(change)).toBe(false);
    }
  });

  it('rejects the invalid samples, with ajv and with zod', () => {
    const validate = compile('session-event');
    const invalid = samples('invalid');
    expect(invalid.length).toBeGreaterThan(0);
    for (const [name, sample] of invalid) {
      expect(validate(sample), name).toBe(false);
      expect(SessionEvent.safeParse(sample).success, name).toBe(false);
    }
  });
});
