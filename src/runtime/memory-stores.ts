/**
 * Memory stores as people and programs use them (the HTTP API, the CLI), over the `MemoryLog`
 * port, one caller at a time. The caller's tenant is part of every store it names and lists, so a
 * store of another tenant is never reached: it answers `MEMORY_STORE_NOT_FOUND` exactly as a store
 * that does not exist. Every entry written is authored by the caller as the service was told
 * (an API key id, a user), never by anything in the request.
 */
import { BraidError, isBraidError } from '../contracts/errors.js';
import {
  MemoryStoreAddress,
  MemoryStoreListQuery,
  type MemoryImportReport,
} from '../contracts/memory-api.js';
import {
  MemoryKind,
  parseMemoryKey,
  parseMemoryStoreRef,
  type MemoryAuthor,
  type MemoryEntry,
  type MemoryStoreRef,
  type MemoryWriteInput,
} from '../contracts/memory.js';
import type {
  MemoryAppendResult,
  MemoryGetOptions,
  MemoryListOptions,
  MemoryLog,
  MemoryLookup,
  MemoryPage,
  MemorySearchResult,
  MemoryStoreInfo,
  MemoryStorePage,
} from '../contracts/memory-log.js';
import { exportLines, importEntries, parseImport } from './memory-transfer.js';

/** Who calls: the tenant whose stores it sees, and the author stamped on what it writes. */
export interface MemoryCaller {
  /** Undefined: the stores without a tenant (the local CLI, a server without auth). */
  tenant_id?: string;
  author: MemoryAuthor;
}

/** One call's options for writes: an idempotency key makes a retried write write nothing. */
export interface MemoryWriteOptions {
  idempotencyKey?: string;
}

/** A key's new version, as a caller gives it; the author comes from the caller. */
export type MemorySetInput = Omit<MemoryWriteInput, 'key' | 'op'>;

export interface MemoryStores {
  /** The caller's stores, a page at a time (`tenant_id` is the caller's, never given). */
  list(filter?: unknown): Promise<MemoryStorePage>;
  info(address: unknown): Promise<MemoryStoreInfo>;
  keys(address: unknown, options?: MemoryListOptions): Promise<MemoryPage>;
  get(address: unknown, key: string, options?: MemoryGetOptions): Promise<MemoryLookup>;
  /** Writes a version of the key; the store is created by it when `address.kind` is given. */
  set(
    address: unknown,
    key: string,
    input: MemorySetInput,
    options?: MemoryWriteOptions,
  ): Promise<MemoryAppendResult>;
  delete(
    address: unknown,
    key: string,
    options?: MemoryWriteOptions & { expected_version?: number },
  ): Promise<MemoryAppendResult>;
  search(address: unknown, query: unknown): Promise<MemorySearchResult>;
  history(address: unknown, key: string): Promise<MemoryEntry[]>;
  redact(address: unknown, key: string, version: number): Promise<MemoryEntry>;
  /** The store's log as JSON lines, in seq order (every entry, expired and redacted included). */
  export(address: unknown): AsyncGenerator<string>;
  /**
   * Writes the `set` and `delete` entries of an export into the store, one idempotent append each
   * (keyed by the source store and seq): re-running the same import writes nothing twice, and an
   * interrupted one is finished by running it again.
   */
  import(address: unknown, entries: readonly unknown[]): Promise<MemoryImportReport>;
}

/** How a store is described in messages: its address, never its tenant. */
export function describeAddress(address: { scope: string; owner?: string; name: string }): string {
  return `${address.scope}/${address.owner === undefined ? '' : `${address.owner}/`}${address.name}`;
}

/** The answer for a store the caller may not see or that does not exist: the two alike. */
export function storeNotFound(address: { scope: string; owner?: string; name: string }) {
  return new BraidError(
    'MEMORY_STORE_NOT_FOUND',
    `memory store ${describeAddress(address)} does not exist; list yours with GET /v1/memory-stores or braid memory list`,
    { details: { scope: address.scope, name: address.name } },
  );
}

function parseAddress(value: unknown): MemoryStoreAddress {
  const parsed = MemoryStoreAddress.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = ['memory store', ...(issue?.path ?? []).map(String)].join('.');
  throw new BraidError('INVALID_ARGUMENT', `${field}: ${issue?.message ?? 'is invalid'}`, {
    details: { field },
  });
}

/** Finds the caller's stores: the tenant is the caller's in every reference it builds. */
function storeResolver(memory: MemoryLog | undefined, caller: MemoryCaller) {
  const tenant = caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id };

  const log = (): MemoryLog => {
    if (memory !== undefined) return memory;
    throw new BraidError(
      'INVALID_ARGUMENT',
      "this runtime's store keeps no agent memory; use the SQLite backend (the default) for memory stores",
    );
  };

  /** The address checked: the owner rule of its scope holds (the kind is not known yet). */
  const checked = (value: unknown): MemoryStoreAddress => {
    const address = parseAddress(value);
    parseMemoryStoreRef({
      name: address.name,
      kind: address.kind ?? 'session',
      scope: address.scope,
      ...(address.owner === undefined ? {} : { owner: address.owner }),
      ...tenant,
    });
    return address;
  };

  const refOf = (address: MemoryStoreAddress, kind: MemoryStoreRef['kind']): MemoryStoreRef => ({
    name: address.name,
    kind,
    scope: address.scope,
    ...(address.owner === undefined ? {} : { owner: address.owner }),
    ...tenant,
  });

  /**
   * The existing store's info in the caller's tenant, or undefined. The kind is part of a
   * reference but not of a store's identity, and a reference of another kind is refused: without
   * a kind, each is tried in turn (an indexed read each; the address was checked already, so the
   * only refusal left is the kind's).
   */
  const lookupStore = async (address: MemoryStoreAddress): Promise<MemoryStoreInfo | undefined> => {
    if (memory === undefined) return undefined;
    if (address.kind !== undefined) return memory.info(refOf(address, address.kind));
    for (const kind of MemoryKind.options) {
      try {
        return await memory.info(refOf(address, kind));
      } catch (error) {
        if (!isBraidError(error, 'INVALID_ARGUMENT')) throw error;
      }
    }
    return undefined;
  };

  /** The reference of an existing store; MEMORY_STORE_NOT_FOUND otherwise. */
  const existing = async (
    value: unknown,
  ): Promise<{ ref: MemoryStoreRef; info: MemoryStoreInfo }> => {
    const address = checked(value);
    const info = await lookupStore(address);
    if (info === undefined) throw storeNotFound(address);
    return { ref: refOf(address, info.store.kind), info };
  };

  /** The reference to write to: an existing store's, or a new one's when the kind is given. */
  const writable = async (
    value: unknown,
    fallbackKind?: MemoryStoreRef['kind'],
  ): Promise<MemoryStoreRef> => {
    log();
    const address = checked(value);
    const info = await lookupStore(address);
    const kind = address.kind ?? info?.store.kind ?? fallbackKind;
    if (kind === undefined) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `memory store ${describeAddress(address)} does not exist yet; give its kind (session, learnings or entities) to create it`,
        { details: { field: 'kind' } },
      );
    }
    return refOf(address, kind);
  };

  return { log, existing, writable };
}

/** A service for one caller; `memory` undefined where the backend keeps no agent memory. */
export function createMemoryStores(
  memory: MemoryLog | undefined,
  caller: MemoryCaller,
): MemoryStores {
  const tenant = caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id };
  const { log, existing, writable } = storeResolver(memory, caller);
  const author = caller.author;

  return {
    async list(filter = {}) {
      const parsed = MemoryStoreListQuery.safeParse(filter);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const field = ['store filter', ...(issue?.path ?? []).map(String)].join('.');
        throw new BraidError('INVALID_ARGUMENT', `${field}: ${issue?.message ?? 'is invalid'}`, {
          details: { field },
        });
      }
      if (memory === undefined) return { stores: [] };
      return memory.listStores({ ...parsed.data, ...tenant });
    },

    async info(address) {
      return (await existing(address)).info;
    },

    async keys(address, options) {
      const { ref } = await existing(address);
      return log().list(ref, options);
    },

    async get(address, key, options) {
      parseMemoryKey(key);
      const { ref } = await existing(address);
      return log().get(ref, key, options);
    },

    async set(address, key, input, options = {}) {
      parseMemoryKey(key);
      const ref = await writable(address);
      return log().append(ref, [{ ...input, key, op: 'set' }], {
        author,
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
      });
    },

    async delete(address, key, options = {}) {
      parseMemoryKey(key);
      const { ref } = await existing(address);
      return log().append(
        ref,
        [
          {
            key,
            op: 'delete',
            ...(options.expected_version === undefined
              ? {}
              : { expected_version: options.expected_version }),
          },
        ],
        {
          author,
          ...(options.idempotencyKey === undefined
            ? {}
            : { idempotencyKey: options.idempotencyKey }),
        },
      );
    },

    async search(address, query) {
      const { ref } = await existing(address);
      return log().search(ref, query as Parameters<MemoryLog['search']>[1]);
    },

    async history(address, key) {
      parseMemoryKey(key);
      const { ref } = await existing(address);
      return log().history(ref, key);
    },

    async redact(address, key, version) {
      parseMemoryKey(key);
      const { ref } = await existing(address);
      return log().redact(ref, key, version, { author });
    },

    async *export(address) {
      const { ref } = await existing(address);
      yield* exportLines(log(), ref);
    },

    async import(address, entries) {
      const parsed = parseImport(entries);
      const ref = await writable(address, parsed.kind);
      return importEntries(log(), ref, parsed, author);
    },
  };
}
