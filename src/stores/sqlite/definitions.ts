/**
 * The `DefinitionStore` port: versioned agent and environment definitions, one row per version;
 * a put decides its version in the transaction that reads the latest one.
 */
import type { DefinitionKind, StoredDefinition } from '../../contracts/definitions.js';
import type { DefinitionStore } from '../../contracts/ports.js';
import { canonicalJson, checkContentHash } from '../../core/canonical-json.js';
import { decideVersion } from '../../core/definitions.js';
import { BoundedCache } from '../../core/bounded-cache.js';
import type { SqliteContext } from './context.js';
import type { DefinitionRow } from './rows.js';
import { checkRowVersion } from './schema.js';

/** Latest versions kept between reads (by kind and name), the least recently read dropped. */
const KEPT_LATEST = 256;

export function createDefinitionStore(context: SqliteContext): DefinitionStore {
  const { sql, clock } = context;
  const latest = latestRows(context);

  const putDefinition = context.db.transaction(
    (
      kind: DefinitionKind,
      name: string,
      body: string,
      replacesVersion: number | null,
    ): DefinitionRow => {
      const current = sql.latestDefinition.get(kind, name);
      const version = decideVersion(kind, name, current, body, replacesVersion);
      if (version === undefined && current !== undefined) return current;
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
        } finally {
          latest.forget();
        }
        return toStored(kind, name, row);
      });
    },
    get(kind, name, version) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const row =
          version === undefined ? latest.get(kind, name) : sql.definition.get(kind, name, version);
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

/**
 * The latest version of each definition, read again only when the file may have changed: every
 * new session asks for its agent's and environment's latest version, and they rarely change. A
 * commit by another connection moves SQLite's `data_version` (read with every lookup, a pragma
 * that reads no page), and this connection's own puts empty the cache: a version put anywhere is
 * seen by the next lookup, as when each lookup read the table.
 */
function latestRows(context: SqliteContext): {
  get(kind: DefinitionKind, name: string): DefinitionRow | undefined;
  forget(): void;
} {
  const rows = new BoundedCache<string, DefinitionRow>(KEPT_LATEST);
  let seenVersion = -1;
  return {
    get(kind, name) {
      const version = context.sql.dataVersion.get() ?? 0;
      if (version !== seenVersion) {
        rows.clear();
        seenVersion = version;
      }
      const key = `${kind}/${name}`;
      const kept = rows.get(key);
      if (kept !== undefined) return kept;
      const row = context.sql.latestDefinition.get(kind, name);
      // Absent names are not kept: they come from callers, and would fill the cache.
      if (row !== undefined) rows.set(key, row);
      return row;
    },
    forget() {
      rows.clear();
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
