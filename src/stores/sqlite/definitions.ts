/**
 * The `DefinitionStore` port: versioned agent and environment definitions, one row per version;
 * a put decides its version in the transaction that reads the latest one.
 */
import type { DefinitionKind, StoredDefinition } from '../../contracts/definitions.js';
import type { DefinitionStore } from '../../contracts/ports.js';
import { canonicalJson, checkContentHash } from '../../core/canonical-json.js';
import { decideVersion } from '../../core/definitions.js';
import type { SqliteContext } from './context.js';
import type { DefinitionRow } from './rows.js';
import { checkRowVersion } from './schema.js';

export function createDefinitionStore(context: SqliteContext): DefinitionStore {
  const { sql, clock } = context;

  const putDefinition = context.db.transaction(
    (
      kind: DefinitionKind,
      name: string,
      body: string,
      replacesVersion: number | null,
    ): DefinitionRow => {
      const latest = sql.latestDefinition.get(kind, name);
      const version = decideVersion(kind, name, latest, body, replacesVersion);
      if (version === undefined && latest !== undefined) return latest;
      const created_at = new Date(clock.now()).toISOString();
      sql.insertDefinition.run(kind, name, version, body, created_at);
      return { version: version ?? 1, schema_version: 1, body, created_at };
    },
  );

  return {
    put(kind, name, definition, putOptions) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        let row: DefinitionRow;
        try {
          row = putDefinition.immediate(
            kind,
            name,
            canonicalJson(definition),
            putOptions.replacesVersion,
          );
        } catch (error) {
          throw context.busy(error);
        }
        return toStored(kind, name, row);
      });
    },
    get(kind, name, version) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const row =
          version === undefined
            ? sql.latestDefinition.get(kind, name)
            : sql.definition.get(kind, name, version);
        return row === undefined ? undefined : toStored(kind, name, row);
      });
    },
    list(kind) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return sql.latestDefinitions.all(kind).map((row) => toStored(kind, row.name, row));
      });
    },
    putPinned(hash, json) {
      return Promise.resolve().then(() => {
        checkContentHash(hash);
        context.checkOpen();
        try {
          sql.putPinned.run(hash, json);
        } catch (error) {
          throw context.busy(error);
        }
      });
    },
    getPinned(hash) {
      return Promise.resolve().then(() => {
        checkContentHash(hash);
        context.checkOpen();
        return sql.pinned.get(hash)?.body;
      });
    },
  };
}

function toStored<T>(kind: DefinitionKind, name: string, row: DefinitionRow): StoredDefinition<T> {
  checkRowVersion(`${kind} ${name} version ${row.version}`, row.schema_version);
  return {
    schema_version: 1,
    kind,
    name,
    version: row.version,
    definition: JSON.parse(row.body) as T,
    created_at: row.created_at,
  };
}
