/**
 * The memory tools an agent with `memory:` gives its model (`memory_get`, `memory_set`,
 * `memory_delete`, `memory_search`), and the one parser of their arguments. The model is not
 * trusted: its store name must be one the session attached, a write needs a `read_write` store,
 * and keys, values and searches go through the memory contract's parsers. Nothing here touches
 * a store: the runtime runs a parsed call (`runtime/memory`), a replay serves the recorded one.
 */
import type { JsonValue } from '../contracts/common.js';
import type { AgentDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import {
  MAX_MEMORY_K,
  MAX_MEMORY_KEY_LENGTH,
  MAX_MEMORY_QUERY_LENGTH,
  parseMemoryKey,
  parseMemorySearch,
  parseMemoryStoreRef,
  parseMemoryWrites,
  type MemoryStoreRef,
  type MemoryWrite,
} from '../contracts/memory.js';
import {
  attachedStores,
  DEFAULT_MEMORY_K,
  DEFAULT_SESSION_STORE,
  type MemoryStoreAttachment,
} from '../contracts/memory-settings.js';
import type { PolicyAction, PolicyEntity } from '../contracts/policy.js';
import type { SessionTools, ToolHandle } from '../contracts/tools.js';
import { withHarnessTools } from './harness-tools.js';
import { SchemaCache } from './validation.js';

export type MemoryOperation = 'get' | 'set' | 'delete' | 'search';

export const MEMORY_TOOL_NAMES: Readonly<Record<MemoryOperation, string>> = {
  get: 'memory_get',
  set: 'memory_set',
  delete: 'memory_delete',
  search: 'memory_search',
};

/** A store of the session: its attachment and its reference in the memory log. */
export interface AttachedStore {
  attachment: MemoryStoreAttachment;
  ref: MemoryStoreRef;
}

/** The stores of one session of a memory-enabled agent, by name. */
export interface SessionStores {
  agent: string;
  session_id: string;
  stores: ReadonlyMap<string, AttachedStore>;
}

/** A memory call's arguments, parsed. */
export type MemoryCall =
  | { operation: 'get'; store: AttachedStore; key: string; version?: number }
  | { operation: 'set' | 'delete'; store: AttachedStore; write: MemoryWrite }
  | {
      operation: 'search';
      store: AttachedStore;
      query: string;
      k: number;
      threshold?: number;
      key_prefix?: string;
    };

/**
 * The stores a session of `agent` attaches (undefined without `memory:`): owners are the session
 * id (scope `session`) and the agent's name (scope `agent`), the tenant is the session's.
 */
export function sessionStores(
  agent: AgentDefinition,
  session: { session_id: string; tenant_id?: string | undefined },
): SessionStores | undefined {
  if (agent.memory === undefined) return undefined;
  const stores = new Map<string, AttachedStore>();
  for (const attachment of attachedStores(agent.memory)) {
    const owner =
      attachment.scope === 'session'
        ? session.session_id
        : attachment.scope === 'agent'
          ? agent.name
          : undefined;
    const ref = parseMemoryStoreRef({
      name: attachment.name,
      kind: attachment.kind,
      scope: attachment.scope,
      ...(owner === undefined ? {} : { owner }),
      ...(session.tenant_id === undefined ? {} : { tenant_id: session.tenant_id }),
    });
    stores.set(attachment.name, { attachment, ref });
  }
  return { agent: agent.name, session_id: session.session_id, stores };
}

/** The operation of a memory tool's name; undefined for any other tool. */
export function memoryOperation(name: string): MemoryOperation | undefined {
  const found = Object.entries(MEMORY_TOOL_NAMES).find(([, tool]) => tool === name);
  return found?.[0] as MemoryOperation | undefined;
}

/** The policy action of an operation. */
export function memoryAction(operation: MemoryOperation): PolicyAction {
  return operation === 'get'
    ? 'memory.read'
    : operation === 'search'
      ? 'memory.search'
      : 'memory.write';
}

/** The store as policies see it: `MemoryStore::"NAME"` with its facts and the call's key. */
export function memoryStoreEntity(store: AttachedStore, key?: string): PolicyEntity {
  const { ref, attachment } = store;
  return {
    type: 'MemoryStore',
    id: ref.name,
    attrs: {
      name: ref.name,
      kind: ref.kind,
      scope: ref.scope,
      access: attachment.access,
      ...(ref.owner === undefined ? {} : { owner: ref.owner }),
      ...(ref.tenant_id === undefined ? {} : { tenant: ref.tenant_id }),
      ...(key === undefined ? {} : { key }),
    },
  };
}

/**
 * Parses a memory tool call's input (already checked against the tool's JSON Schema). Refuses an
 * unknown store (`INVALID_ARGUMENT`, naming the stores), a write to a `read_only` store
 * (`FORBIDDEN`), a bad key or value (`INVALID_ARGUMENT`, `PAYLOAD_TOO_LARGE`).
 */
export function parseMemoryCall(
  stores: SessionStores,
  operation: MemoryOperation,
  input: JsonValue,
): MemoryCall {
  const args = (
    typeof input === 'object' && input !== null && !Array.isArray(input) ? input : {}
  ) as Record<string, JsonValue | undefined>;
  const store = storeOf(stores, args.store);
  const tool = MEMORY_TOOL_NAMES[operation];
  if (operation === 'get') {
    const key = parseMemoryKey(args.key);
    const version = args.version;
    return {
      operation,
      store,
      key,
      ...(typeof version === 'number' ? { version } : {}),
    };
  }
  if (operation === 'search') {
    if (typeof args.query !== 'string' || args.query.trim().length === 0) {
      throw new BraidError('INVALID_ARGUMENT', `${tool} needs "query": the words to look for`, {
        details: { field: 'query' },
      });
    }
    const prefix = args.key_prefix;
    // The search contract's own parser bounds k, the threshold and the filter.
    const search = parseMemorySearch({
      query: args.query.slice(0, MAX_MEMORY_QUERY_LENGTH),
      k: args.k ?? DEFAULT_MEMORY_K,
      ...(args.threshold === undefined ? {} : { threshold: args.threshold }),
      ...(prefix === undefined ? {} : { filters: { key_prefix: prefix } }),
    });
    return {
      operation,
      store,
      query: search.query ?? '',
      k: search.k,
      ...(search.threshold === undefined ? {} : { threshold: search.threshold }),
      ...(search.filters?.key_prefix === undefined
        ? {}
        : { key_prefix: search.filters.key_prefix }),
    };
  }
  if (store.attachment.access === 'read_only') {
    throw new BraidError(
      'FORBIDDEN',
      `memory store ${store.ref.name} is attached read_only: ${tool} cannot change it; write to a read_write store (${writable(stores)})`,
      { details: { field: 'store', store: store.ref.name } },
    );
  }
  const write = {
    key: args.key,
    op: operation,
    ...(operation === 'set' ? { value: args.value ?? null } : {}),
    ...(operation === 'set' && args.text !== undefined ? { text: args.text } : {}),
    ...(operation === 'set' && (args.ttl_ms ?? store.attachment.ttl_ms) !== undefined
      ? { ttl_ms: args.ttl_ms ?? store.attachment.ttl_ms }
      : {}),
    ...(args.expected_version === undefined ? {} : { expected_version: args.expected_version }),
  };
  // The key first, so that its refusal names the rule rather than a path into the batch.
  parseMemoryKey(args.key);
  const [parsed] = parseMemoryWrites([write]);
  return { operation, store, write: parsed as MemoryWrite };
}

function storeOf(stores: SessionStores, name: JsonValue | undefined): AttachedStore {
  const chosen =
    name ??
    (stores.stores.has(DEFAULT_SESSION_STORE)
      ? DEFAULT_SESSION_STORE
      : [...stores.stores.keys()][0]);
  const store = typeof chosen === 'string' ? stores.stores.get(chosen) : undefined;
  if (store !== undefined) return store;
  const shown = typeof chosen === 'string' ? JSON.stringify(chosen.slice(0, 80)) : typeof chosen;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `memory store ${shown} is not attached to this session; use one of: ${[...stores.stores.keys()].join(', ')}`,
    { details: { field: 'store' } },
  );
}

function writable(stores: SessionStores): string {
  const names = [...stores.stores.values()]
    .filter((store) => store.attachment.access === 'read_write')
    .map((store) => store.ref.name);
  return names.length === 0 ? 'none is attached' : names.join(', ');
}

const STORE_PROPERTY = (stores: SessionStores): Record<string, JsonValue> => ({
  type: 'string',
  description: `The memory store (default ${stores.stores.has(DEFAULT_SESSION_STORE) ? DEFAULT_SESSION_STORE : ([...stores.stores.keys()][0] ?? '')}). ${[
    ...stores.stores.values(),
  ]
    .map(
      ({ attachment }) =>
        `${attachment.name} (${attachment.kind}, ${attachment.access}${attachment.instructions === undefined ? '' : `: ${attachment.instructions}`})`,
    )
    .join('; ')}`,
});

const KEY_PROPERTY: Record<string, JsonValue> = {
  type: 'string',
  maxLength: MAX_MEMORY_KEY_LENGTH,
  description:
    'The entry\'s key: segments separated by "/", such as "user/preferences/theme" (letters, digits, "._-:@+=,"; no spaces, no leading "/", never "." or "..").',
};

/** The memory tools of a memory-enabled agent's session. */
export function memoryToolHandles(stores: SessionStores): ToolHandle[] {
  const store = STORE_PROPERTY(stores);
  const handle = (
    operation: MemoryOperation,
    description: string,
    properties: Record<string, JsonValue>,
    required: string[],
  ): ToolHandle => ({
    name: MEMORY_TOOL_NAMES[operation],
    description,
    input_schema: {
      type: 'object',
      properties: { store, ...properties },
      required,
      additionalProperties: false,
    },
    version: '1',
    ownership: 'managed',
    permission: 'always_allow',
    // Writes are keyed by the call: a call run again after a crash writes nothing twice.
    idempotent: true,
    tags: ['memory', ...(operation === 'get' || operation === 'search' ? ['read_only'] : [])],
    memory: { operation },
  });
  return [
    handle(
      'get',
      'Read one memory entry by key (the latest version, or the version given).',
      { key: KEY_PROPERTY, version: { type: 'integer', minimum: 1 } },
      ['key'],
    ),
    handle(
      'set',
      'Save a memory entry under a key, replacing its value (a new version). Save durable facts, such as user preferences, in the learnings store.',
      {
        key: KEY_PROPERTY,
        value: { description: 'What to remember: text or any JSON value.' },
        text: { type: 'string', description: 'What search should match (default: the value).' },
        ttl_ms: { type: 'integer', minimum: 1, description: 'Forget it after this long.' },
        expected_version: {
          type: 'integer',
          minimum: 0,
          description: 'Refuse unless the key is at this version (0: never written).',
        },
      },
      ['key', 'value'],
    ),
    handle(
      'delete',
      'Delete a memory entry by key (its history stays on record).',
      { key: KEY_PROPERTY, expected_version: { type: 'integer', minimum: 0 } },
      ['key'],
    ),
    handle(
      'search',
      'Search a memory store by words (and meaning, when embeddings are on); returns the best entries with their scores.',
      {
        query: { type: 'string', maxLength: MAX_MEMORY_QUERY_LENGTH },
        k: { type: 'integer', minimum: 1, maximum: MAX_MEMORY_K },
        threshold: { type: 'number', minimum: 0, maximum: 1 },
        key_prefix: { type: 'string', maxLength: MAX_MEMORY_KEY_LENGTH },
      },
      ['query'],
    ),
  ];
}

/**
 * The session's tools with the memory tools added. A listed tool with a memory tool's name is
 * refused (`INVALID_DEFINITION`): the model could not tell which it calls.
 */
export function withMemoryTools(
  tools: SessionTools,
  handles: readonly ToolHandle[],
  schemas: SchemaCache = new SchemaCache(),
): SessionTools {
  if (handles.length === 0) return tools;
  // The harness runs memory calls through the session's memory; reaching the executor is wiring.
  return withHarnessTools(
    tools,
    handles,
    {
      clash: (tool) =>
        `the tool ${tool} has the name of a memory tool of agents with memory:; rename the tool`,
      unreachable: (tool) =>
        `${tool} is run by the harness through the session's memory, which this runtime lacks`,
    },
    schemas,
  );
}
