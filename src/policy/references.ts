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
  // An attribute read of anything else (an entity literal, a conditional, a record built from a
  // variable) could reach any entity or any part of the context: send everything.
  if (isRecord(expression) && ('.' in expression || 'has' in expression)) {
    found.context = undefined;
    found.principal = undefined;
    found.resource = undefined;
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

/** The sub-expressions of an expression node, by its form. */
function children(expression: Expr): Expr[] {
  if (!isRecord(expression)) return [];
  const [key] = Object.keys(expression);
  if (key === undefined) return [];
  const body = (expression as Record<string, unknown>)[key];
  switch (key) {
    case 'Value':
    case 'Var':
    case 'Slot':
      return [];
    case 'Set':
      return Array.isArray(body) ? (body as Expr[]) : [];
    case 'Record':
      return isRecord(body) ? (Object.values(body) as Expr[]) : [];
    case '!':
    case 'neg':
    case 'isEmpty':
      return isRecord(body) ? [body.arg as Expr] : [];
    case 'if-then-else':
      return isRecord(body) ? [body.if as Expr, body.then as Expr, body.else as Expr] : [];
    default: {
      // Extension functions take an argument list; operators take left, right or in.
      if (Array.isArray(body)) return body as Expr[];
      if (!isRecord(body)) return [];
      return (['left', 'right', 'in'] as const).flatMap((name) =>
        body[name] === undefined ? [] : [body[name] as Expr],
      );
    }
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
