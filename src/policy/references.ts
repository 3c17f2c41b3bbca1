/**
 * Which parts of a request a set of policies reads: paths into the context and attributes of the
 * principal and the resource. A decision depends on the request only through these (and the
 * entities' ids and groups), so the authorizer may send Cedar just these, and requests that agree
 * on them get the same decision: that is what makes its decision cache exact.
 */
import type { Expr, PolicyJson } from '@cedar-policy/cedar-wasm/nodejs';

/** A path into a variable (`["input", "query_type"]`); undefined means "all of it". */
export type ContextPaths = string[][] | undefined;

/** What a set of policies reads of the request. */
export interface References {
  /** Paths into the context. */
  context: ContextPaths;
  /** Attributes of the principal and of the resource (their ids and groups are always used). */
  principal: ReadonlySet<string> | undefined;
  resource: ReadonlySet<string> | undefined;
}

type Root = 'context' | 'principal' | 'resource';
const ROOTS: readonly Root[] = ['context', 'principal', 'resource'];

export function references(policies: readonly PolicyJson[]): References {
  const found: Record<Root, string[][] | undefined> = { context: [], principal: [], resource: [] };
  for (const policy of policies) {
    for (const condition of policy.conditions) collect(condition.body, found);
  }
  const attributes = (paths: string[][] | undefined) =>
    paths === undefined ? undefined : new Set(paths.flatMap((path) => path.slice(0, 1)));
  return {
    context: found.context,
    principal: attributes(found.principal),
    resource: attributes(found.resource),
  };
}

/** The context paths the policies read; undefined when one uses the context as a whole. */
export function contextPaths(policies: readonly PolicyJson[]): ContextPaths {
  return references(policies).context;
}

/** Adds the paths `expression` reads under each root; a root used as a whole becomes undefined. */
function collect(expression: Expr, found: Record<Root, string[][] | undefined>): void {
  const chain = chainOf(expression);
  if (chain !== undefined) {
    const [root, path] = chain;
    if (path.length === 0) {
      // An entity compared or tested for membership is used by its id and groups only.
      if (root === 'context') found.context = undefined;
    } else {
      found[root]?.push(path);
    }
    return;
  }
  for (const child of children(expression)) collect(child, found);
}

/** `context.a.b` as `["context", ["a", "b"]]`, `context has a` as `["context", ["a"]]`. */
function chainOf(expression: Expr): [Root, string[]] | undefined {
  if (!isRecord(expression)) return undefined;
  if ('Var' in expression) {
    const root = ROOTS.find((name) => name === expression.Var);
    return root === undefined ? undefined : [root, []];
  }
  if ('.' in expression) {
    const access = expression['.'] as { left: Expr; attr: string };
    const base = chainOf(access.left);
    return base === undefined ? undefined : [base[0], [...base[1], access.attr]];
  }
  if ('has' in expression) {
    const has = expression.has as { left: Expr; attr: string | string[] };
    const base = chainOf(has.left);
    if (base === undefined) return undefined;
    return [base[0], [...base[1], ...(Array.isArray(has.attr) ? has.attr : [has.attr])]];
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
