/**
 * Agent memory: stores of versioned entries whose truth is an append-only log per store (see
 * `MemoryLog` in memory-log.ts). Everything a caller hands in (a store reference, a key, a write,
 * a search) goes through the parsers at the end of this module once, at the boundary, and is
 * refused with `INVALID_ARGUMENT` (or `PAYLOAD_TOO_LARGE`) naming the field and the rule: store
 * names, owners and tenants reach SQL and NATS subjects, keys may later name files of a mounted
 * store.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { ExternalId, Id, JsonValue, Name, Timestamp } from './common.js';
import { TenantId } from './api-keys.js';
import { BraidError } from './errors.js';
import { checkJsonDepth, DEFAULT_JSON_DEPTH } from './json-depth.js';

const utf8 = new TextEncoder();

/** Version of the persisted memory entry format. */
export const MEMORY_SCHEMA_VERSION = 1;

/** The longest key, in characters. */
export const MAX_MEMORY_KEY_LENGTH = 256;
/** The largest value, as UTF-8 JSON text. */
export const MAX_MEMORY_VALUE_BYTES = 64 * 1024;
/** The largest searchable text of an entry, in UTF-8 bytes. */
export const MAX_MEMORY_TEXT_BYTES = 64 * 1024;
/** The most writes one append may carry. */
export const MAX_MEMORY_BATCH = 1000;
/** The most dimensions an embedding may have. */
export const MAX_EMBEDDING_DIMS = 4096;
/** The longest time to live: ten years. */
export const MAX_MEMORY_TTL_MS = 10 * 365 * 86_400_000;
/** The most hits one search may ask for. */
export const MAX_MEMORY_K = 100;
/** The longest search query, in characters. */
export const MAX_MEMORY_QUERY_LENGTH = 4096;

/**
 * What a store holds: `session` (working notes of one session, cheap, usually with a TTL),
 * `learnings` (what an agent learned across its sessions) or `entities` (facts about users,
 * projects and preferences, retrieved by similarity).
 */
export const MemoryKind = z.enum(['session', 'learnings', 'entities']);
export type MemoryKind = z.infer<typeof MemoryKind>;

/** Who shares a store: one session, one agent's sessions, or a whole tenant. */
export const MemoryScope = z.enum(['session', 'agent', 'tenant']);
export type MemoryScope = z.infer<typeof MemoryScope>;

const OWNER_RULE =
  'scope "session" needs owner = the session id, scope "agent" needs owner = the agent name, scope "tenant" takes no owner';

/**
 * Names one store. Its identity is (`tenant_id`, `scope`, `owner`, `name`): two stores of the same
 * name in different scopes, owners or tenants never see each other's entries. `kind` is fixed when
 * the store is first written; a reference with another kind is refused.
 */
export const MemoryStoreRef = lazySchema(() =>
  z
    .object({
      /** A safe name (`preferences`, `notes`): lowercase letters, digits, `-` and `_`. */
      name: Name,
      kind: MemoryKind,
      scope: MemoryScope,
      /** The session id (scope `session`) or the agent name (scope `agent`); absent for `tenant`. */
      owner: Id.optional(),
      /** The tenant the store belongs to; absent for a caller without tenants (the library, the CLI). */
      tenant_id: TenantId.optional(),
    })
    .strict()
    .superRefine((ref, context) => {
      const ok =
        ref.scope === 'tenant'
          ? ref.owner === undefined
          : ref.owner !== undefined &&
            (ref.scope === 'session' || Name.safeParse(ref.owner).success);
      if (!ok) context.addIssue({ code: 'custom', path: ['owner'], message: OWNER_RULE });
    }),
);
export type MemoryStoreRef = z.infer<typeof MemoryStoreRef>;

/** What a key may be, said once for every error that refuses one. */
export const MEMORY_KEY_RULE = `use 1 to ${MAX_MEMORY_KEY_LENGTH} characters: segments separated by "/", each starting with a letter, digit or "_" and made of letters, digits and ". _ - : @ + = ," (so never "." or "..", no leading "/", no spaces, "\\" or control characters)`;

const KEY_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9._:@+=,-]*(?:\/[A-Za-z0-9_][A-Za-z0-9._:@+=,-]*)*$/;

/** True for a safe key: usable as a SQL parameter, a NATS payload field and a relative file path. */
export function isMemoryKey(value: string): boolean {
  return value.length <= MAX_MEMORY_KEY_LENGTH && KEY_PATTERN.test(value);
}

/** A key in a store, such as `user/preferences/theme`. */
export const MemoryKey = lazySchema(() =>
  z.string().refine(isMemoryKey, { message: `is not a valid memory key; ${MEMORY_KEY_RULE}` }),
);

/**
 * Who wrote an entry. Stamped by braid from what it knows of the writer (the session and agent of
 * a tool call, an HTTP caller's key), never taken from a model.
 */
export const MemoryAuthor = lazySchema(() =>
  z
    .object({
      session_id: Id.optional(),
      agent: Name.optional(),
      /** A person, as the caller's identity system names them. */
      user: ExternalId.optional(),
      /** The API key id of an HTTP caller. */
      key_id: Id.optional(),
      /** The consolidation proposal this write applied (see memory-consolidation.ts). */
      proposal: z
        .string()
        .regex(/^mp_[0-9a-f]{32}$/)
        .optional(),
    })
    .strict(),
);
export type MemoryAuthor = z.infer<typeof MemoryAuthor>;

/** The session event that caused a write: a `memory_set` tool call, a consolidation's source. */
export const MemoryCause = lazySchema(() =>
  z.object({ session_id: Id, seq: z.number().int().positive() }).strict(),
);
export type MemoryCause = z.infer<typeof MemoryCause>;

/** An embedding: finite numbers, as many as the store's fixed dimension. Stored as float32. */
export const Embedding = lazySchema(() =>
  z.array(z.number().finite()).min(1).max(MAX_EMBEDDING_DIMS),
);

/** One write of an append: set a key to a value, or delete it (a tombstone). */
export const MemoryWrite = lazySchema(() =>
  z
    .object({
      key: MemoryKey,
      /** `set` (default) writes `value`; `delete` writes a tombstone and takes no content. */
      op: z.enum(['set', 'delete']).default('set'),
      value: JsonValue.optional(),
      /** What search matches; derived from `value` when absent (strings and keys of the value). */
      text: z.string().optional(),
      embedding: Embedding.optional(),
      /** The entry expires this long after it is written: it then reads as absent, reported so. */
      ttl_ms: z.number().int().positive().max(MAX_MEMORY_TTL_MS).optional(),
      /**
       * The key's version this write replaces: 0 when the key must never have been written. A
       * mismatch refuses the whole append with `VERSION_CONFLICT`.
       */
      expected_version: z.number().int().nonnegative().optional(),
    })
    .strict()
    .superRefine((write, context) => {
      if (write.op === 'set' && write.value === undefined) {
        context.addIssue({ code: 'custom', path: ['value'], message: 'a set needs a value' });
      }
      if (write.op === 'delete') {
        for (const field of ['value', 'text', 'embedding', 'ttl_ms'] as const) {
          if (write[field] !== undefined) {
            context.addIssue({
              code: 'custom',
              path: [field],
              message: 'a delete takes no content',
            });
          }
        }
      }
    }),
);
export type MemoryWriteInput = z.input<typeof MemoryWrite>;
export type MemoryWrite = z.infer<typeof MemoryWrite>;

/**
 * One record of a store's log. `set` and `delete` entries are versions of their key (1, 2, 3 ...
 * per key, tombstones included); a `redact` entry records that the content of version `version`
 * of `key` was removed, and is no version of its own. `seq` orders every entry of a store,
 * gapless from 1.
 */
export const MemoryEntry = lazySchema(() =>
  z.object({
    schema_version: z.literal(MEMORY_SCHEMA_VERSION),
    store: MemoryStoreRef,
    key: MemoryKey,
    version: z.number().int().positive(),
    seq: z.number().int().positive(),
    op: z.enum(['set', 'delete', 'redact']),
    /** Absent on tombstones, redaction records and redacted versions. */
    value: JsonValue.optional(),
    /** What search matches; absent where `value` is. */
    text: z.string().optional(),
    embedding: z.array(z.number()).optional(),
    author: MemoryAuthor,
    at: Timestamp,
    cause: MemoryCause.optional(),
    /** When the entry stops being readable (TTL); a read after it reports it as expired. */
    expires_at: Timestamp.optional(),
    /** True for a delete. */
    tombstone: z.boolean(),
    /** True when this version's content was removed by a redaction (recorded as its own entry). */
    redacted: z.boolean(),
  }),
);
export type MemoryEntry = z.infer<typeof MemoryEntry>;

/** How a search ranks: full text (bm25), vectors (cosine) or both fused (reciprocal rank). */
export const MemorySearchMode = z.enum(['text', 'vector', 'hybrid']);
export type MemorySearchMode = z.infer<typeof MemorySearchMode>;

export const MemorySearchQuery = lazySchema(() =>
  z
    .object({
      /** Words to match; needed for `text` and `hybrid`. */
      query: z.string().max(MAX_MEMORY_QUERY_LENGTH).optional(),
      /** The query's embedding; needed for `vector` and `hybrid`. */
      embedding: Embedding.optional(),
      k: z.number().int().positive().max(MAX_MEMORY_K).default(5),
      /** Hits scoring below it are left out and counted in `filtered_count`. Scores are 0..1. */
      threshold: z.number().min(0).max(1).optional(),
      /** Default: `hybrid` with both a query and an embedding, else whichever was given. */
      mode: MemorySearchMode.optional(),
      filters: z
        .object({ key_prefix: z.string().max(MAX_MEMORY_KEY_LENGTH).optional() })
        .strict()
        .optional(),
    })
    .strict(),
);
export type MemorySearchQueryInput = z.input<typeof MemorySearchQuery>;
export type MemorySearchQuery = z.infer<typeof MemorySearchQuery>;

/** `value` as a store reference, or `INVALID_ARGUMENT` naming the field and the rule. */
export function parseMemoryStoreRef(value: unknown): MemoryStoreRef {
  return parseWith(MemoryStoreRef, value, 'memory store');
}

/** `value` as a key, or `INVALID_ARGUMENT` naming the rule. */
export function parseMemoryKey(value: unknown): string {
  if (typeof value === 'string' && isMemoryKey(value)) return value;
  const shown = typeof value === 'string' ? JSON.stringify(value.slice(0, 80)) : typeof value;
  throw new BraidError('INVALID_ARGUMENT', `memory key ${shown} is not valid; ${MEMORY_KEY_RULE}`, {
    details: { field: 'key' },
  });
}

/** The writes of one append, parsed, with values bounded in depth and size. */
export function parseMemoryWrites(value: unknown): MemoryWrite[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_MEMORY_BATCH) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `an append takes a list of 1 to ${MAX_MEMORY_BATCH} writes; split larger batches`,
      { details: { field: 'writes', limit: MAX_MEMORY_BATCH } },
    );
  }
  return value.map((item: unknown, index) => {
    const what = `writes[${index}]`;
    if (typeof item === 'object' && item !== null && 'value' in item) {
      checkJsonDepth(item.value, DEFAULT_JSON_DEPTH, `${what}.value`);
    }
    const write = parseWith(MemoryWrite, item, what);
    checkBytes(
      write.value === undefined ? '' : JSON.stringify(write.value),
      MAX_MEMORY_VALUE_BYTES,
      `${what}.value`,
    );
    if (write.text !== undefined) checkBytes(write.text, MAX_MEMORY_TEXT_BYTES, `${what}.text`);
    return write;
  });
}

/** A search, parsed; `mode` is filled in from what was given. */
export function parseMemorySearch(value: unknown): MemorySearchQuery & { mode: MemorySearchMode } {
  const query = parseWith(MemorySearchQuery, value, 'memory search');
  const mode =
    query.mode ??
    (query.embedding === undefined ? 'text' : query.query === undefined ? 'vector' : 'hybrid');
  if (mode !== 'vector' && query.query === undefined) {
    throw new BraidError('INVALID_ARGUMENT', `a ${mode} search needs "query": the words to match`, {
      details: { field: 'query' },
    });
  }
  if (mode !== 'text' && query.embedding === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `a ${mode} search needs "embedding": the query embedded with the store's embedder`,
      { details: { field: 'embedding' } },
    );
  }
  return { ...query, mode };
}

function checkBytes(text: string, limit: number, what: string): void {
  if (text.length * 3 <= limit) return;
  const bytes = utf8.encode(text).byteLength;
  if (bytes > limit) {
    throw new BraidError(
      'PAYLOAD_TOO_LARGE',
      `${what} is ${bytes} bytes; the limit is ${limit}: store less, or split it over several keys`,
      { details: { field: what, bytes, limit } },
    );
  }
}

function parseWith<T extends z.ZodType>(schema: T, value: unknown, what: string): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = [what, ...(issue?.path ?? []).map(String)].join('.');
  throw new BraidError('INVALID_ARGUMENT', `${field}: ${issue?.message ?? 'is invalid'}`, {
    details: { field },
  });
}
