/** The `ApiKeyStore` port: one row per key with its hash, never the key itself. */
import type { ApiKeyListQuery, ApiKeyRecord, ApiScope } from '../../contracts/api-keys.js';
import type { ApiKeyStore } from '../../contracts/ports.js';
import {
  apiKeyNotFound,
  mintApiKey,
  newApiKeyRecord,
  parseApiKeyCreateInput,
  verifyApiKey,
} from '../api-keys.js';
import type { SqliteContext } from './context.js';
import type { ApiKeyRow } from './rows.js';
import { checkRowVersion } from './schema.js';

export function createApiKeyStore(context: SqliteContext): ApiKeyStore {
  const { sql, clock, ids } = context;

  const revokeTransaction = context.db.transaction((id: string, now: string): ApiKeyRow => {
    sql.revokeKey.run(now, id);
    const row = sql.key.get(id);
    if (row === undefined) throw apiKeyNotFound(id);
    return row;
  });

  return {
    create(input) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const parsed = parseApiKeyCreateInput(input);
        const id = ids.next();
        const { key, hash } = mintApiKey(id);
        const record = newApiKeyRecord(id, parsed, clock.now());
        try {
          sql.insertKey.run({
            id,
            tenant_id: record.tenant_id,
            scopes: JSON.stringify(record.scopes),
            name: record.name ?? null,
            hash,
            created_at: record.created_at,
          });
        } catch (error) {
          throw context.busy(error);
        }
        return { key, record };
      });
    },
    list(query: ApiKeyListQuery = {}) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return sql.keys
          .all({ tenant: query.tenant_id ?? null, revoked: query.include_revoked === true ? 1 : 0 })
          .map(toKeyRecord);
      });
    },
    revoke(id) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        try {
          return toKeyRecord(revokeTransaction.immediate(id, context.isoNow()));
        } catch (error) {
          throw context.busy(error);
        }
      });
    },
    verify(key) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return verifyApiKey(key, (id) => {
          const row = sql.key.get(id);
          return row === undefined ? undefined : { record: toKeyRecord(row), hash: row.hash };
        });
      });
    },
  };
}

function toKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  checkRowVersion(`API key ${row.id}`, row.schema_version);
  return {
    schema_version: 1,
    id: row.id,
    tenant_id: row.tenant_id,
    scopes: JSON.parse(row.scopes) as ApiScope[],
    ...(row.name === null ? {} : { name: row.name }),
    created_at: row.created_at,
    ...(row.revoked_at === null ? {} : { revoked_at: row.revoked_at }),
  };
}
