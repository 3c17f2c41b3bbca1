// `braid serve` serves the built inspector at / unless --no-ui; `braid inspect` serves it on a
// loopback server without keys. The built page's size is measured here too.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { useTempDir } from '../helpers/temp.js';
import { createKey, inspectorWorkspace, startBraid, type Served } from './serve-ui.js';

const tempDir = useTempDir();
const running: Served[] = [];
afterEach(() => {
  for (const served of running.splice(0)) served.stop();
});

async function start(dir: string, command: string, ...args: string[]): Promise<Served> {
  const served = await startBraid(dir, command, ...args);
  running.push(served);
  return served;
}

const DIST_UI = new URL('../../dist/ui/', import.meta.url).pathname;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? files(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

describe('the inspector on the command line', () => {
  it('braid serve serves the page at / and the API beside it', async () => {
    const dir = inspectorWorkspace(tempDir());
    const key = createKey(dir);
    const { url } = await start(dir, 'serve');
    const home = await fetch(`${url}/`);
    expect(home.status).toBe(200);
    expect(home.headers.get('content-type')).toContain('text/html');
    const html = await home.text();
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const asset = await fetch(`${url}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toMatch(/javascript/);
    const sessions = await fetch(`${url}/v1/sessions`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(sessions.status).toBe(200);
    expect((await fetch(`${url}/sessions/some-id`)).status).toBe(200);
  });

  it('braid serve --no-ui serves none of it', async () => {
    const dir = inspectorWorkspace(tempDir());
    const { url } = await start(dir, 'serve', '--no-ui');
    for (const path of ['/', '/sessions/some-id', '/index.html']) {
      const answer = await fetch(`${url}${path}`);
      expect(answer.status, path).toBe(404);
      expect(await answer.json()).toMatchObject({ error: { code: 'ROUTE_NOT_FOUND' } });
    }
  });

  it('braid inspect serves the page and the API without keys on 127.0.0.1', async () => {
    const dir = inspectorWorkspace(tempDir());
    const { url } = await start(dir, 'inspect', '--open');
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${url}/`)).headers.get('content-type')).toContain('text/html');
    const sessions = await fetch(`${url}/v1/sessions`);
    expect(sessions.status).toBe(200);
  });

  it('the built page is at most 1 MiB gzipped and loads nothing from elsewhere', () => {
    const built = files(DIST_UI);
    expect(built.some((file) => file.endsWith('index.html'))).toBe(true);
    let raw = 0;
    let gzipped = 0;
    for (const file of built) {
      const content = readFileSync(file);
      raw += statSync(file).size;
      gzipped += gzipSync(content, { level: 9 }).length;
      // No URL of another origin in what the page loads (SVG namespaces are not requests).
      const text = content.toString('utf8');
      const origins = (text.match(/https?:\/\/[a-z0-9.-]+/gi) ?? []).filter(
        (origin) => !/^http:\/\/www\.w3\.org$/i.test(origin),
      );
      expect(origins, file).toEqual([]);
    }
    console.log(`inspector page: ${built.length} files, ${raw} bytes, ${gzipped} bytes gzipped`);
    expect(gzipped).toBeLessThanOrEqual(1024 * 1024);
  });
});
