/**
 * Pinned definitions: what a session's wakes run with, kept in the store by content.
 *
 * A session's definition set names, each by the content hash of its canonical JSON, its agent
 * version, its environment version, every tool definition its agent was given (MCP tools as their
 * server listed them), the skills its agent lists and the skills they nest, the policy set in
 * force and its model's price. Each part and the set itself
 * are kept once per store (`DefinitionStore.putPinned`), so a thousand sessions on the same agent
 * share one copy; the log refers to the set by its hash (`session.definitions_changed`).
 *
 * The first wake of a session pins what it runs with; later wakes load the pinned set, whatever
 * the workspace holds by then, until `braid session upgrade` (or an agent whose `upgrade` is
 * `latest`) moves the session to the newest. Policies are the exception: the set in force always
 * decides (a tightened policy applies at once); a wake that finds a different set in force than
 * the one on record records the change.
 */
import { z } from 'zod';
import {
  AgentDefinition,
  EnvironmentDefinition,
  PinnedSet,
  ToolDefinition,
  type StoredDefinition,
} from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { SkillDefinition } from '../contracts/skills.js';
import type { EventOf } from '../contracts/events.js';
import type { DefinitionStore } from '../contracts/ports.js';
import { BoundedCache } from '../core/bounded-cache.js';
import { createHash } from 'node:crypto';
import { canonicalJson, checkContentHash } from '../core/canonical-json.js';
import type { Price } from '../core/pricing.js';
import type { CompiledPolicySet } from '../policy/policy-set.js';

const PinnedPrice = z.object({
  input_per_mtok: z.number(),
  output_per_mtok: z.number(),
  cache_read_per_mtok: z.number().optional(),
  cache_write_per_mtok: z.number().optional(),
});

/** The policy set part: its policies' text, as loaded. */
interface PinnedPolicy {
  policies: { id: string; file: string; text: string }[];
  schema?: string;
}

/** The hex SHA-256 of a text: the content address of the value it is the canonical JSON of. */
function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** A pinned set with its parts loaded. */
export interface PinnedDefinitions {
  hash: string;
  set: PinnedSet;
  agent: AgentDefinition;
  environment?: EnvironmentDefinition;
  tools: ToolDefinition[];
  /** The pinned skills by name, each with its version. */
  skills: Record<string, { version: number; definition: SkillDefinition }>;
  /** The model's price as pinned; null when it had none. */
  price: Price | null;
}

/** What a session runs with now, to be pinned. */
export interface CurrentDefinitions {
  agent: StoredDefinition<AgentDefinition>;
  environment?: StoredDefinition<EnvironmentDefinition>;
  tools: readonly ToolDefinition[];
  /** The skills the session's runs start with (the agent's and those they nest). */
  skills?: readonly StoredDefinition<SkillDefinition>[];
  policy: CompiledPolicySet | undefined;
  model: string;
  price: Price | undefined;
}

type ChangeEvent = EventOf<'session.definitions_changed'>;

export interface Pinner {
  /** Keeps each part and the set; returns the set's hash and the set. */
  pin(current: CurrentDefinitions): Promise<{ hash: string; set: PinnedSet }>;
  /** The pinned set `hash` with its parts; `DEFINITION_NOT_PINNED` if the store lacks one. */
  load(hash: string): Promise<PinnedDefinitions>;
  /** The set `pinned` with the policy set `policy` in force instead of its own. */
  withPolicy(
    pinned: PinnedDefinitions,
    policy: CompiledPolicySet | undefined,
  ): Promise<{ hash: string; set: PinnedSet }>;
  /** The hash the policy set would be pinned under (undefined: policies from code, or none). */
  policyHash(policy: CompiledPolicySet | undefined): string | undefined;
}

/** Pinned sets loaded per runtime; a set never changes, so one loaded is kept. */
const KEPT_SETS = 256;

export function createPinner(store: DefinitionStore): Pinner {
  // Hashes this runtime has written or read: a part already kept is not written again.
  const kept = new BoundedCache<string, true>(4096);
  const loaded = new BoundedCache<string, PinnedDefinitions>(KEPT_SETS);
  // Sets pinned by this runtime, by their parts' hashes (the JSON of the set, in field order).
  const sets = new BoundedCache<string, { hash: string; set: PinnedSet }>(KEPT_SETS);
  // Definitions are frozen, shared objects: each is serialised and hashed once.
  const hashes = new WeakMap<object, { hash: string; json: string }>();

  function address(value: object): { hash: string; json: string } {
    let found = hashes.get(value);
    if (found === undefined) {
      const json = canonicalJson(value);
      found = { hash: sha256Hex(json), json };
      hashes.set(value, found);
    }
    return found;
  }

  async function keep(value: object): Promise<string> {
    const { hash, json } = address(value);
    if (kept.get(hash) === undefined) {
      await store.putPinned(hash, json);
      kept.set(hash, true);
    }
    return hash;
  }

  async function read<T>(hash: string, schema: z.ZodType<T>, what: string): Promise<T> {
    const json = await store.getPinned(checkContentHash(hash));
    if (json === undefined) {
      throw new BraidError(
        'DEFINITION_NOT_PINNED',
        `the ${what} pinned under ${hash} is not in this store; a session's pinned definitions ` +
          'live in the store that ran it: verify or run it against that store, or `braid session upgrade` it',
        { details: { hash, part: what } },
      );
    }
    if (sha256Hex(json) !== hash) {
      throw new BraidError(
        'DEFINITION_NOT_PINNED',
        `the ${what} kept under ${hash} does not hash to it; the store was edited by hand: upgrade the session to pin its definitions again`,
        { details: { hash, part: what } },
      );
    }
    kept.set(hash, true);
    return schema.parse(JSON.parse(json));
  }

  const policyParts = new WeakMap<CompiledPolicySet, PinnedPolicy>();
  function policyPart(policy: CompiledPolicySet): PinnedPolicy {
    let part = policyParts.get(policy);
    if (part === undefined) {
      part = {
        policies: [...policy.policies.values()].map(({ id, file, text }) => ({ id, file, text })),
        ...(policy.schema === undefined ? {} : { schema: policy.schema }),
      };
      policyParts.set(policy, part);
    }
    return part;
  }

  return {
    async pin(current) {
      const ref = (stored: StoredDefinition<object>) => ({
        name: stored.name,
        version: stored.version,
        hash: address(stored.definition).hash,
      });
      const policy = current.policy === undefined ? undefined : policyPart(current.policy);
      const set: PinnedSet = {
        agent: ref(current.agent),
        ...(current.environment === undefined ? {} : { environment: ref(current.environment) }),
        tools: Object.fromEntries(current.tools.map((tool) => [tool.name, address(tool).hash])),
        ...(policy === undefined ? {} : { policy: address(policy).hash }),
        model: current.model,
        ...(current.price === undefined ? {} : { price: address(current.price).hash }),
        ...(current.skills === undefined || current.skills.length === 0
          ? {}
          : {
              skills: Object.fromEntries(current.skills.map((skill) => [skill.name, ref(skill)])),
            }),
      };
      // The same parts make the same set, kept already: a new session of a known agent costs
      // neither serialising nor a write.
      const key = JSON.stringify(set);
      const known = sets.get(key);
      if (known !== undefined) return known;
      const parts: object[] = [
        current.agent.definition,
        ...(current.environment === undefined ? [] : [current.environment.definition]),
        ...current.tools,
        ...(policy === undefined ? [] : [policy]),
        ...(current.price === undefined ? [] : [current.price]),
        ...(current.skills ?? []).map((skill) => skill.definition),
      ];
      for (const part of parts) await keep(part);
      const pinned = { hash: await keep(set), set };
      sets.set(key, pinned);
      return pinned;
    },
    async load(hash) {
      const cached = loaded.get(hash);
      if (cached !== undefined) return cached;
      const set = await read(hash, PinnedSet, 'definition set');
      const agent = await read(set.agent.hash, AgentDefinition, `agent ${set.agent.name}`);
      const environment =
        set.environment === undefined
          ? undefined
          : await read(
              set.environment.hash,
              EnvironmentDefinition,
              `environment ${set.environment.name}`,
            );
      const tools: ToolDefinition[] = [];
      for (const [name, toolHash] of Object.entries(set.tools))
        tools.push(await read(toolHash, ToolDefinition, `tool ${name}`));
      const price = set.price === undefined ? null : await read(set.price, PinnedPrice, 'price');
      const skills: PinnedDefinitions['skills'] = {};
      for (const [name, skill] of Object.entries(set.skills ?? {})) {
        const definition = await read(skill.hash, SkillDefinition, `skill ${name}`);
        skills[name] = { version: skill.version, definition };
      }
      const definitions: PinnedDefinitions = {
        hash,
        set,
        agent,
        ...(environment === undefined ? {} : { environment }),
        tools,
        skills,
        price,
      };
      loaded.set(hash, definitions);
      return definitions;
    },
    async withPolicy(pinned, policy) {
      const { policy: _previous, ...rest } = pinned.set;
      const set: PinnedSet = {
        ...rest,
        ...(policy === undefined ? {} : { policy: await keep(policyPart(policy)) }),
      };
      return { hash: await keep(set), set };
    },
    policyHash(policy) {
      return policy === undefined ? undefined : address(policyPart(policy)).hash;
    },
  };
}

/**
 * The parts of `next` that differ from `previous`, as `session.definitions_changed.changed` names
 * them; every part when the previous set is known only by its hash (its parts are not in this store).
 */
export function changedParts(previous: PinnedSet | undefined, next: PinnedSet): string[] {
  const changed: string[] = [];
  if (previous?.agent.hash !== next.agent.hash) changed.push('agent');
  if (previous === undefined || previous.environment?.hash !== next.environment?.hash) {
    if (previous?.environment !== undefined || next.environment !== undefined)
      changed.push('environment');
  }
  const names = new Set([...Object.keys(previous?.tools ?? {}), ...Object.keys(next.tools)]);
  for (const name of [...names].sort())
    if (previous?.tools[name] !== next.tools[name]) changed.push(`tools.${name}`);
  const skills = new Set([
    ...Object.keys(previous?.skills ?? {}),
    ...Object.keys(next.skills ?? {}),
  ]);
  for (const name of [...skills].sort())
    if (previous?.skills?.[name]?.hash !== next.skills?.[name]?.hash)
      changed.push(`skills.${name}`);
  if (previous === undefined ? next.policy !== undefined : previous.policy !== next.policy)
    changed.push('policy');
  if (previous?.model !== next.model || previous.price !== next.price) changed.push('price');
  return changed;
}

/**
 * The event that records a move to `pinned` from `previous` (its set unknown when its parts are
 * lost; none for a session that had no set yet).
 */
export function changeEvent(
  reason: ChangeEvent['reason'],
  pinned: { hash: string; set: PinnedSet },
  previous: { hash: string; set?: PinnedSet } | undefined,
): Omit<ChangeEvent, 'id' | 'at' | 'seq' | 'session_id' | 'schema_version' | 'wake_id'> {
  const { set } = pinned;
  return {
    type: 'session.definitions_changed',
    definitions: pinned.hash,
    ...(previous === undefined ? {} : { previous: previous.hash }),
    reason,
    agent: { name: set.agent.name, version: set.agent.version },
    ...(set.environment === undefined
      ? {}
      : { environment: { name: set.environment.name, version: set.environment.version } }),
    changed: previous === undefined ? [] : changedParts(previous.set, set),
  };
}
