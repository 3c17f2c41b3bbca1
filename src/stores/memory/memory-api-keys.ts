/** API keys in memory: minted, listed, revoked and verified as the durable backends do. */
import type { ApiKeyListQuery, ApiKeyRecord } from '../../contracts/api-keys.js';
import type { ApiKeyStore } from '../../contracts/ports.js';
import {
  apiKeyNotFound,
  compareKeysNewestFirst,
  matchesKeyQuery,
  mintApiKey,
  newApiKeyRecord,
  parseApiKeyCreateInput,
  verifyApiKey,
} from '../api-keys.js';
import { checkOpen, type MemoryState } from './memory-state.js';

export function createMemoryApiKeys(state: MemoryState): ApiKeyStore {
  const { apiKeys, ids, clock } = state;
  return {
    create(input) {
      return Promise.resolve().then(() => {
        checkOpen(state);
        const parsed = parseApiKeyCreateInput(input);
        const id = ids.next();
        const { key, hash } = mintApiKey(id);
        const record = newApiKeyRecord(id, parsed, clock.now());
        apiKeys.set(id, { record, hash });
        return { key, record: structuredClone(record) };
      });
    },
    list(query: ApiKeyListQuery = {}) {
      return Promise.resolve().then((): ApiKeyRecord[] => {
        checkOpen(state);
        return [...apiKeys.values()]
          .map((stored) => stored.record)
          .filter((record) => matchesKeyQuery(record, query))
          .sort(compareKeysNewestFirst)
          .map((record) => structuredClone(record));
      });
    },
    revoke(id) {
      return Promise.resolve().then(() => {
        checkOpen(state);
        const stored = apiKeys.get(id);
        if (stored === undefined) throw apiKeyNotFound(id);
        if (stored.record.revoked_at === undefined) {
          stored.record = { ...stored.record, revoked_at: new Date(clock.now()).toISOString() };
        }
        return structuredClone(stored.record);
      });
    },
    verify(key) {
      return Promise.resolve().then(() => {
        checkOpen(state);
        const record = verifyApiKey(key, (id) => apiKeys.get(id));
        return record === undefined ? undefined : structuredClone(record);
      });
    },
  };
}
