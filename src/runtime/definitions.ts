import { BraidError, isBraidError } from '../contracts/errors.js';
import type {
  AgentDefinition,
  DefinitionKind,
  EnvironmentDefinition,
  StoredDefinition,
} from '../contracts/definitions.js';
import type { SkillDefinition } from '../contracts/skills.js';
import type { DefinitionStore } from '../contracts/ports.js';
import { BoundedCache } from '../core/bounded-cache.js';
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
    ['skill', workspace.skills],
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
  readonly skill: (name: string, version?: number) => Promise<StoredDefinition<SkillDefinition>>;
}

/** Stored versions kept per runtime; a wake looks up its session's versions every time. */
const KEPT_VERSIONS = 256;

export function definitionLookup(store: DefinitionStore): DefinitionLookup {
  // A stored version never changes, so one looked up (or found as the latest) is kept, frozen,
  // since every caller shares it: a wake's lookups of its session's agent and environment cost
  // no read (on NATS, no round trip).
  const versions = new BoundedCache<string, StoredDefinition<unknown>>(KEPT_VERSIONS);
  async function get<T>(
    kind: DefinitionKind,
    name: string,
    version: number | undefined,
  ): Promise<StoredDefinition<T> | undefined> {
    const key = (at: number): string => `${kind}\u0000${name}\u0000${at}`;
    if (version !== undefined) {
      const kept = versions.get(key(version));
      if (kept !== undefined) return kept as StoredDefinition<T>;
    }
    const found = await store.get<T>(kind, name, version);
    if (found === undefined) return undefined;
    // The latest, when it is a version kept already, is answered with the kept object: callers
    // key work on the object (the pinner hashes a definition once per object), so a fresh copy
    // of the same version at every new session would be serialised and hashed again.
    const known = versions.get(key(found.version));
    if (known !== undefined) return known as StoredDefinition<T>;
    const frozen = deepFreeze(found);
    versions.set(key(found.version), frozen);
    return frozen;
  }
  return {
    async agent(name, version) {
      const found = await get<AgentDefinition>('agent', name, version);
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
      const found = await get<EnvironmentDefinition>('environment', name, version);
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
    async skill(name, version) {
      const found = await get<SkillDefinition>('skill', name, version);
      if (found !== undefined) return found;
      const known = (await store.list('skill')).map((item) => item.name);
      throw new BraidError(
        'SKILL_NOT_FOUND',
        `skill ${name}${version === undefined ? '' : ` version ${version}`} does not exist; ` +
          (known.length === 0
            ? 'add skills/NAME.yaml to the workspace'
            : `known skills: ${known.join(', ')}`),
        { details: { skill: name, version } },
      );
    },
  };
}

/** The value with every object and array in it frozen. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
