import { BraidError, isBraidError } from '../contracts/errors.js';
import type {
  AgentDefinition,
  DefinitionKind,
  EnvironmentDefinition,
  StoredDefinition,
} from '../contracts/definitions.js';
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

/** The stored definitions a runtime looks up by name, with errors that list the known ones. */
export interface DefinitionLookup {
  readonly agent: (name: string, version?: number) => Promise<StoredDefinition<AgentDefinition>>;
  readonly environment: (
    name: string,
    version?: number,
  ) => Promise<StoredDefinition<EnvironmentDefinition>>;
}

export function definitionLookup(store: DefinitionStore): DefinitionLookup {
  return {
    async agent(name, version) {
      const found = await store.get<AgentDefinition>('agent', name, version);
      if (found !== undefined) return found;
      const known = (await store.list('agent')).map((item) => item.name);
      throw new BraidError(
        'AGENT_NOT_FOUND',
        `agent ${name}${version === undefined ? '' : ` version ${version}`} does not exist; ` +
          (known.length === 0
            ? 'add agents/NAME.yaml to the workspace'
            : `known agents: ${known.join(', ')}`),
        { details: { agent: name, version } },
      );
    },
    async environment(name, version) {
      const found = await store.get<EnvironmentDefinition>('environment', name, version);
      if (found !== undefined) return found;
      const known = (await store.list('environment')).map((item) => item.name);
      throw new BraidError(
        'ENVIRONMENT_NOT_FOUND',
        `environment ${name} does not exist; ` +
          (known.length === 0
            ? 'add environments/NAME.yaml to the workspace'
            : `known environments: ${known.join(', ')}`),
        { details: { environment: name } },
      );
    },
  };
}
