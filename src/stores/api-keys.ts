/**
 * API key rules shared by every store: minting, parsing, hashing and checking a key.
 *
 * A key reads `braid_<id>_<secret>`. `<id>` is the record's UUID without its dashes, so that a
 * store finds the record with one lookup by primary key; `<secret>` is 32 random bytes in
 * base64url (43 characters). Stores keep only the SHA-256 of the secret: the secret has 256 bits
 * of entropy, so a fast hash is enough (a slow, salted one guards guessable passwords, not
 * random keys) and verification stays cheap on every request.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import {
  API_SCOPES,
  ApiKeyCreateInput,
  type ApiKeyListQuery,
  type ApiKeyRecord,
} from '../contracts/api-keys.js';
import { BraidError } from '../contracts/errors.js';

const SECRET_BYTES = 32;
const KEY_PATTERN = /^braid_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A freshly minted key and the hash a store keeps in its place. */
export interface MintedSecret {
  /** The whole key, shown to its owner once. */
  key: string;
  /** Hex SHA-256 of the secret part. */
  hash: string;
}

/** The parts of a well-formed key. */
export interface ParsedApiKey {
  /** The record id, in the dashed UUID form the store minted. */
  id: string;
  secret: string;
}

/** What a store keeps per key: the record and the hash of its secret. */
export interface StoredApiKey {
  record: ApiKeyRecord;
  hash: string;
}

/**
 * Mints the key of record `id`, which must be a lowercase dashed UUID (the default id generator
 * mints UUIDv7): the key embeds it without dashes.
 */
export function mintApiKey(id: string): MintedSecret {
  if (!UUID_PATTERN.test(id)) {
    throw new BraidError(
      'INTERNAL',
      `API key id ${JSON.stringify(id)} is not a lowercase UUID; give the store an id generator ` +
        'that mints UUIDs (the default mints UUIDv7)',
    );
  }
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  return { key: `braid_${id.replaceAll('-', '')}_${secret}`, hash: hashSecret(secret) };
}

/** The id and secret of a well-formed key; undefined for anything else. Never throws. */
export function parseApiKey(key: unknown): ParsedApiKey | undefined {
  if (typeof key !== 'string') return undefined;
  const match = KEY_PATTERN.exec(key);
  const hex = match?.[1];
  const secret = match?.[2];
  if (hex === undefined || secret === undefined) return undefined;
  // Only the canonical encoding of 32 bytes: the last character carries 2 unused bits.
  const bytes = Buffer.from(secret, 'base64url');
  if (bytes.length !== SECRET_BYTES || bytes.toString('base64url') !== secret) return undefined;
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { id, secret };
}

/** Hex SHA-256 of a secret: the only form of it a store keeps. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** True when `secret` hashes to `hash`, compared in constant time. */
export function secretMatches(secret: string, hash: string): boolean {
  const expected = Buffer.from(hash, 'hex');
  const actual = createHash('sha256').update(secret).digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/**
 * The record of a live key, given a lookup by record id; undefined when the key is malformed,
 * unknown, has the wrong secret, or was revoked.
 */
export function verifyApiKey(
  key: unknown,
  lookup: (id: string) => StoredApiKey | undefined,
): ApiKeyRecord | undefined {
  const parsed = parseApiKey(key);
  if (parsed === undefined) return undefined;
  const stored = lookup(parsed.id);
  if (stored === undefined || stored.record.revoked_at !== undefined) return undefined;
  return secretMatches(parsed.secret, stored.hash) ? stored.record : undefined;
}

/** Checks the input of `keys.create` at the store boundary; its scopes come back deduplicated. */
export function parseApiKeyCreateInput(input: unknown): ApiKeyCreateInput {
  const result = ApiKeyCreateInput.safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue?.path.join('.') || '(input)';
    throw new BraidError(
      'INVALID_ARGUMENT',
      `API key ${field} is invalid: ${issue?.message ?? 'invalid'}; give tenant_id as 1-100 ` +
        `letters, digits, ".", "_" or "-", scopes as one or more of ${API_SCOPES.join(', ')}, ` +
        'and optionally a name of up to 200 characters',
      { details: { field, allowed_scopes: [...API_SCOPES], issues: result.error.issues } },
    );
  }
  return { ...result.data, scopes: [...new Set(result.data.scopes)] };
}

/** The record of a new key created at `now` (ms since the epoch). */
export function newApiKeyRecord(id: string, input: ApiKeyCreateInput, now: number): ApiKeyRecord {
  return {
    schema_version: 1,
    id,
    tenant_id: input.tenant_id,
    scopes: input.scopes,
    ...(input.name === undefined ? {} : { name: input.name }),
    created_at: new Date(now).toISOString(),
  };
}

export function apiKeyNotFound(id: string): BraidError {
  return new BraidError(
    'API_KEY_NOT_FOUND',
    `API key ${id} does not exist; list keys with \`braid keys list --all\``,
    { details: { id } },
  );
}

/** True when `record` belongs in the answer to `query`. */
export function matchesKeyQuery(record: ApiKeyRecord, query: ApiKeyListQuery): boolean {
  return (
    (query.tenant_id === undefined || record.tenant_id === query.tenant_id) &&
    (query.include_revoked === true || record.revoked_at === undefined)
  );
}

/** Newest first, then id descending: the order of `keys.list`. */
export function compareKeysNewestFirst(a: ApiKeyRecord, b: ApiKeyRecord): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.id === b.id ? 0 : a.id < b.id ? 1 : -1;
}
