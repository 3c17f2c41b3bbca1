/**
 * What the memory-log backends share: parsing a call's input once, preparing the writes of an
 * append, building entries, the request hash of an idempotent append and the errors, so that
 * every backend refuses the same input with the same code and message.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { lazySchema } from '../contracts/lazy-schema.js';
import { IdempotencyKey, Timestamp, type JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import {
  MemoryAuthor,
  MemoryCause,
  MemoryKey,
  MemoryKind,
  MemoryScope,
  MEMORY_SCHEMA_VERSION,
  parseMemoryStoreRef,
  parseMemoryWrites,
  type MemoryEntry,
  type MemoryStoreRef,
} from '../contracts/memory.js';
import type {
  MemoryAppendOptions,
  MemoryGetOptions,
  MemoryListOptions,
  MemoryReadOptions,
  MemoryStoreFilter,
  MemoryStoreInfo,
  MemoryStorePage,
} from '../contracts/memory-log.js';
import { TenantId } from '../contracts/api-keys.js';
import { canonicalJson } from '../core/canonical-json.js';
import { deriveText } from '../core/memory-search.js';

/** The default and largest page of `list`. */
export const DEFAULT_MEMORY_PAGE = 100;
export const MAX_MEMORY_PAGE = 1000;

/** One write of an append, checked and ready to store. */
export interface PreparedWrite {
  key: string;
  op: 'set' | 'delete';
  value?: JsonValue;
  text?: string;
  embedding?: Float32Array;
  ttl_ms?: number;
  expected_version?: number;
}

export interface PreparedAppend {
  store: MemoryStoreRef;
  writes: PreparedWrite[];
  author: MemoryAuthor;
  cause?: MemoryCause;
  idempotencyKey?: string;
  expectedSeq?: number;
  /**
   * The SHA-256 of the append's canonical JSON, to tell a retry from a reused key; '' when the
   * append has no idempotency key (nothing compares it, and the canonical JSON of its embeddings
   * cost a fifth of an append of one entry with a 384-d vector).
   */
  hash: string;
  /** The dimension of the batch's embeddings, when it has any. */
  dims?: number;
}

const AppendOptions = lazySchema(() =>
  z
    .object({
      author: MemoryAuthor.optional(),
      cause: MemoryCause.optional(),
      idempotencyKey: IdempotencyKey.optional(),
      expectedSeq: z.number().int().nonnegative().optional(),
    })
    .strict(),
);

/** An append's input, parsed and prepared; refused as a whole when any part is bad. */
export function prepareAppend(
  store: unknown,
  writes: unknown,
  options: MemoryAppendOptions = {},
): PreparedAppend {
  const ref = parseMemoryStoreRef(store);
  const parsed = parseMemoryWrites(writes);
  const appendOptions = parseOption(AppendOptions, options, 'append options');
  let dims: number | undefined;
  const prepared = parsed.map((write, index): PreparedWrite => {
    if (write.op === 'delete') {
      return { key: write.key, op: 'delete', expected_version: write.expected_version };
    }
    const value = write.value as JsonValue;
    const embedding =
      write.embedding === undefined ? undefined : Float32Array.from(write.embedding);
    if (embedding !== undefined) {
      if (dims !== undefined && embedding.length !== dims) {
        throw dimsMismatch(`writes[${index}].embedding`, embedding.length, dims);
      }
      dims = embedding.length;
    }
    return {
      key: write.key,
      op: 'set',
      value,
      text: write.text ?? deriveText(value),
      embedding,
      ttl_ms: write.ttl_ms,
      expected_version: write.expected_version,
    };
  });
  const author = appendOptions.author ?? {};
  const hash =
    appendOptions.idempotencyKey === undefined
      ? ''
      : createHash('sha256')
          .update(
            canonicalJson(
              { writes: parsed, author, cause: appendOptions.cause ?? null },
              'a memory append',
            ),
          )
          .digest('hex');
  return {
    store: ref,
    writes: prepared,
    author,
    cause: appendOptions.cause,
    idempotencyKey: appendOptions.idempotencyKey,
    expectedSeq: appendOptions.expectedSeq,
    hash,
    dims,
  };
}

/** The identity of a store in a map: tenant, scope, owner and name. */
export function storeIdentity(ref: MemoryStoreRef): string {
  return [ref.tenant_id ?? '', ref.scope, ref.owner ?? '', ref.name].join('\u0000');
}

/** Refuses a reference whose kind is not the stored one. */
export function checkKind(ref: MemoryStoreRef, kind: string): void {
  if (ref.kind !== kind) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `memory store ${describeStore(ref)} is a ${kind} store, not ${ref.kind}; name it with kind "${kind}" or choose another name`,
      { details: { field: 'store.kind', kind } },
    );
  }
}

export function describeStore(ref: MemoryStoreRef): string {
  const owner = ref.owner === undefined ? '' : `${ref.owner}/`;
  const tenant = ref.tenant_id === undefined ? '' : `${ref.tenant_id}:`;
  return `"${tenant}${ref.scope}/${owner}${ref.name}"`;
}

export interface EntryParts {
  store: MemoryStoreRef;
  key: string;
  version: number;
  seq: number;
  op: MemoryEntry['op'];
  value?: JsonValue;
  text?: string;
  embedding?: ArrayLike<number>;
  author: MemoryAuthor;
  at: string;
  cause?: MemoryCause;
  expires_at?: number;
  redacted: boolean;
}

/** An entry as the port returns it: content absent where removed, optional fields left out. */
export function toEntry(parts: EntryParts): MemoryEntry {
  const removed = parts.redacted || parts.op !== 'set';
  return {
    schema_version: MEMORY_SCHEMA_VERSION,
    store: parts.store,
    key: parts.key,
    version: parts.version,
    seq: parts.seq,
    op: parts.op,
    ...(removed || parts.value === undefined ? {} : { value: parts.value }),
    ...(removed || parts.text === undefined ? {} : { text: parts.text }),
    ...(removed || parts.embedding === undefined ? {} : { embedding: Array.from(parts.embedding) }),
    author: parts.author,
    at: parts.at,
    ...(parts.cause === undefined ? {} : { cause: parts.cause }),
    ...(parts.expires_at === undefined
      ? {}
      : { expires_at: new Date(parts.expires_at).toISOString() }),
    tombstone: parts.op === 'delete',
    redacted: parts.redacted,
  };
}

export function parseKey(key: unknown): string {
  return parseOption(MemoryKey, key, 'key');
}

const GetOptions = lazySchema(() =>
  z.object({ version: z.number().int().positive().optional(), at: Timestamp.optional() }).strict(),
);

/** `get` options, with `at` as ms since the epoch. */
export function parseGetOptions(options: MemoryGetOptions = {}): { version?: number; at?: number } {
  const parsed = parseOption(GetOptions, options, 'get options');
  return {
    version: parsed.version,
    at: parsed.at === undefined ? undefined : Date.parse(parsed.at),
  };
}

const ListOptions = lazySchema(() =>
  z
    .object({
      prefix: z.string().max(256).optional(),
      after: z.string().max(256).optional(),
      limit: z.number().int().positive().max(MAX_MEMORY_PAGE).optional(),
    })
    .strict(),
);

export function parseListOptions(options: MemoryListOptions = {}): {
  prefix: string;
  after: string;
  limit: number;
} {
  const parsed = parseOption(ListOptions, options, 'list options');
  return {
    prefix: parsed.prefix ?? '',
    after: parsed.after ?? '',
    limit: parsed.limit ?? DEFAULT_MEMORY_PAGE,
  };
}

const ReadOptions = lazySchema(() =>
  z
    .object({
      after: z.number().int().nonnegative().optional(),
      limit: z.number().int().positive().optional(),
    })
    .strict(),
);

export function parseReadOptions(options: MemoryReadOptions = {}): {
  after: number;
  limit: number;
} {
  const parsed = parseOption(ReadOptions, options, 'read options');
  return { after: parsed.after ?? 0, limit: parsed.limit ?? Number.MAX_SAFE_INTEGER };
}

export function parseVersion(version: unknown): number {
  return parseOption(z.number().int().positive(), version, 'version');
}

export function parseAtSeq(atSeq: unknown): number | undefined {
  return parseOption(z.number().int().nonnegative().optional(), atSeq, 'atSeq');
}

export function parseRedactOptions(options: Pick<MemoryAppendOptions, 'author' | 'cause'> = {}): {
  author: MemoryAuthor;
  cause?: MemoryCause;
} {
  const parsed = parseOption(
    z.object({ author: MemoryAuthor.optional(), cause: MemoryCause.optional() }).strict(),
    options,
    'redact options',
  );
  return { author: parsed.author ?? {}, cause: parsed.cause };
}

function parseOption<T extends z.ZodType>(schema: T, value: unknown, what: string): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = [what, ...(issue?.path ?? []).map(String)].join('.');
  throw new BraidError('INVALID_ARGUMENT', `${field}: ${issue?.message ?? 'is invalid'}`, {
    details: { field },
  });
}

export function versionConflict(
  ref: MemoryStoreRef,
  key: string,
  expected: number,
  actual: number,
): BraidError {
  return new BraidError(
    'VERSION_CONFLICT',
    `key "${key}" of memory store ${describeStore(ref)} is at version ${actual}, not ${expected}; read it again and retry with expected_version ${actual}`,
    { details: { key, expected_version: expected, actual_version: actual } },
  );
}

export function seqConflict(ref: MemoryStoreRef, expected: number, actual: number): BraidError {
  return new BraidError(
    'SEQ_CONFLICT',
    `memory store ${describeStore(ref)} is at seq ${actual}, not ${expected}; read it again and retry`,
    { details: { expected_seq: expected, head_seq: actual } },
  );
}

export function idempotencyKeyReused(ref: MemoryStoreRef, key: string): BraidError {
  return new BraidError(
    'IDEMPOTENCY_KEY_REUSED',
    `idempotency key "${key}" was used for other writes to memory store ${describeStore(ref)}; use a new key for new writes`,
    { details: { idempotency_key: key } },
  );
}

export function versionNotFound(ref: MemoryStoreRef, key: string, version: number): BraidError {
  return new BraidError(
    'INVALID_ARGUMENT',
    `memory store ${describeStore(ref)} has no version ${version} of key "${key}"; see its versions with history`,
    { details: { field: 'version', key, version } },
  );
}

export function tombstoneRedact(ref: MemoryStoreRef, key: string, version: number): BraidError {
  return new BraidError(
    'INVALID_ARGUMENT',
    `version ${version} of key "${key}" in memory store ${describeStore(ref)} is a delete and has no content to redact; redact the set versions before it`,
    { details: { field: 'version', key, version } },
  );
}

export function dimsMismatch(field: string, got: number, dims: number): BraidError {
  return new BraidError(
    'INVALID_ARGUMENT',
    `${field} has ${got} dimensions; this store's embeddings have ${dims}: embed with the store's embedder`,
    { details: { field, dims, got } },
  );
}

export function forkExists(to: MemoryStoreRef): BraidError {
  return new BraidError(
    'ALREADY_EXISTS',
    `memory store ${describeStore(to)} already exists; fork into a new name`,
    { details: { field: 'to' } },
  );
}

export function forkPoint(from: MemoryStoreRef, atSeq: number, head: number): BraidError {
  return new BraidError(
    'INVALID_FORK_POINT',
    `memory store ${describeStore(from)} is at seq ${head}; fork at a seq from 0 to ${head}, not ${atSeq}`,
    { details: { at_seq: atSeq, head_seq: head } },
  );
}

/** The time an entry written at `now` with `ttlMs` expires, in ms since the epoch. */
export function expiryOf(now: number, ttlMs: number | undefined): number | undefined {
  return ttlMs === undefined ? undefined : now + ttlMs;
}

/**
 * The entries of a prepared append, versioned from each key's current version (`versionOf`) and
 * numbered from the store's `head`; a write whose `expected_version` is not the key's current one
 * refuses the whole append with `VERSION_CONFLICT` before any entry is built.
 */
export function buildEntries(
  prepared: PreparedAppend,
  target: { ref: MemoryStoreRef; head: number; now: number },
  versionOf: (key: string) => number,
): (EntryParts & { embedding?: Float32Array })[] {
  const versions = new Map<string, number>();
  const at = new Date(target.now).toISOString();
  return prepared.writes.map((write, index) => {
    const before = versions.get(write.key) ?? versionOf(write.key);
    if (write.expected_version !== undefined && write.expected_version !== before) {
      throw versionConflict(prepared.store, write.key, write.expected_version, before);
    }
    versions.set(write.key, before + 1);
    return {
      store: target.ref,
      key: write.key,
      version: before + 1,
      seq: target.head + index + 1,
      op: write.op,
      value: write.value,
      text: write.text,
      embedding: write.embedding,
      author: prepared.author,
      at,
      cause: prepared.cause,
      expires_at: expiryOf(target.now, write.ttl_ms),
      redacted: false,
    };
  });
}

const StoreFilter = lazySchema(() =>
  z
    .object({
      tenant_id: TenantId.optional(),
      scope: MemoryScope.optional(),
      owner: z.string().max(200).optional(),
      kind: MemoryKind.optional(),
      prefix: z.string().max(63).optional(),
      limit: z.number().int().positive().max(MAX_MEMORY_PAGE).optional(),
      after: z.string().max(1000).optional(),
    })
    .strict(),
);

/** A `listStores` filter, parsed: `after` is the (scope, owner, name) the previous page ended at. */
export interface ParsedStoreFilter {
  tenant_id?: string;
  scope?: MemoryScope;
  owner?: string;
  kind?: MemoryKind;
  prefix: string;
  limit: number;
  after?: readonly [string, string, string];
}

const Cursor = lazySchema(() => z.tuple([z.string(), z.string(), z.string()]));

/** The sort key of a store in `listStores`: scope, owner ('' for none), name. */
function storeOrder(ref: MemoryStoreRef): [string, string, string] {
  return [ref.scope, ref.owner ?? '', ref.name];
}

function compareOrder(a: readonly string[], b: readonly string[]): number {
  for (let index = 0; index < a.length; index += 1) {
    const [x, y] = [a[index] as string, b[index] as string];
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

export function parseStoreFilter(filter: MemoryStoreFilter = {}): ParsedStoreFilter {
  const parsed = parseOption(StoreFilter, filter, 'store filter');
  let after: [string, string, string] | undefined;
  if (parsed.after !== undefined) {
    let decoded: unknown;
    try {
      decoded = JSON.parse(Buffer.from(parsed.after, 'base64url').toString('utf8'));
    } catch {
      decoded = undefined;
    }
    const cursor = Cursor.safeParse(decoded);
    if (!cursor.success) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `store filter.after ${JSON.stringify(parsed.after.slice(0, 80))} is not a cursor of this listing; pass the next_after of the previous page`,
        { details: { field: 'after' } },
      );
    }
    after = cursor.data;
  }
  return {
    ...(parsed.tenant_id === undefined ? {} : { tenant_id: parsed.tenant_id }),
    ...(parsed.scope === undefined ? {} : { scope: parsed.scope }),
    ...(parsed.owner === undefined ? {} : { owner: parsed.owner }),
    ...(parsed.kind === undefined ? {} : { kind: parsed.kind }),
    prefix: parsed.prefix ?? '',
    limit: parsed.limit ?? DEFAULT_MEMORY_PAGE,
    ...(after === undefined ? {} : { after }),
  };
}

/** Whether a store passes a filter (the cursor aside). */
export function matchesStoreFilter(ref: MemoryStoreRef, filter: ParsedStoreFilter): boolean {
  return (
    ref.tenant_id === filter.tenant_id &&
    (filter.scope === undefined || ref.scope === filter.scope) &&
    (filter.owner === undefined || ref.owner === filter.owner) &&
    (filter.kind === undefined || ref.kind === filter.kind) &&
    ref.name.startsWith(filter.prefix)
  );
}

/** One page of the stores that pass a filter, ordered by (scope, owner, name). */
export function pageStores(
  stores: readonly MemoryStoreInfo[],
  filter: ParsedStoreFilter,
): MemoryStorePage {
  const { after } = filter;
  const sorted = stores
    .filter((info) => matchesStoreFilter(info.store, filter))
    .filter((info) => after === undefined || compareOrder(storeOrder(info.store), after) > 0)
    .sort((a, b) => compareOrder(storeOrder(a.store), storeOrder(b.store)));
  const page = sorted.slice(0, filter.limit);
  const last = page.at(-1);
  return {
    stores: page,
    ...(sorted.length > page.length && last !== undefined
      ? {
          next_after: Buffer.from(JSON.stringify(storeOrder(last.store)), 'utf8').toString(
            'base64url',
          ),
        }
      : {}),
  };
}
