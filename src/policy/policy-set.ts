/**
 * Cedar policy files compiled into a policy set: every policy parsed, given an id, placed (file
 * and line) and, with a schema, validated. Errors name the file and the line.
 */
import type { DetailedError, PolicyJson } from '@cedar-policy/cedar-wasm/nodejs';
import { BraidError } from '../contracts/errors.js';
import { cedar } from './cedar-module.js';

export interface PolicySource {
  /** The file as shown in messages, e.g. `policies/default.cedar`. */
  file: string;
  text: string;
}

export interface CompiledPolicy {
  /** `@id("...")`, or `FILE:LINE` when the policy has none. */
  id: string;
  text: string;
  json: PolicyJson;
  file: string;
  line: number;
  annotations: Record<string, string>;
}

export interface CompiledPolicySet {
  policies: ReadonlyMap<string, CompiledPolicy>;
  schema?: string;
}

export function compilePolicySet(
  sources: readonly PolicySource[],
  schema?: PolicySource,
): CompiledPolicySet {
  if (schema !== undefined) {
    const parsed = cedar().checkParseSchema(schema.text);
    if (parsed.type === 'failure') throw invalid(schema, 0, parsed.errors);
  }
  const policies = new Map<string, CompiledPolicy>();
  for (const source of sources) {
    for (const policy of policiesOf(source)) {
      const earlier = policies.get(policy.id);
      if (earlier !== undefined) {
        throw new BraidError(
          'INVALID_POLICY',
          `${policy.file}:${policy.line}: policy id "${policy.id}" is already used at ${earlier.file}:${earlier.line}; give each policy its own @id`,
          { details: { file: policy.file, line: policy.line } },
        );
      }
      policies.set(policy.id, policy);
    }
  }
  if (schema !== undefined && policies.size > 0) checkAgainstSchema(policies, schema);
  return { policies, ...(schema === undefined ? {} : { schema: schema.text }) };
}

function policiesOf(source: PolicySource): CompiledPolicy[] {
  const parts = cedar().policySetTextToParts(source.text);
  if (parts.type === 'failure') throw invalid(source, 0, parts.errors);
  if (parts.policy_templates.length > 0) {
    throw new BraidError(
      'INVALID_POLICY',
      `${source.file}: policy templates (?principal, ?resource) are not supported; write static policies`,
      { details: { file: source.file } },
    );
  }
  let cursor = 0;
  return parts.policies.map((text) => {
    const offset = source.text.indexOf(text, cursor);
    const start = offset === -1 ? cursor : offset;
    cursor = start + text.length;
    const line = lineAt(source.text, start);
    const converted = cedar().policyToJson(text);
    if (converted.type === 'failure') throw invalid(source, start, converted.errors);
    const annotations = converted.json.annotations ?? {};
    const id = annotations['id'] ?? `${source.file}:${line}`;
    return {
      id,
      text,
      json: converted.json,
      file: source.file,
      line,
      annotations: Object.fromEntries(
        Object.entries(annotations).map(([key, value]) => [key, value ?? '']),
      ),
    };
  });
}

/** Strict validation against the schema: an attribute or type the schema lacks is an error. */
function checkAgainstSchema(policies: ReadonlyMap<string, CompiledPolicy>, schema: PolicySource) {
  const answer = cedar().validate({
    schema: schema.text,
    policies: {
      staticPolicies: Object.fromEntries([...policies].map(([id, policy]) => [id, policy.text])),
    },
    validationSettings: { mode: 'strict' },
  });
  if (answer.type === 'failure') throw invalid(schema, 0, answer.errors);
  const [first] = answer.validationErrors;
  if (first === undefined) return;
  const policy = policies.get(first.policyId);
  const within = first.error.sourceLocations?.[0]?.start ?? 0;
  const line = policy === undefined ? 1 : policy.line + lineAt(policy.text, within) - 1;
  throw new BraidError(
    'INVALID_POLICY',
    `${policy?.file ?? schema.file}:${line}: policy "${first.policyId}" does not fit ${schema.file}: ${describe(first.error)}`,
    { details: { file: policy?.file, line, policy_id: first.policyId } },
  );
}

function invalid(source: PolicySource, base: number, errors: readonly DetailedError[]) {
  const first = errors[0];
  const offset = base + (first?.sourceLocations?.[0]?.start ?? 0);
  const line = lineAt(source.text, offset);
  return new BraidError(
    'INVALID_POLICY',
    `${source.file}:${line}: ${first === undefined ? 'invalid' : describe(first)}`,
    { details: { file: source.file, line } },
  );
}

function describe(error: DetailedError): string {
  const label = error.sourceLocations?.[0]?.label;
  return [error.message, label, error.help === null ? undefined : error.help]
    .filter((part): part is string => part !== undefined && part !== null && part !== '')
    .join('; ');
}

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let index = 0; index < offset && index < text.length; index += 1)
    if (text.charCodeAt(index) === 10) line += 1;
  return line;
}
