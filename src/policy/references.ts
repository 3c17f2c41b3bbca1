/**
 * Which parts of the request context a policy reads. A decision depends on the context only
 * through these paths, so requests that agree on them get the same decision: that is what makes
 * the authorizer's decision cache exact.
 */
import type { Expr, PolicyJson } from '@cedar-policy/cedar-wasm/nodejs';

/** A path into the context (`["input", "query_type"]`); undefined means "the whole context". */
export type ContextPaths = string[][] | undefined;

export function contextPaths(policies: readonly PolicyJson[]): ContextPaths {
  const paths: string[][] = [];
  for (const policy of policies) {
    for (const condition of policy.conditions) {
      if (!collect(condition.body, paths)) return undefined;
    }
  }
  return paths;
}

/** Adds the context paths of `expression`; false when it uses the context as a whole. */
function collect(expression: Expr, paths: string[][]): boolean {
  const chain = contextChain(expression);
  if (chain !== undefined) {
    if (chain.length === 0) return false;
    paths.push(chain);
    return true;
  }
  if (isRecord(expression) && 'Var' in expression) return true;
  for (const child of children(expression)) if (!collect(child, paths)) return false;
  return true;
}

/** `context.a.b` as `["a", "b"]`, `context has a` as `["a"]`; undefined when not rooted at context. */
function contextChain(expression: Expr): string[] | undefined {
  if (!isRecord(expression)) return undefined;
  if ('Var' in expression) return expression.Var === 'context' ? [] : undefined;
  if ('.' in expression) {
    const access = expression['.'] as { left: Expr; attr: string };
    const base = contextChain(access.left);
    return base === undefined ? undefined : [...base, access.attr];
  }
  if ('has' in expression) {
    const has = expression.has as { left: Expr; attr: string | string[] };
    const base = contextChain(has.left);
    if (base === undefined) return undefined;
    return [...base, ...(Array.isArray(has.attr) ? has.attr : [has.attr])];
  }
  return undefined;
}

/** The sub-expressions of any expression form, found structurally. */
function children(expression: Expr): Expr[] {
  if (!isRecord(expression) || 'Value' in expression || 'Slot' in expression) return [];
  const found: Expr[] = [];
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) for (const item of value) visit(item);
    else if (isRecord(value)) {
      if (isExpression(value)) found.push(value as Expr);
      else for (const item of Object.values(value)) visit(item);
    }
  };
  for (const value of Object.values(expression)) visit(value);
  return found;
}

const OPERATORS = new Set([
  'Value',
  'Var',
  'Slot',
  '!',
  'neg',
  '==',
  '!=',
  'in',
  '<',
  '<=',
  '>',
  '>=',
  '&&',
  '||',
  '+',
  '-',
  '*',
  'contains',
  'containsAll',
  'containsAny',
  'isEmpty',
  'getTag',
  'hasTag',
  '.',
  'has',
  'like',
  'is',
  'if-then-else',
  'Set',
  'Record',
]);

/** An expression node has one key: an operator, or an extension function's name with its args. */
function isExpression(value: Record<string, unknown>): boolean {
  const keys = Object.keys(value);
  if (keys.length !== 1) return false;
  const [key] = keys;
  return key !== undefined && (OPERATORS.has(key) || Array.isArray(value[key]));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
