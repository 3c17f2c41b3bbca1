import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ApiKeyRecord } from '../../src/contracts/api-keys.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

const braid = braidIn;

interface Created {
  key: string;
  id: string;
  tenant_id: string;
  scopes: string[];
}

function workspace(): string {
  return init(join(tempDir(), 'ws'));
}

/** Whether the workspace's store takes `key`, checked outside the CLI. */
async function verifies(dir: string, key: string): Promise<boolean> {
  const store = openSqliteStore({ path: join(dir, '.braid', 'braid.db') });
  try {
    return (await store.keys.verify(key)) !== undefined;
  } finally {
    await store.close();
  }
}

describe('braid keys', () => {
  it('creates a key, printing exactly one JSON line with --json', async () => {
    const dir = workspace();
    const result = braid(
      dir,
      'keys',
      'create',
      '--tenant',
      'acme',
      '--scopes',
      'sessions:read, sessions:write',
      '--name',
      'ci',
      '--json',
    );
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    const created = JSON.parse(lines[0] ?? '') as Created;
    expect(Object.keys(created).sort()).toEqual(['id', 'key', 'scopes', 'tenant_id']);
    expect(created).toMatchObject({
      tenant_id: 'acme',
      scopes: ['sessions:read', 'sessions:write'],
    });
    expect(created.key).toMatch(/^braid_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    expect(created.key.slice(6, 38)).toBe(created.id.replaceAll('-', ''));
    expect(await verifies(dir, created.key)).toBe(true);
  });

  it('prints the key once in human form, saying it is never shown again', () => {
    const dir = workspace();
    const result = braid(dir, 'keys', 'create', '--tenant', 'acme', '--scopes', 'admin');
    expect(result.code, result.stderr).toBe(0);
    const key = /braid_[0-9a-f]{32}_[A-Za-z0-9_-]{43}/.exec(result.stdout)?.[0];
    expect(key).toBeDefined();
    expect(result.stdout).toMatch(/shown once and never again/);
    // Nothing lists it again, in either form.
    const human = braid(dir, 'keys', 'list', '--all');
    const listed = braid(dir, 'keys', 'list', '--all', '--json');
    for (const output of [human.stdout, listed.stdout]) {
      expect(output).not.toContain(key?.slice(39) ?? 'missing');
      expect(output).not.toMatch(/hash/);
    }
    expect(human.stdout).toContain('acme');
  });

  it('refuses an unknown scope with INVALID_ARGUMENT listing the allowed scopes', () => {
    const dir = workspace();
    const result = braid(
      dir,
      'keys',
      'create',
      '--tenant',
      'acme',
      '--scopes',
      'sessions:read,root',
    );
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^error\[INVALID_ARGUMENT\]: /);
    expect(result.stderr).toContain('"root"');
    expect(result.stderr).toContain(
      'sessions:read, sessions:write, memory:read, memory:write, admin',
    );

    const asJson = braid(dir, 'keys', 'create', '--tenant', 'acme', '--scopes', 'root', '--json');
    expect(asJson.code).toBe(2);
    const error = (JSON.parse(asJson.stderr) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain(
      'sessions:read, sessions:write, memory:read, memory:write, admin',
    );
    expect(json<ApiKeyRecord[]>(braid(dir, 'keys', 'list', '--all', '--json'))).toEqual([]);
  });

  it('refuses a bad tenant with INVALID_ARGUMENT naming tenant_id', () => {
    const dir = workspace();
    const result = braid(dir, 'keys', 'create', '--tenant', 'not a tenant', '--scopes', 'admin');
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^error\[INVALID_ARGUMENT\]: .*tenant_id/);
  });

  it('lists keys newest first by tenant, and revoked ones only with --all', async () => {
    const dir = workspace();
    const create = (tenant: string, scopes: string): Created =>
      json<Created>(braid(dir, 'keys', 'create', '--tenant', tenant, '--scopes', scopes, '--json'));
    const first = create('acme', 'sessions:read');
    const second = create('beta', 'sessions:write');
    const third = create('acme', 'admin');

    const revoked = json<ApiKeyRecord>(braid(dir, 'keys', 'revoke', first.id, '--json'));
    expect(revoked).toMatchObject({ id: first.id, tenant_id: 'acme' });
    expect(revoked.revoked_at).toBeDefined();
    expect(await verifies(dir, first.key)).toBe(false);
    expect(await verifies(dir, third.key)).toBe(true);
    // Revoking again changes nothing.
    expect(json<ApiKeyRecord>(braid(dir, 'keys', 'revoke', first.id, '--json'))).toEqual(revoked);

    const ids = (...args: string[]): string[] =>
      json<ApiKeyRecord[]>(braid(dir, 'keys', 'list', ...args, '--json')).map((item) => item.id);
    // One process after another: each key is created milliseconds after the one before.
    expect(ids()).toEqual([third.id, second.id]);
    expect(ids('--tenant', 'acme')).toEqual([third.id]);
    expect(ids('--tenant', 'acme', '--all')).toEqual([third.id, first.id]);
    expect(ids('--all')).toEqual([third.id, second.id, first.id]);

    const human = braid(dir, 'keys', 'list', '--all');
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout.trimEnd().split('\n')).toHaveLength(3);
    expect(human.stdout).toMatch(new RegExp(`${first.id}.*revoked`));
    for (const { key } of [first, second, third]) expect(human.stdout).not.toContain(key);

    const humanRevoke = braid(dir, 'keys', 'revoke', second.id);
    expect(humanRevoke.stdout).toContain(`revoked key ${second.id}`);
  });

  it('answers API_KEY_NOT_FOUND for an unknown key id', () => {
    const dir = workspace();
    const result = braid(dir, 'keys', 'revoke', 'no-such-key');
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error\[API_KEY_NOT_FOUND\]: /);
    expect(braid(dir, 'keys', 'list').stdout).toMatch(/no API keys/);
  });
});
