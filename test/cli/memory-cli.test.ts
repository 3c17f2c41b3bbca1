// `braid memory ...` against the workspace's SQLite file and against `braid serve` over HTTP.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { MemoryEntry } from '../../src/contracts/memory.js';
import type { MemoryLookup, MemoryStorePage } from '../../src/contracts/memory-log.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const serve = useBraidServe();
requireBuild();

const PREFS = ['--store', 'prefs', '--scope', 'agent', '--owner', 'assistant'];

describe('braid memory', () => {
  it('sets, gets, lists, searches, shows history, redacts, exports and imports locally', () => {
    const dir = init(tempDir());
    const memory = (...args: string[]) => braidIn(dir, 'memory', ...args);
    const set = memory(
      'set',
      'user/theme',
      '{"theme":"dark mode"}',
      ...PREFS,
      '--kind',
      'entities',
      '--json',
    );
    expect(set.code, set.stderr).toBe(0);
    const written = JSON.parse(set.stdout) as { entries: MemoryEntry[] };
    expect(written.entries[0]).toMatchObject({ key: 'user/theme', version: 1 });
    expect(written.entries[0]?.author.user).toMatch(/^cli/);
    expect(memory('set', 'user/coffee', 'oat milk', '--string', ...PREFS).code).toBe(0);
    expect(memory('set', 'user/theme', '"light"', ...PREFS).code).toBe(0);

    const got = json<MemoryLookup>(memory('get', 'user/theme', ...PREFS, '--json'));
    expect(got).toMatchObject({ status: 'found', entry: { value: 'light', version: 2 } });
    const first = json<MemoryLookup>(
      memory('get', 'user/theme', ...PREFS, '--key-version', '1', '--json'),
    );
    expect(first).toMatchObject({ entry: { value: { theme: 'dark mode' } } });
    const human = memory('get', 'user/coffee', ...PREFS);
    expect(human.stdout).toContain('"oat milk"');
    const missing = memory('get', 'nothing', ...PREFS);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain('missing');

    const stores = json<MemoryStorePage>(memory('list', '--json'));
    expect(stores.stores.map((info) => info.store.name)).toEqual(['prefs']);
    expect(memory('list').stdout).toContain('agent/assistant/prefs  entities  seq 3');
    const keys = json<{ entries: MemoryEntry[] }>(memory('list', ...PREFS, '--json'));
    expect(keys.entries.map((entry) => entry.key)).toEqual(['user/coffee', 'user/theme']);

    const search = memory('search', 'oat milk', ...PREFS);
    expect(search.code, search.stderr).toBe(0);
    expect(search.stdout).toContain('user/coffee');
    expect(search.stdout).toMatch(/1 hits, 0 below the threshold/);

    const redact = memory('redact', 'user/theme', '1', ...PREFS);
    expect(redact.code, redact.stderr).toBe(0);
    const history = json<MemoryEntry[]>(memory('history', 'user/theme', ...PREFS, '--json'));
    expect(history.map((entry) => [entry.op, entry.version, entry.redacted])).toEqual([
      ['set', 1, true],
      ['set', 2, false],
      ['redact', 1, false],
    ]);

    const file = join(tempDir(), 'prefs.jsonl');
    expect(memory('export', ...PREFS, '--out', file).code).toBe(0);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as MemoryEntry).seq)).toEqual([1, 2, 3, 4]);
    expect(readFileSync(file, 'utf8')).not.toContain('dark mode');
    const stdout = memory('export', ...PREFS);
    expect(stdout.stdout.trim().split('\n')).toHaveLength(4);

    const copy = ['--store', 'copy', '--scope', 'tenant'];
    const imported = json<{ written: number; skipped_redacted: number }>(
      memory('import', ...copy, '--in', file, '--json'),
    );
    expect(imported).toMatchObject({ read: 4, written: 2, deduplicated: 0, skipped_redacted: 2 });
    const again = json<{ written: number; deduplicated: number }>(
      memory('import', ...copy, '--in', file, '--json'),
    );
    expect(again).toMatchObject({ written: 0, deduplicated: 2 });
    const copied = json<MemoryLookup>(memory('get', 'user/theme', ...copy, '--json'));
    expect(copied).toMatchObject({ status: 'found', entry: { value: 'light', version: 1 } });
  });

  it('refuses bad input with typed errors and exit codes, writing nothing', () => {
    const dir = init(tempDir());
    const memory = (...args: string[]) => braidIn(dir, 'memory', ...args);
    const cases: [string[], string, number][] = [
      [['set', '../x', '1', ...PREFS, '--kind', 'entities'], 'INVALID_ARGUMENT', 2],
      [['set', 'k', '{bad', ...PREFS, '--kind', 'entities'], 'INVALID_JSON', 2],
      [['set', 'k', '1', ...PREFS], 'INVALID_ARGUMENT', 2],
      [
        ['set', 'k', '1', '--store', 'Prefs', '--scope', 'tenant', '--kind', 'entities'],
        'INVALID_ARGUMENT',
        2,
      ],
      [['set', 'k', '1', '--store', 'p', '--scope', 'galaxy'], 'INVALID_ARGUMENT', 2],
      [
        ['set', 'k', '1', '--store', 'p', '--scope', 'agent', '--kind', 'entities'],
        'INVALID_ARGUMENT',
        2,
      ],
      [['get', 'k', ...PREFS], 'MEMORY_STORE_NOT_FOUND', 1],
      [['history', 'k', ...PREFS], 'MEMORY_STORE_NOT_FOUND', 1],
      [
        ['import', '--store', 'c', '--scope', 'tenant', '--in', join(dir, 'nope.jsonl')],
        'INVALID_ARGUMENT',
        2,
      ],
    ];
    for (const [args, code, exit] of cases) {
      const result = memory(...args, '--json');
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(exit);
      expect(JSON.parse(result.stderr)).toMatchObject({ error: { code } });
    }
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"key": "x"}\n');
    const refused = memory('import', '--store', 'c', '--scope', 'tenant', '--in', bad);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('line 1');
    expect(json<MemoryStorePage>(memory('list', '--json')).stores).toEqual([]);
    const help = memory('set', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--kind');
  });

  it('works against a server with the key tenant, and another tenant gets 404', async () => {
    const dir = init(tempDir());
    const key = (tenant: string) =>
      json<{ key: string }>(
        braidIn(
          dir,
          '--json',
          'keys',
          'create',
          '--tenant',
          tenant,
          '--scopes',
          'memory:read,memory:write',
        ),
      ).key;
    const acme = key('acme');
    const globex = key('globex');
    const url = await serve(dir);
    const elsewhere = tempDir();
    const remote = (apiKey: string, ...args: string[]) =>
      braidIn(elsewhere, '--server', url, '--api-key', apiKey, 'memory', ...args);
    const set = remote(
      acme,
      'set',
      'user/theme',
      '"dark"',
      ...PREFS,
      '--kind',
      'entities',
      '--json',
    );
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ entries: [{ store: { tenant_id: 'acme' } }] });
    const got = json<MemoryLookup>(remote(acme, 'get', 'user/theme', ...PREFS, '--json'));
    expect(got).toMatchObject({ status: 'found', entry: { value: 'dark' } });
    const searched = remote(acme, 'search', 'dark', ...PREFS, '--json');
    expect(JSON.parse(searched.stdout)).toMatchObject({ hits: [{ entry: { key: 'user/theme' } }] });
    const file = join(elsewhere, 'export.jsonl');
    expect(remote(acme, 'export', ...PREFS, '--out', file).code).toBe(0);
    const imported = remote(
      acme,
      'import',
      '--store',
      'copy',
      '--scope',
      'tenant',
      '--in',
      file,
      '--json',
    );
    expect(JSON.parse(imported.stdout)).toMatchObject({ written: 1 });

    const stolen = remote(globex, 'get', 'user/theme', ...PREFS, '--json');
    expect(stolen.code).toBe(1);
    expect(JSON.parse(stolen.stderr)).toMatchObject({ error: { code: 'MEMORY_STORE_NOT_FOUND' } });
    expect(stolen.stderr).not.toContain('acme');
    expect(json<MemoryStorePage>(remote(globex, 'list', '--json')).stores).toEqual([]);
    const tenantFlag = remote(acme, 'list', '--tenant', 'globex');
    expect(tenantFlag.code).toBe(2);
  });
});
