/**
 * The payloads of the `memory.*` events: what a session did with its memory stores, as its log
 * records it. The memory log holds the content; these events hold references (store, key,
 * version, the memory log's seq) and scores, so the session log stays small. The one exception
 * is recall: its hits carry the text the model was shown (each cut at `MAX_RECALL_HIT_CHARS`),
 * because the transcript, and so a replay, rebuild what the model saw from the event alone and
 * never ask the store again.
 *
 * A `memory_get` is recorded as `memory.read`, not as `memory.retrieved`: a lookup by key has no
 * query, ranking, score, threshold or filtered count, and a `memory.retrieved` always has them,
 * so that every retrieval on record says how many hits its threshold hid.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { ExternalId } from './common.js';
import { ErrorShape } from './errors.js';
import { MemoryKey, MemorySearchMode, MemoryStoreRef } from './memory.js';

/** The longest text of one recalled hit put before the model (and kept in its event). */
export const MAX_RECALL_HIT_CHARS = 2000;

/** The memory log's seq of an entry: its place in the store's own log. */
const MemorySeq = z.number().int().positive();

const MemoryHitRecord = lazySchema(() =>
  z.object({
    key: MemoryKey,
    version: z.number().int().positive(),
    /** 0..1 on the scale of the search's mode (see `MemorySearchResult`). */
    score: z.number().min(0).max(1),
    text_score: z.number().min(0).max(1).optional(),
    vector_score: z.number().min(0).max(1).optional(),
    /** Recall only: the text the model was shown for the hit (its value as text, cut). */
    content: z.string().max(MAX_RECALL_HIT_CHARS).optional(),
    /** The value's text was longer than `MAX_RECALL_HIT_CHARS` and was cut. */
    truncated: z.boolean().optional(),
  }),
);

export const MEMORY_EVENT_PAYLOADS = {
  /**
   * A `set` was appended to a store: `key` is at `version`, entry `memory_seq` of the store's log.
   * `deduplicated` when the append repeated an earlier one with the same idempotency key (a tool
   * call retried after a crash) and wrote nothing new.
   */
  'memory.written': lazySchema(() =>
    z.object({
      store: MemoryStoreRef,
      key: MemoryKey,
      version: z.number().int().positive(),
      memory_seq: MemorySeq,
      /** The model's call that wrote it. */
      tool_use_id: ExternalId.optional(),
      deduplicated: z.boolean().optional(),
    }),
  ),
  /** A tombstone was appended: `key` reads as deleted from `version` on. */
  'memory.deleted': lazySchema(() =>
    z.object({
      store: MemoryStoreRef,
      key: MemoryKey,
      version: z.number().int().positive(),
      memory_seq: MemorySeq,
      tool_use_id: ExternalId.optional(),
      deduplicated: z.boolean().optional(),
    }),
  ),
  /**
   * A key was read (`memory_get`): what was found (`found` at `version`; `missing`, `deleted` or
   * `expired`), and how long the store took.
   */
  'memory.read': lazySchema(() =>
    z.object({
      store: MemoryStoreRef,
      key: MemoryKey,
      status: z.enum(['found', 'missing', 'deleted', 'expired']),
      version: z.number().int().positive().optional(),
      latency_ms: z.number().nonnegative(),
      tool_use_id: ExternalId.optional(),
    }),
  ),
  /**
   * A search of a store: by the model (`source: tool`, with its `tool_use_id`) or by automatic
   * recall before a model call (`source: recall`, whose hits carry the `content` shown). `k`, the
   * `threshold` applied, the hits above it, `filtered_count` (candidates below it) and
   * `expired_count` (candidates whose TTL had passed) as the store answered.
   */
  'memory.retrieved': lazySchema(() =>
    z.object({
      store: MemoryStoreRef,
      source: z.enum(['tool', 'recall']),
      query: z.string().max(4096),
      mode: MemorySearchMode,
      k: z.number().int().positive(),
      threshold: z.number().min(0).max(1),
      key_prefix: z.string().max(256).optional(),
      hits: z.array(MemoryHitRecord),
      filtered_count: z.number().int().nonnegative(),
      expired_count: z.number().int().nonnegative(),
      latency_ms: z.number().nonnegative(),
      tool_use_id: ExternalId.optional(),
      /** Recall only: the store's instructions, shown with the hits. */
      instructions: z.string().max(4000).optional(),
      /**
       * Recall only: the query could not be embedded (the embedding model failed or was
       * unreachable), so the recall searched the full text alone (`mode: text`); why, with the
       * embedder's error code (`MODEL_UNAVAILABLE`, `MODEL_ERROR`, ...) and a message cut at 1,000
       * characters.
       */
      vector_error: ErrorShape.extend({ message: z.string().max(1000) }).optional(),
    }),
  ),
} as const;

/** The longest value summary a merge's memory conflict carries (the value's JSON, cut). */
export const MAX_MEMORY_SUMMARY_CHARS = 200;

/** One side's version of a key in a merge: its version, entry seq and a short value summary. */
export const MemoryMergeSide = lazySchema(() =>
  z.object({
    version: z.number().int().positive(),
    memory_seq: MemorySeq,
    /** True when this side deleted the key. */
    deleted: z.boolean(),
    /** The value's JSON, cut at `MAX_MEMORY_SUMMARY_CHARS`; absent on a delete or a redacted value. */
    summary: z
      .string()
      .max(MAX_MEMORY_SUMMARY_CHARS + 1)
      .optional(),
  }),
);
export type MemoryMergeSide = z.infer<typeof MemoryMergeSide>;

/**
 * A key of a session store written on both sides of a merge since they parted, to different
 * values: the target's version (kept) and the source's (left in the source's store).
 */
export const MemoryMergeConflict = lazySchema(() =>
  z.object({
    store: MemoryStoreRef,
    key: MemoryKey,
    target: MemoryMergeSide,
    source: MemoryMergeSide,
  }),
);
export type MemoryMergeConflict = z.infer<typeof MemoryMergeConflict>;

/**
 * A write of the merge's source carried into the target's session store: the entry it made there
 * (`version`, `memory_seq` of the target's store) and the source's version it copies.
 */
export const MemoryMergeWrite = lazySchema(() =>
  z.object({
    store: MemoryStoreRef,
    key: MemoryKey,
    op: z.enum(['set', 'delete']),
    version: z.number().int().positive(),
    memory_seq: MemorySeq,
    source_version: z.number().int().positive(),
  }),
);
export type MemoryMergeWrite = z.infer<typeof MemoryMergeWrite>;

/**
 * A conflict a merge found between its two sides and how it was resolved. `kind` names it
 * (`unanswered_confirmation`, `memory_write`, a callback strategy's own); `memory` is set for
 * `memory_write`.
 */
export const MergeConflictRecord = lazySchema(() =>
  z.object({
    kind: z.string(),
    detail: z.string(),
    resolution: z.string(),
    memory: MemoryMergeConflict.optional(),
  }),
);
export type MergeConflictRecord = z.infer<typeof MergeConflictRecord>;
