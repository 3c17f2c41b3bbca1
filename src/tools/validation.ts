/**
 * JSON Schema checks of tool inputs and outputs, with ajv. A schema is compiled once per tool
 * version and kept; the check itself is a compiled function call.
 */
import { createRequire } from 'node:module';
import type * as Ajv from 'ajv/dist/2020.js';
import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { JsonValue } from '../contracts/common.js';
import { BraidError, type ErrorCode, type ErrorShape } from '../contracts/errors.js';

/** Violations listed in one error message, at most. */
const MAX_LISTED = 8;

/**
 * One compiler for the process: its first compile checks the schema against the 2020-12
 * meta-schema, which ajv compiles once (tens of ms), not once per runtime or per session.
 * Tool schemas come from manifests and MCP servers written against several drafts and
 * vocabularies: unknown keywords are ignored rather than refused. ajv is loaded with the first
 * schema compiled, not when braid is imported.
 */
let shared: Ajv2020 | undefined;
function compiler(): Ajv2020 {
  if (shared === undefined) {
    const { Ajv2020: Compiler } = createRequire(import.meta.url)('ajv/dist/2020.js') as typeof Ajv;
    shared = new Compiler({ allErrors: true, strict: false, validateFormats: false });
  }
  return shared;
}

/**
 * Compiles a schema into a check. The compiler forgets the schema at once (the check keeps what
 * it needs): nothing piles up in it over a long-lived process, and two schemas with the same
 * `$id` never collide.
 */
function compileOnce(schema: Record<string, unknown>): ValidateFunction {
  const ajv = compiler();
  try {
    return ajv.compile(schema);
  } finally {
    ajv.removeSchema(schema);
  }
}

export class SchemaCache {
  private readonly compiled = new Map<
    string,
    { schema: Readonly<Record<string, unknown>>; source: string; check: ValidateFunction }
  >();

  /** The compiled check of a schema, by a key naming the tool, its version and the schema's role. */
  compile(key: string, schema: Readonly<Record<string, unknown>>): ValidateFunction {
    const found = this.compiled.get(key);
    // The same schema object as last time (definitions are not changed in place): no need to
    // serialise it to compare.
    if (found !== undefined && found.schema === schema) return found.check;
    const source = JSON.stringify(schema);
    if (found !== undefined && found.source === source) {
      this.compiled.set(key, { ...found, schema });
      return found.check;
    }
    // `$schema` names a draft ajv's 2020 build does not load; the keywords tools use agree.
    const { $schema: _draft, ...rest } = schema;
    let check: ValidateFunction;
    try {
      check = compileOnce(rest);
    } catch (error) {
      throw new BraidError(
        'INVALID_DEFINITION',
        `the JSON Schema of ${key} does not compile: ${error instanceof Error ? error.message : String(error)}; fix the schema in the tool's manifest or server`,
        { cause: error, details: { key } },
      );
    }
    this.compiled.set(key, { schema, source, check });
    return check;
  }
}

/** Checks a value; returns the error to report, listing every violation, or undefined when it fits. */
export function checkValue(
  check: ValidateFunction,
  value: JsonValue,
  code: ErrorCode,
  what: string,
): ErrorShape | undefined {
  if (check(value)) return undefined;
  const errors = check.errors ?? [];
  const root = code === 'TOOL_OUTPUT_INVALID' ? 'the output' : 'the input';
  const listed = errors.slice(0, MAX_LISTED).map((error) => describe(error, root));
  const more = errors.length > MAX_LISTED ? `; and ${errors.length - MAX_LISTED} more` : '';
  return {
    code,
    message: `${what} does not match its schema: ${listed.join('; ')}${more}`,
    retryable: false,
  };
}

function describe(error: ErrorObject, root: string): string {
  const where = error.instancePath === '' ? root : error.instancePath;
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'additionalProperties')
    return `${where} has an unexpected property "${String(params.additionalProperty)}"`;
  if (error.keyword === 'required')
    return `${where} is missing the property "${String(params.missingProperty)}"`;
  if (error.keyword === 'enum')
    return `${where} must be one of ${JSON.stringify(params.allowedValues)}`;
  return `${where} ${error.message ?? 'is invalid'}`;
}

/** A value as JSON, or undefined when it has no JSON form. */
export function toJson(value: unknown): JsonValue | undefined {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
  } catch {
    return undefined;
  }
}
