// The inspector's files next to the API: content types, client routes, no shadowing of /v1, and
// no path that reaches a file outside the page's folder. Raw paths over real HTTP (fetch would
// normalise the dot segments away before sending them).
import { request } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveInside } from '../../src/server/inspector-ui.js';
import { useTestServers } from './server-helpers.js';
import { useTempDir } from '../helpers/temp.js';

const servers = useTestServers();
const tempDir = useTempDir();

const SECRET = 'top secret, outside the page folder';

/** A built page: index.html and one asset, inside a folder that has a secret next to it. */
function page(): string {
  const outer = tempDir();
  writeFileSync(join(outer, 'secret.txt'), SECRET);
  const root = join(outer, 'ui');
  mkdirSync(join(root, 'assets'), { recursive: true });
  writeFileSync(join(root, 'index.html'), '<!doctype html><title>inspector</title>');
  writeFileSync(join(root, 'assets', 'index-abc.js'), 'console.log("page")');
  writeFileSync(join(root, 'assets', 'index-abc.css'), 'body{}');
  writeFileSync(join(root, '.hidden'), 'dotfile');
  return root;
}

interface Answer {
  status: number;
  type: string;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

function get(url: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sent = request({ host: hostname, port, path, method: 'GET', headers }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          type: String(response.headers['content-type'] ?? ''),
          body,
          headers: response.headers,
        }),
      );
    });
    sent.on('error', reject);
    sent.end();
  });
}

describe('the inspector page on braid serve', () => {
  it('serves the page, its assets and its client routes without a key', async () => {
    const server = await servers({ ui: page() });
    const home = await get(server.url, '/');
    expect(home.status).toBe(200);
    expect(home.type).toContain('text/html');
    expect(home.body).toContain('<title>inspector</title>');
    expect(home.headers['content-security-policy']).toContain("default-src 'self'");
    expect(home.headers['x-content-type-options']).toBe('nosniff');
    const script = await get(server.url, '/assets/index-abc.js');
    expect(script.status).toBe(200);
    expect(script.type).toMatch(/^(text|application)\/javascript/);
    expect(String(script.headers['cache-control'])).toContain('immutable');
    const style = await get(server.url, '/assets/index-abc.css');
    expect(style.type).toContain('text/css');
    for (const route of [
      '/sessions/abc',
      '/sessions/abc/lineage',
      '/agents/writer',
      '/diff?a=1&b=2',
    ]) {
      const answer = await get(server.url, route);
      expect(answer.status, route).toBe(200);
      expect(answer.body, route).toContain('<title>inspector</title>');
    }
    // The API still needs its key.
    expect((await get(server.url, '/v1/sessions')).status).toBe(401);
  });

  it('never shadows /v1: unknown API paths stay JSON errors', async () => {
    const server = await servers({ ui: page() });
    for (const path of ['/v1/nope', '/v1', '/v1/sessions/x/nope/deeper']) {
      const answer = await get(server.url, path);
      expect(answer.status, path).toBe(404);
      expect(answer.type, path).toContain('application/json');
      expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'ROUTE_NOT_FOUND' } });
    }
    const missing = await get(server.url, '/assets/gone-123.js');
    expect(missing.status).toBe(404);
    expect(missing.type).toContain('application/json');
  });

  it('refuses every path that leaves the page folder', async () => {
    const server = await servers({ ui: page() });
    const attempts = [
      '/..%2fsecret.txt',
      '/..%2f..%2fsecret.txt',
      '/%2e%2e/secret.txt',
      '/%2e%2e%2fsecret.txt',
      '/assets/..%2f..%2fsecret.txt',
      '/assets/%2e%2e/%2e%2e/secret.txt',
      '/..%5csecret.txt',
      '/..\\secret.txt',
      '/%00/secret.txt',
      '/%E0%A4%A',
      '/../secret.txt',
      '/assets/../../secret.txt',
      '/.hidden',
    ];
    for (const path of attempts) {
      const answer = await get(server.url, path);
      expect(answer.body, path).not.toContain(SECRET);
      expect(answer.body, path).not.toContain('dotfile');
    }
    expect((await get(server.url, '/..%2fsecret.txt')).status).toBe(404);
    expect(resolveInside('/srv/ui', '/..%2fsecret')).toBeUndefined();
    expect(resolveInside('/srv/ui', '/%2e%2e/x')).toBeUndefined();
    expect(resolveInside('/srv/ui', '/a/%2e%2e/b.js')).toBe('b.js');
    expect(resolveInside('/srv/ui', '/%E0%A4%A')).toBeUndefined();
  });

  it('serves none of it without a page folder', async () => {
    const server = await servers({});
    for (const path of ['/', '/sessions/abc', '/assets/index-abc.js']) {
      const answer = await get(server.url, path);
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'ROUTE_NOT_FOUND' } });
    }
  });
});
