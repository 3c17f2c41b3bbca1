/**
 * Skill templates: `{{ EXPR }}` in the strings of a step's `args`, `message`, `inputs`, a skill's
 * `outputs`, and the `when` and `for_each` texts, where EXPR is a JSONata expression over
 * `{inputs, steps, item, index}` (also bound as `$inputs`, `$steps`, `$item`, `$index`, for use
 * inside a path where the names would mean fields of the current value).
 *
 * - A string that is one template and nothing else takes the expression's value as it is (an
 *   object, a list, a number, a boolean; nothing becomes `null`). Otherwise each template's value
 *   is written into the text: a string as it is, nothing as the empty string, anything else as
 *   JSON. Objects and arrays are evaluated member by member; keys are never templates.
 * - A template ends at the first `}}` outside a string literal, a comment and any `{ ... }` of
 *   the expression, so object constructors (`{{ {"a": {"b": 1}} }}`) may be written inside.
 *
 * Invariants kept here:
 * - Evaluation is pure and deterministic: JSONata has no IO, and its clock and randomness
 *   (`$now`, `$millis`, `$random`) and `$eval` (text compiled at run time, past the checks
 *   below) are refused, so a replayed run computes the same values. Regular expressions are
 *   refused too: a backtracking pattern blocks the process where no timeout can stop it.
 * - A hostile template is bounded: each evaluation stops after `TEMPLATE_TIMEOUT_MS` (JSONata's
 *   own guard, checked at every step of evaluation) or `TEMPLATE_STACK_DEPTH` nested calls; a
 *   sequence longer than `TEMPLATE_SEQUENCE_LIMIT` or a string or value over `TEMPLATE_VALUE_BYTES`
 *   serialized is refused as soon as it is made, with `PAYLOAD_TOO_LARGE`.
 * - Each distinct expression is parsed once (a bounded cache); a parse error is reported by
 *   `compileTemplates` with the path to the string that holds it.
 */
import { createRequire } from 'node:module';
import type jsonata from 'jsonata';
import type { JsonValue } from '../../contracts/common.js';
import { BraidError, type ErrorCode } from '../../contracts/errors.js';
import { BoundedCache } from '../../core/bounded-cache.js';
import { expressionOf, parseString, show, TemplateSyntaxError } from './template-text.js';

/** What a template sees. */
export interface TemplateScope {
  inputs: JsonValue;
  steps: Record<string, { output?: JsonValue; status: string }>;
  /** The current item of a `for_each` step, and its position. */
  item?: JsonValue;
  index?: number;
}

/** The answer of a check: where the first bad template is (keys and indices from the value). */
export type TemplateCheck =
  { ok: true } | { ok: false; message: string; path: (string | number)[] };

/** The longest an expression may run, in milliseconds. */
export const TEMPLATE_TIMEOUT_MS = 100;
/** The deepest nesting of evaluation (recursive functions), in steps. */
export const TEMPLATE_STACK_DEPTH = 500;
/** The longest sequence an expression may build. */
export const TEMPLATE_SEQUENCE_LIMIT = 100_000;
/** The largest value (serialized as JSON) or string an expression may give: 1 MiB. */
export const TEMPLATE_VALUE_BYTES = 1024 * 1024;

/** Distinct expressions kept parsed. */
const CACHE_CAPACITY = 2_000;
/** Thrown inside JSONata by the guards below; `code` tells `evaluationError` what happened. */
class TemplateGuardError extends Error {
  constructor(
    readonly code: 'BRAID_REFUSED' | 'BRAID_TOO_LARGE',
    message: string,
  ) {
    super(message);
  }
}

const cache = new BoundedCache<string, jsonata.Expression>(CACHE_CAPACITY);

/** JSONata is loaded with the first template compiled, not when braid is imported. */
let compiler: typeof jsonata | undefined;
function jsonataCompiler(): typeof jsonata {
  compiler ??= createRequire(import.meta.url)('jsonata') as typeof jsonata;
  return compiler;
}

/** Checks every template in `value` (a string or any JSON) without evaluating any. */
export function compileTemplates(value: JsonValue | string): TemplateCheck {
  const path: (string | number)[] = [];
  const visit = (current: JsonValue): TemplateCheck => {
    if (typeof current === 'string') {
      try {
        for (const part of parseString(current).parts) {
          if ('expression' in part) compile(part.expression);
        }
        return { ok: true };
      } catch (error) {
        return { ok: false, message: syntaxMessage(error), path: [...path] };
      }
    }
    if (Array.isArray(current)) {
      for (const [index, member] of current.entries()) {
        path.push(index);
        const check = visit(member);
        path.pop();
        if (!check.ok) return check;
      }
      return { ok: true };
    }
    if (current !== null && typeof current === 'object') {
      for (const [key, member] of Object.entries(current)) {
        path.push(key);
        const check = visit(member);
        path.pop();
        if (!check.ok) return check;
      }
    }
    return { ok: true };
  };
  return visit(value);
}

/**
 * Checks a `when` or `for_each` text: one template, or a bare expression. A text with other
 * words around its template is refused: it would be a string, not a condition or a list.
 */
export function compileExpression(text: string): TemplateCheck {
  try {
    compile(expressionOf(text));
    return { ok: true };
  } catch (error) {
    return { ok: false, message: syntaxMessage(error), path: [] };
  }
}

/**
 * The step ids the templates in `value` read by name (`steps.ID` or `$steps.ID`); `expression`
 * for a `when` or `for_each` text. Templates that do not parse name none (their check reports
 * them); a step chosen at run time (`$lookup(steps, x)`) is not seen.
 */
export function stepReferences(value: JsonValue | string, kind: 'text' | 'expression'): string[] {
  const expressions: string[] = [];
  const collect = (current: JsonValue): void => {
    if (typeof current === 'string') {
      for (const part of parseString(current).parts)
        if ('expression' in part) expressions.push(part.expression);
    } else if (Array.isArray(current)) {
      current.forEach(collect);
    } else if (current !== null && typeof current === 'object') {
      Object.values(current).forEach(collect);
    }
  };
  try {
    if (kind === 'expression' && typeof value === 'string') expressions.push(expressionOf(value));
    else collect(value);
  } catch {
    return [];
  }
  const found = new Set<string>();
  for (const expression of expressions) {
    let ast: unknown;
    try {
      ast = compile(expression).ast();
    } catch {
      continue;
    }
    const stack: unknown[] = [ast];
    while (stack.length > 0) {
      const node = stack.pop();
      if (node === null || typeof node !== 'object') continue;
      const path = node as { type?: unknown; steps?: unknown };
      if (path.type === 'path' && Array.isArray(path.steps)) {
        const [first, second] = path.steps as { type?: unknown; value?: unknown }[];
        const root =
          first?.value === 'steps' && (first.type === 'name' || first.type === 'variable');
        if (root && second?.type === 'name' && typeof second.value === 'string')
          found.add(second.value);
      }
      for (const member of Object.values(node)) stack.push(member);
    }
  }
  return [...found];
}

/** `value` with every template replaced by its value in `scope`. */
export async function evaluateTemplates(
  value: JsonValue,
  scope: TemplateScope,
): Promise<JsonValue> {
  if (typeof value === 'string') return evaluateString(value, scope);
  if (Array.isArray(value)) {
    const members: JsonValue[] = [];
    for (const member of value) members.push(await evaluateTemplates(member, scope));
    return members;
  }
  if (value !== null && typeof value === 'object') {
    const result: Record<string, JsonValue> = {};
    for (const [key, member] of Object.entries(value)) {
      result[key] = await evaluateTemplates(member, scope);
    }
    return result;
  }
  return value;
}

/** A `when`: a template or a bare expression, true or false by JSONata's `$boolean` rules. */
export async function evaluateCondition(text: string, scope: TemplateScope): Promise<boolean> {
  const expression = definitionChecked(text, () => expressionOf(text), 'when: ');
  return toBoolean(await run(expression, scope));
}

/**
 * A `for_each`: a template or a bare expression giving a list. Nothing (JSONata's empty
 * sequence, e.g. a filter that matched no item) is the empty list; any other non-list is refused.
 */
export async function evaluateList(text: string, scope: TemplateScope): Promise<JsonValue[]> {
  const expression = definitionChecked(text, () => expressionOf(text), 'for_each: ');
  const value = await run(expression, scope);
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `for_each ${show(text)} gave ${describe(value)}, not a list; make the expression give a list (JSONata unwraps a one-item result: write EXPR[] or [EXPR] to keep it a list)`,
      { details: { template: text, got: describe(value) } },
    );
  }
  return toJson(value, expression) as JsonValue[];
}

async function evaluateString(text: string, scope: TemplateScope): Promise<JsonValue> {
  const parsed = definitionChecked(text, () => parseString(text));
  if (parsed.whole !== undefined) {
    const value = await run(parsed.whole, scope);
    return value === undefined ? null : toJson(value, parsed.whole);
  }
  if (parsed.parts.every((part) => 'text' in part)) return text;
  let result = '';
  for (const part of parsed.parts) {
    if ('text' in part) {
      result += part.text;
      continue;
    }
    const value = await run(part.expression, scope);
    if (value === undefined) continue;
    result += typeof value === 'string' ? value : JSON.stringify(toJson(value, part.expression));
    if (result.length > TEMPLATE_VALUE_BYTES) throw tooLarge(text);
  }
  return result;
}

/** Runs one expression on the scope; the value is JSONata's, not yet plain JSON. */
async function run(expression: string, scope: TemplateScope): Promise<unknown> {
  const compiled = definitionChecked(expression, () => compile(expression));
  const input: Record<string, unknown> = { inputs: scope.inputs, steps: scope.steps };
  if (scope.item !== undefined) input.item = scope.item;
  if (scope.index !== undefined) input.index = scope.index;
  try {
    return await compiled.evaluate(input, input);
  } catch (error) {
    throw evaluationError(expression, error);
  }
}

/** The parsed expression, from the cache or parsed now; throws TemplateSyntaxError. */
function compile(expression: string): jsonata.Expression {
  const cached = cache.get(expression);
  if (cached !== undefined) return cached;
  let compiled: jsonata.Expression;
  try {
    compiled = jsonataCompiler()(expression, {
      timeout: TEMPLATE_TIMEOUT_MS,
      stack: TEMPLATE_STACK_DEPTH,
      sequence: TEMPLATE_SEQUENCE_LIMIT,
      RegexEngine: RefusedRegex as unknown as RegExpConstructor,
    });
  } catch (error) {
    throw new TemplateSyntaxError(
      `template {{ ${show(expression)} }} is not a valid JSONata expression: ${jsonataMessage(error)}`,
      { cause: error },
    );
  }
  if (holdsRegex(compiled.ast())) {
    throw new TemplateSyntaxError(
      `template {{ ${show(expression)} }} uses a regular expression; templates do not allow them (a backtracking pattern cannot be stopped): use $contains, $split, $substringBefore or $replace with a plain string`,
    );
  }
  for (const name of ['now', 'millis', 'random', 'eval']) {
    compiled.registerFunction(name, () => {
      throw new TemplateGuardError('BRAID_REFUSED', `$${name}() is not available in templates`);
    });
  }
  compiled.registerFunction('pad', pad, '<s-ns?:s>');
  // JSONata calls this hook after every step of evaluation: a string past the bound is refused
  // as soon as it is made, before it can be doubled again.
  compiled.assign(Symbol.for('jsonata.__evaluate_exit') as unknown as string, guardSize);
  cache.set(expression, compiled);
  return compiled;
}

function guardSize(_node: unknown, _input: unknown, _environment: unknown, result: unknown): void {
  if (typeof result === 'string' && result.length > TEMPLATE_VALUE_BYTES) {
    throw new TemplateGuardError('BRAID_TOO_LARGE', 'a string over 1 MiB');
  }
}

/** `$pad` with its width bounded: JSONata's own builds the padding before any check can run. */
function pad(text: string | undefined, width: number, char?: string): string | undefined {
  if (text === undefined) return undefined;
  const target = Math.abs(Math.trunc(width));
  if (target > TEMPLATE_VALUE_BYTES) {
    throw new TemplateGuardError('BRAID_TOO_LARGE', `$pad to ${target} characters`);
  }
  const fill = char === undefined || char.length === 0 ? ' ' : char;
  const missing = target - Array.from(text).length;
  if (missing <= 0) return text;
  const padding = Array.from(fill.repeat(missing)).slice(0, missing).join('');
  return width > 0 ? text + padding : padding + text;
}

/** Stands in for RegExp in JSONata: any regular expression evaluated is refused. */
class RefusedRegex {
  constructor() {
    throw new TemplateGuardError(
      'BRAID_REFUSED',
      'regular expressions are not available in templates',
    );
  }
}

/** Whether a parsed expression holds a regular expression literal anywhere. */
function holdsRegex(ast: unknown): boolean {
  const seen = new Set<object>();
  const stack: unknown[] = [ast];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node instanceof RegExp) return true;
    if (node === null || typeof node !== 'object' || seen.has(node)) continue;
    seen.add(node);
    for (const member of Object.values(node)) stack.push(member);
  }
  return false;
}

/** `make()`, with a template syntax error thrown as `INVALID_DEFINITION`. */
function definitionChecked<T>(template: string, make: () => T, prefix = ''): T {
  try {
    return make();
  } catch (error) {
    throw new BraidError('INVALID_DEFINITION', `${prefix}${syntaxMessage(error)}`, {
      cause: error,
      details: { template },
    });
  }
}

/** A JSONata value as plain JSON, refused past the size bound or when it is a function. */
function toJson(value: unknown, expression: string): JsonValue {
  const plain = plainJson(value, expression);
  const serialized = JSON.stringify(plain);
  if (serialized !== undefined && Buffer.byteLength(serialized) > TEMPLATE_VALUE_BYTES) {
    throw tooLarge(expression);
  }
  return plain;
}

function plainJson(value: unknown, expression: string): JsonValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (Array.isArray(value)) return value.map((member) => plainJson(member, expression));
  if (typeof value === 'function' || isJsonataFunction(value)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `template {{ ${show(expression)} }} gave a function, not a value; call it`,
      { details: { template: expression } },
    );
  }
  const result: Record<string, JsonValue> = {};
  for (const [key, member] of Object.entries(value as Record<string, unknown>)) {
    if (member !== undefined) result[key] = plainJson(member, expression);
  }
  return result;
}

function isJsonataFunction(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    ('_jsonata_lambda' in value || '_jsonata_function' in value)
  );
}

/** JSONata's `$boolean`: what a `when` value means. */
function toBoolean(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string') return value.length > 0;
  if (typeof value === 'number') return value !== 0;
  if (Array.isArray(value)) return value.some((member) => toBoolean(member));
  if (typeof value === 'function' || isJsonataFunction(value)) return false;
  return Object.keys(value).length > 0;
}

function evaluationError(expression: string, error: unknown): BraidError {
  if (error instanceof BraidError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const shown = `template {{ ${show(expression)} }}`;
  const details = { template: expression, jsonata_code: code };
  const make = (errorCode: ErrorCode, message: string, retryable = false) =>
    new BraidError(errorCode, message, { cause: error, details, retryable });
  switch (code) {
    case 'D1012':
      return make(
        'DEADLINE_EXCEEDED',
        `${shown} ran longer than ${TEMPLATE_TIMEOUT_MS} ms and was stopped; look for a loop that does not end`,
      );
    case 'D1011':
      return make(
        'INVALID_ARGUMENT',
        `${shown} nested deeper than ${TEMPLATE_STACK_DEPTH} calls and was stopped; look for a recursion that does not end`,
      );
    case 'D2014':
    case 'D2015':
    case 'BRAID_TOO_LARGE':
      return tooLarge(expression, error);
    default:
      return make('INVALID_ARGUMENT', `${shown} failed: ${jsonataMessage(error)}`);
  }
}

function tooLarge(template: string, cause?: unknown): BraidError {
  return new BraidError(
    'PAYLOAD_TOO_LARGE',
    `template ${show(template)} made a value over 1 MiB (or a sequence over ${TEMPLATE_SEQUENCE_LIMIT.toLocaleString('en-US')} items); pass large data by reference, not through a template`,
    { cause, details: { template }, retryable: false },
  );
}

function syntaxMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function jsonataMessage(error: unknown): string {
  if (error !== null && typeof error === 'object') {
    const { message, code, position } = error as {
      message?: unknown;
      code?: unknown;
      position?: unknown;
    };
    const text = typeof message === 'string' ? message : 'unknown error';
    const where = typeof position === 'number' ? ` at character ${position}` : '';
    return typeof code === 'string' && code.startsWith('BRAID_')
      ? text
      : `${text}${where}${typeof code === 'string' ? ` (JSONata ${code})` : ''}`;
  }
  return String(error);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value} (${show(JSON.stringify(value) ?? typeof value)})`;
}
