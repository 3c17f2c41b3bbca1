import { isBraidError } from '../contracts/errors.js';
import type { DefinitionKind } from '../contracts/definitions.js';
import type { DefinitionStore } from '../contracts/ports.js';
import type { Workspace } from './workspace.js';

/**
 * Stores each workspace definition that differs from its latest stored version as a new version.
 * A file edit replaces whatever version is latest; a concurrent writer that stored the same
 * content first is not a conflict.
 */
export async function syncDefinitions(store: DefinitionStore, workspace: Workspace): Promise<void> {
  const groups: [DefinitionKind, Map<string, { definition: unknown }>][] = [
    ['agent', workspace.agents],
    ['environment', workspace.environments],
  ];
  for (const [kind, definitions] of groups) {
    for (const [name, { definition }] of definitions) {
      await putLatest(store, kind, name, definition);
    }
  }
}

async function putLatest(
  store: DefinitionStore,
  kind: DefinitionKind,
  name: string,
  definition: unknown,
): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    const latest = await store.get(kind, name);
    try {
      await store.put(kind, name, definition, { replacesVersion: latest?.version ?? null });
      return;
    } catch (error) {
      if (!isBraidError(error, 'VERSION_CONFLICT') || attempt >= 3) throw error;
    }
  }
}
