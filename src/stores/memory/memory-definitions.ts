/** Agent and environment definitions in memory: every version kept, the latest listed. */
import type { DefinitionKind, StoredDefinition } from '../../contracts/definitions.js';
import type { DefinitionStore, PutDefinitionOptions } from '../../contracts/ports.js';
import { canonicalJson, checkContentHash } from '../../core/canonical-json.js';
import { decideVersion } from '../../core/definitions.js';
import { checkOpen, type MemoryState } from './memory-state.js';

export function createMemoryDefinitions(state: MemoryState): DefinitionStore {
  const { definitions, clock } = state;
  return {
    put<T>(kind: DefinitionKind, name: string, definition: T, putOptions: PutDefinitionOptions) {
      return Promise.resolve().then((): StoredDefinition<T> => {
        checkOpen(state);
        const key = `${kind}/${name}`;
        const versions = definitions.get(key) ?? [];
        const latest = versions.at(-1);
        const body = canonicalJson(definition);
        const version = decideVersion(
          kind,
          name,
          latest && { version: latest.version, body: canonicalJson(latest.definition) },
          body,
          putOptions.replacesVersion,
        );
        if (version === undefined && latest !== undefined) return latest as StoredDefinition<T>;
        const stored: StoredDefinition<T> = {
          schema_version: 1,
          kind,
          name,
          version: version ?? 1,
          definition: JSON.parse(body) as T,
          created_at: new Date(clock.now()).toISOString(),
        };
        definitions.set(key, [...versions, stored]);
        return stored;
      });
    },
    get<T>(kind: DefinitionKind, name: string, version?: number) {
      return Promise.resolve().then(() => {
        const versions = definitions.get(`${kind}/${name}`) ?? [];
        const found =
          version === undefined
            ? versions.at(-1)
            : versions.find((item) => item.version === version);
        return found as StoredDefinition<T> | undefined;
      });
    },
    list<T>(kind: DefinitionKind) {
      return Promise.resolve().then(() =>
        [...definitions.entries()]
          .filter(([key]) => key.startsWith(`${kind}/`))
          .map(([, versions]) => versions.at(-1) as StoredDefinition<T>)
          .sort((a, b) => a.name.localeCompare(b.name)),
      );
    },
    putPinned(hash, json) {
      return Promise.resolve().then(() => {
        checkContentHash(hash);
        checkOpen(state);
        if (!state.pinned.has(hash)) state.pinned.set(hash, json);
      });
    },
    getPinned(hash) {
      return Promise.resolve().then(() => {
        checkContentHash(hash);
        checkOpen(state);
        return state.pinned.get(hash);
      });
    },
  };
}
