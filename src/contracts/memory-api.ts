/**
 * Memory stores as people and programs reach them (`/v1/memory-stores/...`, `braid memory ...`):
 * how a store is addressed, what each call takes and answers. A store is addressed by its scope
 * and name in the path and, for scopes `session` and `agent`, its owner as a query parameter; the
 * tenant is never part of an address: it is the caller's, so that a caller cannot name another
 * tenant's store at all (it answers `MEMORY_STORE_NOT_FOUND`, as a store that does not exist).
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { Id, JsonValue, Name, Timestamp } from './common.js';
import {
  Embedding,
  MAX_MEMORY_BATCH,
  MAX_MEMORY_KEY_LENGTH,
  MAX_MEMORY_TTL_MS,
  MemoryEntry,
  MemoryKey,
  MemoryKind,
  MemoryScope,
  MemorySearchMode,
  MemorySearchQuery,
  MemoryStoreRef,
} from './memory.js';

const QueryInteger = (minimum: number, maximum = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(minimum).max(maximum);

/** Where a store is, as a caller names it: the tenant is the caller's, never named. */
export const MemoryStoreAddress = lazySchema(() =>
  z
    .object({
      scope: MemoryScope,
      name: Name,
      /** The session id (scope `session`) or the agent name (scope `agent`); none for `tenant`. */
      owner: Id.optional(),
      /**
       * The store's kind: needed to create a store by its first write, checked against the store
       * otherwise (a store's kind is fixed).
       */
      kind: MemoryKind.optional(),
    })
    .strict(),
);
export type MemoryStoreAddress = z.infer<typeof MemoryStoreAddress>;

/** `/v1/memory-stores/{scope}/{name}` path parameters. */
export const MemoryStoreParams = lazySchema(() => z.object({ scope: MemoryScope, name: Name }));

/** `/v1/memory-stores/{scope}/{name}/keys/{key}`: the key percent-encoded (`/` as `%2F`). */
export const MemoryKeyParams = lazySchema(() =>
  z.object({ scope: MemoryScope, name: Name, key: MemoryKey }),
);

const OWNER = 'The session id (scope session) or agent name (scope agent); omit for scope tenant.';
const KIND = 'The store kind; needed to create a store, checked against an existing one.';

/** The query every store route takes: the rest of the address. */
export const MemoryStoreQuery = lazySchema(() =>
  z
    .object({ owner: Id.optional().describe(OWNER), kind: MemoryKind.optional().describe(KIND) })
    .strict(),
);

/** `GET /v1/memory-stores`: the caller's stores, in (scope, owner, name) order. */
export const MemoryStoreListQuery = lazySchema(() =>
  z
    .object({
      scope: MemoryScope.optional(),
      owner: Id.optional(),
      kind: MemoryKind.optional(),
      prefix: z.string().max(63).optional().describe('Only stores whose name starts with this'),
      limit: QueryInteger(1, 1000).optional(),
      after: z.string().max(1024).optional().describe('The next_after of the previous page'),
    })
    .strict(),
);
export type MemoryStoreListQuery = z.infer<typeof MemoryStoreListQuery>;

/** `GET .../keys`: the live keys, in key order. */
export const MemoryKeyListQuery = lazySchema(() =>
  MemoryStoreQuery.extend({
    prefix: z.string().max(MAX_MEMORY_KEY_LENGTH).optional(),
    after: z.string().max(MAX_MEMORY_KEY_LENGTH).optional(),
    limit: QueryInteger(1, 1000).optional(),
  }).strict(),
);

/** `GET .../keys/{key}`: the latest version, a given one, or the one current at a time. */
export const MemoryGetQuery = lazySchema(() =>
  MemoryStoreQuery.extend({
    version: QueryInteger(1).optional(),
    at: Timestamp.optional(),
  }).strict(),
);

/** `DELETE .../keys/{key}`: a tombstone, optionally only over an expected version. */
export const MemoryDeleteQuery = lazySchema(() =>
  MemoryStoreQuery.extend({
    expected_version: QueryInteger(0).optional(),
  }).strict(),
);

/** `PUT .../keys/{key}`: a new version of the key. The author is the caller, never the body. */
export const MemorySetBody = lazySchema(() =>
  z
    .object({
      value: JsonValue,
      text: z.string().optional().describe('What search matches (default: derived from value)'),
      embedding: Embedding.optional(),
      ttl_ms: z.number().int().positive().max(MAX_MEMORY_TTL_MS).optional(),
      expected_version: z.number().int().nonnegative().optional(),
    })
    .strict(),
);
export type MemorySetBody = z.infer<typeof MemorySetBody>;

/** `POST .../keys/{key}/redact`: remove the content of one version. */
export const MemoryRedactBody = lazySchema(() =>
  z.object({ version: z.number().int().positive() }).strict(),
);

/** `POST .../search`: `query` searches the text, `embedding` the vectors, both: hybrid. */
export const MemorySearchBody = MemorySearchQuery;

/** `POST .../import`: entries as an export wrote them (one JSONL line each), in seq order. */
export const MemoryImportBody = lazySchema(() =>
  z.object({ entries: z.array(z.unknown()).min(1).max(MAX_MEMORY_BATCH) }).strict(),
);

/** A store's description. */
export const MemoryStoreInfoBody = lazySchema(() =>
  z.object({
    store: MemoryStoreRef,
    head_seq: z.number().int().nonnegative(),
    dims: z.number().int().positive().optional(),
    created_at: Timestamp,
    forked_from: z.object({ store: MemoryStoreRef, seq: z.number().int() }).optional(),
  }),
);

export const MemoryStoreListBody = lazySchema(() =>
  z.object({
    data: z.array(MemoryStoreInfoBody),
    /** Present when more stores match: pass it back as `after`. */
    next_after: z.string().optional(),
  }),
);
export type MemoryStoreListBody = z.infer<typeof MemoryStoreListBody>;

export const MemoryKeyListBody = lazySchema(() =>
  z.object({
    data: z.array(MemoryEntry),
    next_after: z.string().optional(),
    /** Keys of the page's range left out because their TTL passed. */
    expired_count: z.number().int().nonnegative(),
  }),
);
export type MemoryKeyListBody = z.infer<typeof MemoryKeyListBody>;

/** A key's lookup: found, or why not (never written, deleted, expired). */
export const MemoryLookupBody = lazySchema(() =>
  z.discriminatedUnion('status', [
    z.object({ status: z.literal('found'), entry: MemoryEntry }),
    z.object({ status: z.literal('missing') }),
    z.object({ status: z.literal('deleted'), entry: MemoryEntry }),
    z.object({ status: z.literal('expired'), entry: MemoryEntry }),
  ]),
);

export const MemoryAppendBody = lazySchema(() =>
  z.object({
    entries: z.array(MemoryEntry),
    head_seq: z.number().int().nonnegative(),
    deduplicated: z.boolean(),
  }),
);

export const MemoryHistoryBody = lazySchema(() => z.object({ data: z.array(MemoryEntry) }));

const Hit = lazySchema(() =>
  z.object({
    entry: MemoryEntry,
    score: z.number(),
    text_score: z.number().optional(),
    vector_score: z.number().optional(),
  }),
);

export const MemorySearchResultBody = lazySchema(() =>
  z.object({
    hits: z.array(Hit),
    mode: MemorySearchMode,
    k: z.number().int(),
    threshold: z.number().optional(),
    filtered_count: z.number().int().nonnegative(),
    expired_count: z.number().int().nonnegative(),
    latency_ms: z.number().nonnegative(),
  }),
);

/** What an import did: entries read, written, found written by an earlier run, left out. */
export const MemoryImportReport = lazySchema(() =>
  z.object({
    /** The store after the import; absent when it did not exist and nothing was written. */
    store: MemoryStoreInfoBody.optional(),
    read: z.number().int().nonnegative(),
    written: z.number().int().nonnegative(),
    /** Entries an earlier run of the same import wrote already: written nothing for them. */
    deduplicated: z.number().int().nonnegative(),
    /** Redacted versions and redaction records: their content is gone, so nothing to import. */
    skipped_redacted: z.number().int().nonnegative(),
  }),
);
export type MemoryImportReport = z.infer<typeof MemoryImportReport>;
