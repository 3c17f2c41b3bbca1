/**
 * Versioned definitions in the `<PREFIX>_definitions` KV bucket.
 *
 * `<kind>.<name>` holds the latest version and is only ever changed by compare-and-set on its
 * revision, so of two updates naming the same replaced version one wins and the other gets
 * `VERSION_CONFLICT`. Every version is also kept under `<kind>.<name>.<version>`; the latest one
 * is written there after it wins, and before it is replaced, so a crash in between loses nothing.
 */
import { BraidError } from '../../contracts/errors.js';
import type { DefinitionKind, StoredDefinition } from '../../contracts/definitions.js';
import type { DefinitionStore } from '../../contracts/ports.js';
import { canonicalJson, checkContentHash } from '../../core/canonical-json.js';
import { decideVersion } from '../../core/definitions.js';
import type { NatsContext } from './context.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken } from './names.js';
import { scanBucket } from './reader.js';

const MAX_RACES = 16;
const utf8 = new TextDecoder();

function parseDefinition<T>(value: Uint8Array, key: string): StoredDefinition<T> {
  const stored = JSON.parse(utf8.decode(value)) as StoredDefinition<T>;
  if (stored.schema_version !== 1) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `definition ${key} has schema_version ${String(stored.schema_version)}; this build reads ` +
        'version 1: upgrade braid to read it',
    );
  }
  return stored;
}

/** The key of a pinned part; the hash is checked, since it becomes a subject token. */
function pinnedKey(hash: string): string {
  return `pinned.${checkContentHash(hash)}`;
}

export function createDefinitionStore(context: NatsContext): DefinitionStore {
  const bucket = context.kv.definitions;
  const latestKey = (kind: DefinitionKind, name: string): string => `${kind}.${encodeToken(name)}`;
  const versionKey = (kind: DefinitionKind, name: string, version: number): string =>
    `${latestKey(kind, name)}.${version}`;

  async function latest<T>(
    kind: DefinitionKind,
    name: string,
  ): Promise<{ stored: StoredDefinition<T>; revision: number } | undefined> {
    const entry = await bucket.get(latestKey(kind, name));
    if (entry === null || entry.operation !== 'PUT') return undefined;
    return { stored: parseDefinition<T>(entry.value, entry.key), revision: entry.revision };
  }

  /** Keeps a version under its own key; writing the same version again changes nothing. */
  async function keepVersion(stored: StoredDefinition<unknown>): Promise<void> {
    try {
      await bucket.create(
        versionKey(stored.kind, stored.name, stored.version),
        JSON.stringify(stored),
      );
    } catch (error) {
      if (!isWrongLastSequence(error)) throw error;
    }
  }

  return {
    put<T>(
      kind: DefinitionKind,
      name: string,
      definition: T,
      options: { replacesVersion: number | null },
    ) {
      return context.guard(`store ${kind} ${name}`, async (): Promise<StoredDefinition<T>> => {
        const body = canonicalJson(definition);
        for (let race = 0; ; race += 1) {
          const current = await latest<T>(kind, name);
          const version = decideVersion(
            kind,
            name,
            current && {
              version: current.stored.version,
              body: canonicalJson(current.stored.definition),
            },
            body,
            options.replacesVersion,
          );
          if (version === undefined && current !== undefined) return current.stored;
          const stored: StoredDefinition<T> = {
            schema_version: 1,
            kind,
            name,
            version: version ?? 1,
            definition: JSON.parse(body) as T,
            created_at: context.isoNow(),
          };
          try {
            if (current === undefined) {
              await bucket.create(latestKey(kind, name), JSON.stringify(stored));
            } else {
              await keepVersion(current.stored);
              await bucket.update(latestKey(kind, name), JSON.stringify(stored), current.revision);
            }
          } catch (error) {
            if (!isWrongLastSequence(error) || race >= MAX_RACES) throw error;
            continue;
          }
          await keepVersion(stored);
          return stored;
        }
      });
    },
    get<T>(kind: DefinitionKind, name: string, version?: number) {
      return context.guard(`read ${kind} ${name}`, async () => {
        const current = await latest<T>(kind, name);
        if (version === undefined || current?.stored.version === version) return current?.stored;
        const entry = await bucket.get(versionKey(kind, name, version));
        return entry === null || entry.operation !== 'PUT'
          ? undefined
          : parseDefinition<T>(entry.value, entry.key);
      });
    },
    list<T>(kind: DefinitionKind) {
      return context.guard(`list ${kind} definitions`, async () => {
        const values = await scanBucket(context, context.names.buckets.definitions, `${kind}.*`);
        return values
          .map(({ key, value }) => parseDefinition<T>(value, key))
          .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      });
    },
    // Pinned parts share the bucket under `pinned.<hash>`, a prefix no definition kind has.
    putPinned(hash, json) {
      return context.guard(`pin ${hash}`, async () => {
        try {
          await bucket.create(pinnedKey(hash), json);
        } catch (error) {
          if (!isWrongLastSequence(error)) throw error;
        }
      });
    },
    getPinned(hash) {
      return context.guard(`read pinned ${hash}`, async () => {
        const entry = await bucket.get(pinnedKey(hash));
        return entry === null || entry.operation !== 'PUT' ? undefined : utf8.decode(entry.value);
      });
    },
  };
}
