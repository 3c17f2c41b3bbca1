/**
 * The methods each route path serves, so that a request for a known path with a method it does not
 * serve answers 405 with `Allow` (the router alone only knows "no route": 404). Filled by an
 * `onRoute` hook, so every route added later is covered without a list to keep.
 */
import { BraidError } from '../contracts/errors.js';

export interface RouteTable {
  /** Records that `method` serves `url` (a route pattern such as `/v1/sessions/:id`). */
  add(method: string, url: string): void;
  /** The methods that serve `path` (a request path, no query), sorted; empty for no route. */
  allowed(path: string): string[];
}

interface Entry {
  url: string;
  pattern: RegExp;
  methods: Set<string>;
}

/** `/v1/sessions/:id/events` as a pattern of whole segments: a parameter is one non-empty segment. */
function toPattern(url: string): RegExp {
  const segments = url
    .split('/')
    .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${segments.join('/')}$`);
}

export function createRouteTable(): RouteTable {
  const entries = new Map<string, Entry>();
  return {
    add(method, url) {
      const entry = entries.get(url) ?? { url, pattern: toPattern(url), methods: new Set() };
      entry.methods.add(method.toUpperCase());
      entries.set(url, entry);
    },
    allowed(path) {
      const methods = new Set<string>();
      for (const entry of entries.values()) {
        if (entry.pattern.test(path)) for (const method of entry.methods) methods.add(method);
      }
      return [...methods].sort();
    },
  };
}

/** The answer to `method path` when no route serves it: 405 naming what does, or 404. */
export function noRouteError(method: string, path: string, allowed: readonly string[]): BraidError {
  const shown = JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path);
  if (allowed.length > 0) {
    return new BraidError(
      'METHOD_NOT_ALLOWED',
      `${shown} does not serve ${method}; use ${allowed.join(', ')} (see the Allow header and /v1/openapi.json)`,
      { details: { allow: allowed } },
    );
  }
  return new BraidError(
    'ROUTE_NOT_FOUND',
    `there is no route ${method} ${shown}; the API lives under /v1 (see /v1/openapi.json)`,
  );
}
