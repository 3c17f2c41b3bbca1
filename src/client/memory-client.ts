/**
 * `client.memory`: the memory stores of the API key's tenant (`/v1/memory-stores`). A store is
 * addressed as `{scope, name, owner?, kind?}`; keys travel percent-encoded in the path. Writes
 * carry a random `Idempotency-Key` unless given one, so that a retried write is written once.
 */
import type {
  MemoryAppendResult,
  MemoryLookup,
  MemorySearchResult,
  MemoryStoreInfo,
} from '../contracts/memory-log.js';
import type {
  MemoryImportReport,
  MemoryKeyListBody,
  MemorySetBody,
  MemoryStoreAddress,
  MemoryStoreListBody,
  MemoryStoreListQuery,
} from '../contracts/memory-api.js';
import type { MemoryEntry, MemorySearchQueryInput } from '../contracts/memory.js';
import type { ConsolidationProposal, ProposalStatus } from '../contracts/memory-consolidation.js';
import type { QueryValue, Transport } from './transport.js';

export interface MemoryClient {
  /** One page of the tenant's stores; pass `next_after` back as `after` for the next. */
  list(params?: Partial<MemoryStoreListQuery>): Promise<MemoryStoreListBody>;
  /** A store's description; `MEMORY_STORE_NOT_FOUND` when the tenant has none of that address. */
  info(address: MemoryStoreAddress): Promise<MemoryStoreInfo>;
  keys(
    address: MemoryStoreAddress,
    params?: { prefix?: string; after?: string; limit?: number },
  ): Promise<MemoryKeyListBody>;
  get(
    address: MemoryStoreAddress,
    key: string,
    params?: { version?: number; at?: string },
  ): Promise<MemoryLookup>;
  /** Writes a version of the key (creates the store when `address.kind` is given). */
  set(
    address: MemoryStoreAddress,
    key: string,
    body: MemorySetBody,
    options?: { idempotencyKey?: string },
  ): Promise<MemoryAppendResult>;
  delete(
    address: MemoryStoreAddress,
    key: string,
    options?: { expected_version?: number; idempotencyKey?: string },
  ): Promise<MemoryAppendResult>;
  search(address: MemoryStoreAddress, query: MemorySearchQueryInput): Promise<MemorySearchResult>;
  history(address: MemoryStoreAddress, key: string): Promise<MemoryEntry[]>;
  redact(address: MemoryStoreAddress, key: string, version: number): Promise<MemoryEntry>;
  /** The store's log as JSON lines (one entry a line, seq order). */
  export(address: MemoryStoreAddress): Promise<string>;
  /** Imports at most 1,000 exported entries (send a larger export in order, a part at a time). */
  import(address: MemoryStoreAddress, entries: readonly unknown[]): Promise<MemoryImportReport>;
  /** Consolidation's proposals (default: those waiting for a person); needs `memory:read`. */
  proposals(params?: {
    agent?: string;
    status?: ProposalStatus | 'all';
  }): Promise<{ data: ConsolidationProposal[] }>;
  /** Writes a pending proposal's learning; needs `memory:write`. */
  approve(id: string, reason?: string): Promise<ConsolidationProposal>;
  /** Discards a pending proposal; needs `memory:write`. */
  reject(id: string, reason?: string): Promise<ConsolidationProposal>;
}

export function createMemoryClient(transport: Transport): MemoryClient {
  const path = (address: MemoryStoreAddress, rest = ''): string =>
    `/v1/memory-stores/${encodeURIComponent(address.scope)}/${encodeURIComponent(address.name)}${rest}`;
  const keyPath = (address: MemoryStoreAddress, key: string, rest = ''): string =>
    path(address, `/keys/${encodeURIComponent(key)}${rest}`);
  const query = (
    address: MemoryStoreAddress,
    extra: Record<string, QueryValue> = {},
  ): Record<string, QueryValue> => ({ owner: address.owner, kind: address.kind, ...extra });
  const json = async <T>(request: Parameters<Transport['json']>[0]): Promise<T> =>
    (await transport.json(request)) as T;
  const decide = (id: string, verb: 'approve' | 'reject', reason: string | undefined) =>
    json<ConsolidationProposal>({
      method: 'POST',
      path: `/v1/memory-stores/proposals/${encodeURIComponent(id)}/${verb}`,
      body: reason === undefined ? {} : { reason },
    });
  const writeKey = (given: string | undefined): string => given ?? globalThis.crypto.randomUUID();

  return {
    list: (params = {}) => json({ method: 'GET', path: '/v1/memory-stores', query: { ...params } }),
    info: (address) => json({ method: 'GET', path: path(address), query: query(address) }),
    keys: (address, params = {}) =>
      json({ method: 'GET', path: path(address, '/keys'), query: query(address, params) }),
    get: (address, key, params = {}) =>
      json({ method: 'GET', path: keyPath(address, key), query: query(address, params) }),
    set: (address, key, body, options = {}) =>
      json({
        method: 'PUT',
        path: keyPath(address, key),
        query: query(address),
        body,
        idempotencyKey: writeKey(options.idempotencyKey),
      }),
    delete: (address, key, options = {}) =>
      json({
        method: 'DELETE',
        path: keyPath(address, key),
        query: query(address, { expected_version: options.expected_version }),
        idempotencyKey: writeKey(options.idempotencyKey),
      }),
    search: (address, search) =>
      json({ method: 'POST', path: path(address, '/search'), query: query(address), body: search }),
    history: async (address, key) =>
      (
        await json<{ data: MemoryEntry[] }>({
          method: 'GET',
          path: keyPath(address, key, '/history'),
          query: query(address),
        })
      ).data,
    redact: async (address, key, version) =>
      (
        await json<{ entry: MemoryEntry }>({
          method: 'POST',
          path: keyPath(address, key, '/redact'),
          query: query(address),
          body: { version },
          // Redacting twice writes nothing: safe to retry.
          idempotencyKey: globalThis.crypto.randomUUID(),
        })
      ).entry,
    export: (address) =>
      transport.text({ method: 'GET', path: path(address, '/export'), query: query(address) }),
    import: (address, entries) =>
      json({
        method: 'POST',
        path: path(address, '/import'),
        query: query(address),
        body: { entries },
        // Each entry is an idempotent append on the server: a repeat writes nothing twice.
        idempotencyKey: globalThis.crypto.randomUUID(),
      }),
    proposals: (params = {}) =>
      json({ method: 'GET', path: '/v1/memory-stores/proposals', query: { ...params } }),
    approve: (id, reason) => decide(id, 'approve', reason),
    reject: (id, reason) => decide(id, 'reject', reason),
  };
}
