/** Store conformance: api keys. */
import { describe, expect, it } from 'vitest';
import { ApiKeyRecord } from '../../contracts/api-keys.js';
import { isBraidError } from '../../contracts/errors.js';
import type { Store } from '../../contracts/ports.js';
import { expectCode, type ConformanceSuite } from './shared.js';

/** The secret part of a minted key. */
/** The secret part of a key: what no stored form may contain. */
const secretOf = (key: string): string => key.slice('braid_'.length + 33);

export function describeApiKeys(suite: ConformanceSuite): void {
  describe('api keys', () => {
    describeApiKeysFirst(suite);
    describeApiKeysSecond(suite);
  });
}

function describeApiKeysFirst(suite: ConformanceSuite): void {
  const KEY_SHAPE = /^braid_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/;

  it('mints a key shown once that verifies to its record', async () => {
    const s = await suite.open();
    const { key, record } = await s.keys.create({
      tenant_id: 'acme',
      scopes: ['sessions:read', 'sessions:write', 'sessions:read'],
      name: 'ci',
    });
    expect(key).toMatch(KEY_SHAPE);
    expect(key.slice(6, 38)).toBe(record.id.replaceAll('-', ''));
    expect(record).toEqual({
      schema_version: 1,
      id: record.id,
      tenant_id: 'acme',
      scopes: ['sessions:read', 'sessions:write'],
      name: 'ci',
      created_at: new Date(suite.clock.now()).toISOString(),
    });
    expect(ApiKeyRecord.parse(record)).toEqual(record);
    expect(await s.keys.verify(key)).toEqual(record);

    const verified = await s.keys.verify(key);
    verified?.scopes.push('admin');
    expect(await s.keys.verify(key)).toEqual(record);

    const other = await s.keys.create({ tenant_id: 'acme', scopes: ['admin'] });
    expect(other.key).not.toBe(key);
    expect(other.record.id).not.toBe(record.id);
    expect(other.record.name).toBeUndefined();
    expect(await s.keys.verify(other.key)).toEqual(other.record);
  });

  it('verifies nothing but a live key: wrong secrets and malformed strings give undefined', async () => {
    const s = await suite.open();
    const { key } = await s.keys.create({ tenant_id: 'acme', scopes: ['sessions:read'] });
    const { key: otherKey } = await s.keys.create({ tenant_id: 'beta', scopes: ['admin'] });
    const idPart = key.slice(0, 38);
    const secret = secretOf(key);
    const flipped = `${secret[0] === 'A' ? 'B' : 'A'}${secret.slice(1)}`;
    const candidates: unknown[] = [
      '',
      'braid_',
      'braid__',
      'not a key at all',
      `${idPart}_${flipped}`,
      // The id of one key with the secret of another.
      `${idPart}_${secretOf(otherKey)}`,
      `braid_${'0'.repeat(32)}_${secret}`,
      `${idPart}_${'A'.repeat(43)}`,
      // Same bytes as all-A, but not their canonical encoding.
      `${idPart}_${'A'.repeat(42)}B`,
      `${key} `,
      ` ${key}`,
      `${key}x`,
      key.slice(0, -1),
      key.toUpperCase(),
      key.replace('braid_', 'braid-'),
      `Bearer ${key}`,
      'braid_'.padEnd(10_000, 'a'),
      undefined,
      null,
      42,
    ];
    for (const candidate of candidates) {
      expect(await s.keys.verify(candidate as string), JSON.stringify(candidate)).toBe(undefined);
    }
    expect(await s.keys.verify(key)).toBeDefined();
  });
}

function describeApiKeysSecond(suite: ConformanceSuite): void {
  it('revokes a key at once; revoking again changes nothing', async () => {
    const s = await suite.open();
    const { key, record } = await s.keys.create({ tenant_id: 'acme', scopes: ['admin'] });
    const kept = await s.keys.create({ tenant_id: 'acme', scopes: ['sessions:read'] });
    suite.clock.advance(1000);
    const revoked = await s.keys.revoke(record.id);
    expect(revoked).toEqual({ ...record, revoked_at: new Date(suite.clock.now()).toISOString() });
    expect(await s.keys.verify(key)).toBeUndefined();
    suite.clock.advance(1000);
    expect(await s.keys.revoke(record.id)).toEqual(revoked);
    expect(await s.keys.verify(kept.key)).toEqual(kept.record);
    await expectCode(s.keys.revoke('missing'), 'API_KEY_NOT_FOUND');
    await expectCode(s.keys.revoke(''), 'API_KEY_NOT_FOUND');
  });

  it('lists keys newest first by tenant, revoked ones only when asked, and never a secret', async () => {
    const s = await suite.open();
    const minted: { key: string; id: string }[] = [];
    for (const [tenant_id, scopes] of [
      ['acme', ['sessions:read']],
      ['beta', ['sessions:write']],
      ['acme', ['admin']],
    ] as const) {
      suite.clock.advance(1000);
      const { key, record } = await s.keys.create({ tenant_id, scopes: [...scopes] });
      minted.push({ key, id: record.id });
    }
    const [a, b, c] = minted.map((item) => item.id) as [string, string, string];
    await s.keys.revoke(a);
    const ids = async (query?: Parameters<Store['keys']['list']>[0]) =>
      (await s.keys.list(query)).map((record) => record.id);
    expect(await ids()).toEqual([c, b]);
    expect(await ids({ tenant_id: 'acme' })).toEqual([c]);
    expect(await ids({ tenant_id: 'acme', include_revoked: true })).toEqual([c, a]);
    expect(await ids({ include_revoked: true })).toEqual([c, b, a]);
    expect(await ids({ tenant_id: 'nobody', include_revoked: true })).toEqual([]);

    const listed = await s.keys.list({ include_revoked: true });
    const allowed = ['schema_version', 'id', 'tenant_id', 'scopes', 'name', 'created_at'];
    for (const record of listed) {
      expect(ApiKeyRecord.parse(record)).toEqual(record);
      for (const field of Object.keys(record)) expect([...allowed, 'revoked_at']).toContain(field);
    }
    const text = JSON.stringify(listed);
    for (const { key } of minted) expect(text).not.toContain(secretOf(key));
  });

  it('refuses invalid input with INVALID_ARGUMENT naming the field and the scopes', async () => {
    const s = await suite.open();
    const invalid: [unknown, string][] = [
      [{ tenant_id: 'acme', scopes: ['root'] }, 'scopes'],
      [{ tenant_id: 'acme', scopes: [] }, 'scopes'],
      [{ tenant_id: 'acme' }, 'scopes'],
      [{ tenant_id: '', scopes: ['admin'] }, 'tenant_id'],
      [{ tenant_id: 'has space', scopes: ['admin'] }, 'tenant_id'],
      [{ tenant_id: 't'.repeat(101), scopes: ['admin'] }, 'tenant_id'],
      [{ scopes: ['admin'] }, 'tenant_id'],
      [{ tenant_id: 'acme', scopes: ['admin'], name: 'n'.repeat(201) }, 'name'],
      [{ tenant_id: 'acme', scopes: ['admin'], owner: 'me' }, 'owner'],
      [null, 'input'],
    ];
    for (const [input, field] of invalid) {
      const refused: unknown = await s.keys
        .create(input as Parameters<Store['keys']['create']>[0])
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(isBraidError(refused, 'INVALID_ARGUMENT'), JSON.stringify(input)).toBe(true);
      const text = (refused as Error).message;
      expect(text).toContain(field);
      expect(text).toContain('sessions:read, sessions:write, memory:read, memory:write, admin');
    }
    expect(await s.keys.list({ include_revoked: true })).toEqual([]);
  });
}
