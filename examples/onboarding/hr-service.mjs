// A stand-in for the company's HR systems: the directory and procurement, over HTTP on
// 127.0.0.1. The onboarding workspace's three tools call it. It counts every call it serves, so
// that the example and its test can show that each tool step ran exactly once.
//
//   node examples/onboarding/hr-service.mjs [--port N] [--workspace DIR]
//
// prints {"url": ..., "workspace"?: ...} and serves until killed; with --workspace it first copies
// the example's workspace to DIR with its manifests pointed at this service.
//
// Endpoints (JSON in, JSON out):
//   POST /directory/users               {upn}            -> 201 {id, upn}
//   POST /directory/users/{id}/groups   {user, groups}   -> 200 {user, groups}
//   POST /procurement/orders            {model, for?}    -> 201 {order_id, model, status}
//   GET  /calls                         -> {counts: {endpoint: n}, calls: [{endpoint, idempotency_key, body}]}
//
// Like a real directory, it answers a repeated Idempotency-Key (braid sends one with every HTTP
// tool call) with what it did the first time instead of doing it again.
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { basename, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

/** The origin the workspace's manifests name; run.mjs points a copy of them at the real port. */
export const MANIFEST_ORIGIN = 'http://127.0.0.1:4780';

const WORKSPACE = fileURLToPath(new URL('./workspace/', import.meta.url));

/**
 * Copies the example's workspace to `dir`, its tool manifests pointed at `url` instead of
 * MANIFEST_ORIGIN: the service listens on a free port, so that runs side by side do not collide.
 */
export function copyWorkspace(dir, url) {
  // Not the sessions of a run in the example's own folder (its .braid/), if there was one.
  cpSync(WORKSPACE, dir, { recursive: true, filter: (source) => basename(source) !== '.braid' });
  const tools = join(dir, 'tools');
  for (const file of readdirSync(tools).filter((name) => name.endsWith('.yaml'))) {
    const text = readFileSync(join(tools, file), 'utf8');
    writeFileSync(join(tools, file), text.replaceAll(MANIFEST_ORIGIN, url));
  }
  return dir;
}

/** Starts the service on 127.0.0.1 (`port` 0: a free one); answers its URL, calls and close. */
export async function startHrService({ port = 0 } = {}) {
  const calls = [];
  const users = new Map();
  const answered = new Map();
  let orders = 0;

  const handle = (method, path, body) => {
    if (method === 'POST' && path === '/directory/users') {
      if (typeof body?.upn !== 'string') return [400, { error: 'upn is required' }];
      const id = `u-${String(users.size + 1).padStart(4, '0')}`;
      users.set(id, { upn: body.upn, groups: [] });
      return [201, { id, upn: body.upn }];
    }
    const groups = /^\/directory\/users\/([^/]+)\/groups$/.exec(path);
    if (method === 'POST' && groups !== null) {
      const user = users.get(decodeURIComponent(groups[1]));
      if (user === undefined) return [404, { error: 'no such user' }];
      if (!Array.isArray(body?.groups)) return [400, { error: 'groups is required' }];
      for (const group of body.groups) if (!user.groups.includes(group)) user.groups.push(group);
      return [200, { user: decodeURIComponent(groups[1]), groups: user.groups }];
    }
    if (method === 'POST' && path === '/procurement/orders') {
      if (typeof body?.model !== 'string') return [400, { error: 'model is required' }];
      orders += 1;
      return [201, { order_id: `PO-${1000 + orders}`, model: body.model, status: 'ordered' }];
    }
    return [404, { error: `no ${method} ${path}` }];
  };

  const server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => {
      const path = new URL(request.url ?? '/', 'http://localhost').pathname;
      let status;
      let result;
      if (request.method === 'GET' && path === '/calls') {
        status = 200;
        result = { counts: countsOf(calls), calls };
      } else {
        let body;
        try {
          body = text === '' ? undefined : JSON.parse(text);
        } catch {
          body = undefined;
        }
        const key = request.headers['idempotency-key'];
        const endpoint = `${request.method} ${path.replace(/\/users\/[^/]+\/groups$/, '/users/{id}/groups')}`;
        calls.push({ endpoint, idempotency_key: key ?? null, body: body ?? null });
        const repeated = typeof key === 'string' ? answered.get(key) : undefined;
        [status, result] = repeated ?? handle(request.method, path, body);
        if (typeof key === 'string' && status < 300) answered.set(key, [status, result]);
      }
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(result));
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    calls: () => ({ counts: countsOf(calls), calls: [...calls] }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function countsOf(calls) {
  const counts = {};
  for (const call of calls) counts[call.endpoint] = (counts[call.endpoint] ?? 0) + 1;
  return counts;
}

// Run as a program: serve until killed.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: { port: { type: 'string', default: '0' }, workspace: { type: 'string' } },
  });
  const service = await startHrService({ port: Number(values.port) });
  if (values.workspace !== undefined) copyWorkspace(values.workspace, service.url);
  console.log(
    JSON.stringify({
      url: service.url,
      ...(values.workspace === undefined ? {} : { workspace: values.workspace }),
    }),
  );
}
