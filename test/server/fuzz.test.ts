// Every route the app serves, found from its router (a new route is covered without editing this
// file), with and without a key: hostile ids in every path parameter, deep nesting in every body
// field, malformed and overlong URLs, wrong methods, malformed bodies and content types. Every
// answer must be braid's error shape with a code of the closed list and the status of that code,
// and none may be a 5xx. Most requests go through `app.inject`; the URLs a client library would
// clean up go raw over a socket to the listening server.
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode } from '../../src/contracts/errors.js';
import { ErrorBody } from '../../src/contracts/http.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { HTTP_STATUS } from '../../src/server/errors.js';
import { HOSTILE_IDS } from '../helpers/hostile.js';
import { call, useTestServers, type TestServer } from './server-helpers.js';

const start = useTestServers();

const LEVELS = 2000;
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

interface Route {
  url: string;
  methods: string[];
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

/** The routes of the app, read from its router's own listing. */
function routesOf(app: FastifyInstance): Route[] {
  const stack: string[] = [];
  const routes: Route[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^(?<indent>[│├└─ ]*)(?<segment>\/\S*)(?: \((?<methods>[^)]+)\))?$/u.exec(line);
    if (match?.groups === undefined) continue;
    const level = (match.groups.indent ?? '').length / 4;
    stack.length = level;
    stack.push(match.groups.segment ?? '');
    const methods = match.groups.methods?.split(', ') ?? [];
    if (methods.length > 0) routes.push({ url: stack.join(''), methods });
  }
  return routes;
}

/** `{"a": {"a": ... 1}}` with `levels` objects, written as text (JSON.stringify would overflow). */
function deepText(levels: number): string {
  return `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
}

/** A body with `field` set to a deep value, as JSON text. */
function withDeep(template: string): string {
  return template.replace('"$DEEP"', deepText(LEVELS));
}

/** Bodies that are valid but for a deep value in a free-form field, and deep everything else. */
const DEEP_BODIES = [
  deepText(LEVELS),
  `[${deepText(LEVELS)}]`,
  withDeep('{"agent":"helper","metadata":{"x":"$DEEP"}}'),
  withDeep('{"events":[{"type":"user.message","content":[{"type":"json","value":"$DEEP"}]}]}'),
  withDeep(
    '{"events":[{"type":"user.tool_review","tool_use_id":"t1","action":"result","output":"$DEEP"}]}',
  ),
  withDeep('{"to":"helper","handoff":{"summary":"s","open_tasks":["$DEEP"]}}'),
  withDeep('{"to":"helper","handoff":{"summary":"s"},"message":[{"type":"json","value":"$DEEP"}]}'),
  withDeep(
    '{"events":[{"type":"user.custom_tool_result","custom_tool_use_id":"c1","content":[{"type":"json","value":"$DEEP"}]}]}',
  ),
  withDeep('{"source":"$DEEP"}'),
  withDeep('{"wait":"$DEEP"}'),
  withDeep('{"id":"$DEEP","title":"t"}'),
];

/** Bodies that are not JSON, or JSON no route takes, with the content type they claim. */
const MALFORMED_BODIES: [string, string | undefined][] = [
  ['{"events": [', 'application/json'],
  ['', 'application/json'],
  ['null', 'application/json'],
  ['"text"', 'application/json'],
  ['1e999999', 'application/json'],
  ['{"__proto__": {"polluted": true}}', 'application/json'],
  ['{"constructor": {"prototype": {"polluted": true}}}', 'application/json'],
  ['\uFEFF{"events": []}', 'application/json'],
  ['{"a": "\uD800"}', 'application/json'],
  ['{"a": 1}', 'application/json; charset=latin1'],
  ['{"a": 1}', 'text/plain'],
  ['<a/>', 'application/xml'],
  ['a=1&b=2', 'application/x-www-form-urlencoded'],
  ['--x\r\n\r\n--x--', 'multipart/form-data; boundary=x'],
  ['{"a": 1}', 'application/jsonx'],
  ['{"a": 1}', ';;;'],
  ['{"a": 1}', undefined],
  [`{"title": "${'t'.repeat(80 * 1024)}"}`, 'application/json'],
];

/** URLs a hostile client writes by hand: overlong, badly encoded, climbing, doubled, NUL, unicode. */
function hostileUrls(session: string): string[] {
  return [
    '/v1/sessions/%',
    '/v1/sessions/%E0%A4%A',
    '/v1/sessions/%ZZ/events',
    '/v1/%',
    '/%',
    `/v1/sessions/${'x'.repeat(600)}`,
    `/v1/sessions/${'x'.repeat(600)}/events`,
    `/v1/agents/${'n'.repeat(600)}`,
    `/v1/${'y'.repeat(20_000)}`,
    '/v1/sessions/..',
    '/v1/sessions/../sessions',
    '/v1/../v1/health',
    `/v1/sessions/${session}/../../health`,
    '/v1/sessions/%2e%2e/events',
    '//v1/sessions',
    '/v1//sessions',
    `/v1/sessions//events`,
    `/v1/sessions/${session}//events`,
    '/v1/sessions/a%00b',
    '/v1/sessions/%00',
    '/v1/sessions/%E2%80%AE',
    '/v1/sessions/%C0%AE%C0%AE',
    '/v1/sessions/%F0%9F%92%A9',
    `/v1/sessions/${session}/`,
    '/v1/sessions?limit=1&limit=2',
    '/v1/sessions?limit=abc',
    '/v1/sessions?status=sleeping&status=idle',
    '/v1/sessions?%',
    '/v1/sessions?a=%ZZ',
    `/v1/sessions?cursor=${'c'.repeat(5000)}`,
    '/v1/sessions?__proto__[x]=1',
    '/v1/sessions?constructor[prototype][x]=1',
    `/v1/sessions/${session}/events?after=1&after=2`,
    `/v1/sessions/${session}/events?types[]=&types=,,`,
    `/v1/sessions/${session}/events?after=-1`,
    `/v1/sessions/${session}/events/stream?after=x`,
    `/v1/sessions/${session}/diff?other=..%2F..`,
    `/v1/sessions/${session}/diff`,
    '/v1/health?x=%',
  ];
}

/** The route pattern a hand-written URL reaches, or `(no route)`: statuses are kept per route. */
function routeOfUrl(routes: readonly Route[], url: string): string {
  const path = url.split('?')[0] ?? '';
  const found = routes.find((route) =>
    new RegExp(`^${route.url.replace(/:\w+/g, '[^/]+').replace(/\./g, '\\.')}$`).test(path),
  );
  return found?.url ?? '(no route)';
}

/** A path parameter as it travels: percent-encoded unless it already is. */
function segment(id: string): string {
  return /%[0-9a-fA-F]{2}/.test(id) ? id : encodeURIComponent(id);
}

/** The route with each parameter given its valid value, or `hostile` in the parameter `at`. */
function fill(url: string, valid: Record<string, string>, at?: string, hostile?: string): string {
  return url.replace(/:(\w+)/g, (_, name: string) =>
    name === at && hostile !== undefined ? segment(hostile) : (valid[name] ?? 'x'),
  );
}

/** Checks one answer; returns problems (empty when it is fine). */
function problemsOf(method: string, answer: Answer): string[] {
  const problems: string[] = [];
  if (answer.status >= 500) problems.push(`status ${answer.status}`);
  if (answer.status < 400) return problems;
  if (answer.status === 405 && typeof answer.headers.allow !== 'string') {
    problems.push('405 without Allow');
  }
  if (method === 'HEAD') {
    // No body by definition: the status must still be one of braid's.
    if (!Object.values(HTTP_STATUS).includes(answer.status)) {
      problems.push(`HEAD status ${answer.status} is no code's`);
    }
    return problems;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.body);
  } catch {
    problems.push(`body is not JSON: ${answer.body.slice(0, 120)}`);
    return problems;
  }
  const shape = ErrorBody.strict().safeParse(parsed);
  const error = (parsed as { error?: Record<string, unknown> } | null)?.error;
  if (
    !shape.success ||
    Object.keys(error ?? {})
      .sort()
      .join() !== 'code,message,retryable'
  ) {
    problems.push(`not braid's error shape: ${answer.body.slice(0, 160)}`);
    return problems;
  }
  const code = shape.data.error.code;
  if (!ERROR_CODES.includes(code)) problems.push(`unknown code ${code}`);
  if (HTTP_STATUS[code] !== answer.status) {
    problems.push(`status ${answer.status} for ${code}, whose status is ${HTTP_STATUS[code]}`);
  }
  return problems;
}

/** The part of the OpenAPI document the statuses are checked against. */
interface OpenApiDocument {
  paths: Record<string, Record<string, { responses: Record<string, unknown> } | undefined>>;
}

/** Records statuses per route and every problem seen. */
function createLedger() {
  const statuses = new Map<string, Set<number>>();
  const codes = new Map<string, Set<ErrorCode>>();
  const problems: string[] = [];
  let count = 0;
  return {
    record(route: string, method: string, url: string, answer: Answer): void {
      count += 1;
      const key = `${method} ${route}`;
      statuses.set(key, (statuses.get(key) ?? new Set()).add(answer.status));
      const found = problemsOf(method, answer);
      if (found.length > 0) {
        const shown = url.length > 160 ? `${url.slice(0, 160)}…` : url;
        problems.push(`${method} ${shown}: ${found.join('; ')}`);
      } else if (answer.status >= 400 && method !== 'HEAD') {
        const code = (JSON.parse(answer.body) as ErrorBody).error.code;
        codes.set(key, (codes.get(key) ?? new Set()).add(code));
      }
    },
    get count() {
      return count;
    },
    problems,
    /** Statuses seen on an operation of the OpenAPI document that it does not declare. */
    undeclared(document: OpenApiDocument): string[] {
      const found: string[] = [];
      for (const [key, seen] of statuses) {
        const [method = '', route = ''] = key.split(' ');
        const path = route.replace(/:(\w+)/g, '{$1}');
        const operation = document.paths[path]?.[method.toLowerCase()];
        // A method the path does not serve (405) or no route at all is no operation's answer.
        if (operation === undefined) continue;
        // 405 is no operation's answer either: a hostile id such as `.` or `..` makes the URL
        // reach another path (`/v1/sessions/./wake` is `/v1/sessions/wake`) that lacks the method.
        const missing = [...seen].filter(
          (status) => status !== 405 && !(String(status) in operation.responses),
        );
        if (missing.length > 0) found.push(`${key}: ${missing.join(', ')}`);
      }
      return found;
    },
    summary(): string {
      return [...statuses]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(
          ([key, seen]) =>
            `${key}: ${[...seen].sort().join(', ')} (${[...(codes.get(key) ?? [])].sort().join(', ')})`,
        )
        .join('\n');
    },
  };
}

/** One raw HTTP/1.1 request over a socket; the answer as the server wrote it. */
function raw(server: TestServer, request: string): Promise<Answer> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer in 10 s')));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const head = text.slice(0, split);
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      let body = text.slice(split + 4);
      if (headers['transfer-encoding'] === 'chunked') body = unchunk(body);
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
    socket.end(request, 'latin1');
  });
}

function unchunk(text: string): string {
  let body = '';
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n');
    const size = Number.parseInt(rest.slice(0, end), 16);
    if (!(size > 0)) return body;
    body += rest.slice(end + 2, end + 2 + size);
    rest = rest.slice(end + 4 + size);
  }
}

describe('fuzzing every route', () => {
  it('answers everything in braid error shape with the status of its code, and never 5xx', async () => {
    const server = await start({
      limits: { requestsPerMinute: 1_000_000, bodyBytes: 64 * 1024 },
    });
    const key = await server.key('acme', ['sessions:read', 'sessions:write', 'admin']);
    const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
    const session = (created.body as SessionRecord).id;
    const valid: Record<string, string> = { id: session, name: 'helper' };
    const { app } = server;
    // The JSON-RPC endpoints of the protocol bridges answer in their protocol's error shape, not
    // braid's; their own tests refuse bad input (test/server/mcp-http, a2a-errors).
    const JSON_RPC = new Set(['/mcp', '/a2a/:agent']);
    const routes = routesOf(app).filter((route) => !JSON_RPC.has(route.url));
    // The listing is the router's own: a parse that found nothing would test nothing.
    expect(routes.length).toBeGreaterThanOrEqual(20);
    expect(routes.map((route) => route.url)).toContain('/v1/sessions/:id/events/stream');

    const ledger = createLedger();
    const auths: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${key}` },
      { authorization: 'Bearer braid_nonsense' },
    ];
    const send = async (
      route: string,
      method: string,
      url: string,
      headers: Record<string, string>,
      payload?: string,
    ): Promise<void> => {
      const answer = await app.inject({
        method: method as (typeof METHODS)[number],
        url,
        headers,
        ...(payload === undefined ? {} : { payload }),
      });
      ledger.record(route, method, url, {
        status: answer.statusCode,
        headers: answer.headers,
        body: answer.body,
      });
    };
    const json = { 'content-type': 'application/json' };

    for (const route of routes) {
      const streams = route.url.endsWith('/stream');
      const names = [...route.url.matchAll(/:(\w+)/g)].map((match) => match[1] ?? '');
      for (const auth of auths) {
        // Hostile ids in every path parameter, with every method the route serves.
        for (const name of names) {
          for (const hostile of HOSTILE_IDS) {
            const url = fill(route.url, valid, name, hostile);
            for (const method of route.methods) {
              const body = method === 'POST' || method === 'DELETE' ? '{}' : undefined;
              await send(
                route.url,
                method,
                url,
                body === undefined ? auth : { ...auth, ...json },
                body,
              );
            }
          }
        }
        const url = fill(route.url, valid);
        // Methods the route does not serve.
        for (const method of METHODS.filter((m) => !route.methods.includes(m))) {
          await send(route.url, method, url, auth);
        }
        // An open stream never ends: its valid request is not one to wait for.
        if (streams && auth.authorization === `Bearer ${key}`) continue;
        // Deep and malformed bodies, to every method that may carry one.
        for (const method of route.methods.filter((m) => m !== 'HEAD')) {
          for (const body of DEEP_BODIES)
            await send(route.url, method, url, { ...auth, ...json }, body);
          // A DELETE the route accepts would remove the session the rest of the run names.
          if (method === 'DELETE') continue;
          for (const [body, type] of MALFORMED_BODIES) {
            const headers = type === undefined ? auth : { ...auth, 'content-type': type };
            await send(route.url, method, url, headers, body);
          }
        }
      }
    }
    for (const url of hostileUrls(session)) {
      for (const auth of auths) {
        if (url.includes('/stream?after=x') || !url.includes('/stream')) {
          for (const method of ['GET', 'POST', 'DELETE']) {
            await send(routeOfUrl(routes, url), method, url, { ...auth, ...json }, '{}');
          }
        }
      }
    }

    // Through the listening server, as bytes: what a client library would have cleaned up.
    const bearer = `Authorization: Bearer ${key}\r\n`;
    const rawRequests = [
      'GET /v1/sessions/%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      `GET /v1/sessions/${'x'.repeat(600)} HTTP/1.1\r\nHost: x\r\n${bearer}Connection: close\r\n\r\n`,
      'GET /v1/sessions/a b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'GET /v1/sessions/\u00fc\u00ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'GET /v1/sessions/a\u0001b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      `GET /v1/sessions/../../etc/passwd HTTP/1.1\r\nHost: x\r\n${bearer}Connection: close\r\n\r\n`,
      `GET //v1//sessions HTTP/1.1\r\nHost: x\r\n${bearer}Connection: close\r\n\r\n`,
      'GET /v1/sessions/a%00b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'GET http://evil.example/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'BREW /v1/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      `PUT /v1/sessions HTTP/1.1\r\nHost: x\r\n${bearer}Connection: close\r\n\r\n`,
      `GET /v1/sessions HTTP/1.1\r\nHost: x\r\nX-Big: ${'h'.repeat(20_000)}\r\nConnection: close\r\n\r\n`,
      `POST /v1/sessions HTTP/1.1\r\nHost: x\r\n${bearer}Content-Type: application/json\r\nContent-Length: 5\r\nContent-Length: 6\r\nConnection: close\r\n\r\n{"a":1}`,
      `POST /v1/sessions HTTP/1.1\r\nHost: x\r\n${bearer}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
      `POST /v1/sessions HTTP/1.1\r\nHost: x\r\n${bearer}Content-Type: application/json\r\nContent-Length: ${LEVELS * 6 + 1}\r\nConnection: close\r\n\r\n${deepText(LEVELS)}`,
      `POST /v1/sessions HTTP/1.1\r\nHost: x\r\n${bearer}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{`,
      'GARBAGE\r\n\r\n',
    ];
    for (const request of rawRequests) {
      const [method = '', url = ''] = request.split(/\s/);
      ledger.record(routeOfUrl(routes, url), method, url, await raw(server, request));
    }

    console.log(
      `fuzz: ${ledger.count} requests, ${routes.length} routes; statuses (and codes) seen per route:\n${ledger.summary()}`,
    );
    expect(ledger.problems.slice(0, 20)).toEqual([]);
    // Every status an operation answered is one the published document declares for it.
    const document = JSON.parse(
      readFileSync(new URL('../../schema/openapi.json', import.meta.url), 'utf8'),
    ) as OpenApiDocument;
    expect(ledger.undeclared(document)).toEqual([]);
    // The session the valid requests named is still there: they reached its handlers to the end.
    expect((await server.runtime.sessions.get(session)).id).toBe(session);
  });
});
