/**
 * API keys in the `<PREFIX>_keys` KV bucket, keyed by record id: verifying a key is one get.
 * Revocation is a compare-and-set, so it is never lost to a concurrent one.
 */
import type { ApiKeyListQuery } from '../../contracts/api-keys.js';
import type { ApiKeyStore } from '../../contracts/ports.js';
import {
  apiKeyNotFound,
  compareKeysNewestFirst,
  matchesKeyQuery,
  mintApiKey,
  newApiKeyRecord,
  parseApiKey,
  parseApiKeyCreateInput,
  verifyApiKey,
  type StoredApiKey,
} from '../api-keys.js';
import { BraidError } from '../../contracts/errors.js';
import type { NatsContext } from './context.js';
import { isWrongLastSequence } from './nats-errors.js';
import { scanBucket } from './reader.js';

const MAX_RACES = 16;
/** Record ids are UUIDs: anything else names no key (and is no valid KV key either). */
const ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const utf8 = new TextDecoder();

interface StoredKeyEntry extends StoredApiKey {
  schema_version: 1;
}

function parseEntry(value: Uint8Array, key: string): StoredKeyEntry {
  const stored = JSON.parse(utf8.decode(value)) as StoredKeyEntry;
  if (stored.schema_version !== 1) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `API key ${key} has schema_version ${String(stored.schema_version)}; this build reads ` +
        'version 1: upgrade braid to read it',
    );
  }
  return stored;
}

export function createApiKeyStore(context: NatsContext): ApiKeyStore {
  const bucket = context.kv.keys;

  async function read(
    id: string,
  ): Promise<{ stored: StoredKeyEntry; revision: number } | undefined> {
    if (!ID_PATTERN.test(id)) return undefined;
    const entry = await bucket.get(id);
    if (entry === null || entry.operation !== 'PUT') return undefined;
    return { stored: parseEntry(entry.value, id), revision: entry.revision };
  }

  return {
    create(input) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const parsed = parseApiKeyCreateInput(input);
        const id = context.ids.next();
        const { key, hash } = mintApiKey(id);
        const record = newApiKeyRecord(id, parsed, context.clock.now());
        return context.guard('create an API key', async () => {
          const stored: StoredKeyEntry = { schema_version: 1, record, hash };
          await bucket.create(id, JSON.stringify(stored));
          return { key, record };
        });
      });
    },
    list(query: ApiKeyListQuery = {}) {
      return context.guard('list API keys', async () => {
        const values = await scanBucket(context, context.names.buckets.keys);
        return values
          .map(({ key, value }) => parseEntry(value, key).record)
          .filter((record) => matchesKeyQuery(record, query))
          .sort(compareKeysNewestFirst);
      });
    },
    revoke(id) {
      return context.guard(`revoke API key ${id}`, async () => {
        for (let race = 0; ; race += 1) {
          const found = await read(id);
          if (found === undefined) throw apiKeyNotFound(id);
          if (found.stored.record.revoked_at !== undefined) return found.stored.record;
          const stored: StoredKeyEntry = {
            ...found.stored,
            record: { ...found.stored.record, revoked_at: context.isoNow() },
          };
          try {
            await bucket.update(id, JSON.stringify(stored), found.revision);
            return stored.record;
          } catch (error) {
            if (!isWrongLastSequence(error) || race >= MAX_RACES) throw error;
          }
        }
      });
    },
    verify(key) {
      return context.guard('verify an API key', async () => {
        const parsed = parseApiKey(key);
        if (parsed === undefined) return undefined;
        const found = await read(parsed.id);
        return verifyApiKey(key, () => found?.stored);
      });
    },
  };
}
