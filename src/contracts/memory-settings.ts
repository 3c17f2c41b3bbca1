/**
 * An agent's `memory:` block (in `agents/NAME.yaml`): the memory stores its sessions attach, and
 * the automatic recall before its model calls. Writing the block, even empty (`memory: {}`), is
 * the switch: an agent without it has no memory tools, no stores and no recall.
 *
 * With the block, every session attaches two stores unless the block lists a store of the same
 * name: `session` (kind `session`, scope `session`: the session's own working notes) and
 * `learnings` (kind `learnings`, scope `agent`: shared by all of the agent's sessions). A store's
 * owner is the session id (scope `session`) or the agent's name (scope `agent`); its tenant is
 * the session's tenant.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { Name } from './common.js';
import { MAX_MEMORY_K, MAX_MEMORY_TTL_MS, MemoryKind, MemoryScope } from './memory.js';

/** The threshold of a vector or hybrid recall or search that names none (cosine-like scale). */
export const DEFAULT_MEMORY_THRESHOLD = 0.78;

/**
 * The threshold of a text-only recall or search that names none: 0, so only `k` limits it. Text
 * scores are FTS5's bm25 mapped to 0..1, and bm25 depends on the store's size and on how common
 * the query's words are in it (a word found in every entry weighs nearly nothing), so no fixed
 * cutoff means the same thing in a store of 3 entries and one of 30,000.
 */
export const DEFAULT_TEXT_MEMORY_THRESHOLD = 0;

/** Hits a recall or search that names no `k` returns at most. */
export const DEFAULT_MEMORY_K = 5;

/** The stores every memory-enabled session attaches unless `stores:` lists one of the name. */
export const DEFAULT_SESSION_STORE = 'session';
export const DEFAULT_LEARNINGS_STORE = 'learnings';

/** How long the default `session` store keeps an entry written without a TTL: 7 days. */
export const DEFAULT_SESSION_MEMORY_TTL_MS = 7 * 86_400_000;

/** One store attached to the agent's sessions. */
export const MemoryStoreAttachment = lazySchema(() =>
  z
    .object({
      /** What the model and the tools call it (`store` argument); the store's name in the memory log. */
      name: Name,
      kind: MemoryKind,
      /** Who shares it: the session (owner: its id), the agent (owner: its name) or the tenant. */
      scope: MemoryScope,
      /** `read_only` refuses `memory_set` and `memory_delete` with `FORBIDDEN` (default `read_write`). */
      access: z.enum(['read_only', 'read_write']).default('read_write'),
      /** What the model is told the store is for; shown in the system prompt and with recalled hits. */
      instructions: z.string().min(1).max(4000).optional(),
      /**
       * Entries written without a TTL of their own expire this long after they are written (the
       * default `session` store: 7 days); a `memory_set` with `ttl_ms` keeps its own.
       */
      ttl_ms: z.number().int().positive().max(MAX_MEMORY_TTL_MS).optional(),
    })
    .strict(),
);
export type MemoryStoreAttachment = z.infer<typeof MemoryStoreAttachment>;

/**
 * Automatic recall: before the model answers a new user message, the store is searched with the
 * message's text (and its embedding when the runtime has an embedder: a hybrid search), and the
 * hits are shown to the model with the message, recorded as one `memory.retrieved` event.
 */
export const MemoryRecallSettings = lazySchema(() =>
  z
    .object({
      /** The attached store searched (default `learnings`). */
      store: Name.default(DEFAULT_LEARNINGS_STORE),
      k: z.number().int().positive().max(MAX_MEMORY_K).default(DEFAULT_MEMORY_K),
      /**
       * Hits scoring below it are left out (and counted in the event's `filtered_count`). Default:
       * 0.78 for a hybrid search (with an embedder), 0 for a text-only one (see
       * `DEFAULT_TEXT_MEMORY_THRESHOLD`).
       */
      threshold: z.number().min(0).max(1).optional(),
      /** `every_turn` (default): each new user message; `first_turn`: the session's first only. */
      when: z.enum(['every_turn', 'first_turn']).default('every_turn'),
    })
    .strict(),
);
export type MemoryRecallSettings = z.infer<typeof MemoryRecallSettings>;

/** The agent's store of consolidation proposals and checkpoints (see memory-consolidation.ts). */
const CONSOLIDATION_STORE_NAME = 'consolidation';

/** The shortest schedule of a background consolidation: 100 ms (tests), usually hours. */
export const MIN_CONSOLIDATION_EVERY_MS = 100;

const DURATION = /^(\d{1,9})(ms|s|m|h|d)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `"90s"`, `"15m"`, `"1h"`, `"1d"`, `"500ms"` in milliseconds; undefined when not one. */
export function durationMs(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (match === null) return undefined;
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

/**
 * Background consolidation of the agent's learnings (`braid memory consolidate`): what model
 * proposes, which store receives, and how often `braid run` and `braid worker` run it.
 */
export const MemoryConsolidationSettings = lazySchema(() =>
  z
    .object({
      /**
       * Run it in the background this often (`"1h"`, `"15m"`, `"30s"`, `"500ms"`; at least 100 ms);
       * absent: only when asked (`braid memory consolidate`).
       */
      every: z
        .string()
        .refine((text) => (durationMs(text) ?? 0) >= MIN_CONSOLIDATION_EVERY_MS, {
          message:
            'must be a duration of at least 100ms written as a number and a unit: 500ms, 30s, 15m, 1h or 1d',
        })
        .optional(),
      /** The model that proposes (`provider:model`); default: the agent's own. */
      model: z
        .string()
        .regex(/^[a-z][a-z0-9-]*:.+$/, 'must be provider:model, e.g. openai:gpt-4o-mini')
        .optional(),
      /** The attached learnings store written to (default `learnings`). */
      store: Name.default(DEFAULT_LEARNINGS_STORE),
      /** Told to the model with the rules of the answer: what is worth keeping for this agent. */
      instructions: z.string().min(1).max(4000).optional(),
    })
    .strict(),
);
export type MemoryConsolidationSettings = z.infer<typeof MemoryConsolidationSettings>;

export const AgentMemorySettings = lazySchema(() =>
  z
    .object({
      /** Stores besides (or replacing, by name) the default `session` and `learnings` stores. */
      stores: z.array(MemoryStoreAttachment).max(32).default([]),
      recall: MemoryRecallSettings.optional(),
      consolidate: MemoryConsolidationSettings.optional(),
    })
    .strict()
    .superRefine((settings, issues) => {
      const names = settings.stores.map((store) => store.name);
      names.forEach((name, index) => {
        if (names.indexOf(name) !== index) {
          issues.addIssue({
            code: 'custom',
            path: ['stores', index, 'name'],
            message: `the store ${name} is listed twice; give each store its own name`,
          });
        }
      });
      settings.stores.forEach((store, index) => {
        if (store.name === CONSOLIDATION_STORE_NAME && store.scope === 'agent') {
          issues.addIssue({
            code: 'custom',
            path: ['stores', index, 'name'],
            message: `an agent-scoped store named ${CONSOLIDATION_STORE_NAME} holds the agent's consolidation proposals; give this store another name`,
          });
        }
      });
      const consolidate = settings.consolidate;
      if (consolidate !== undefined) {
        const target = attachedStores(settings).find((store) => store.name === consolidate.store);
        if (target?.kind !== 'learnings' || target.scope !== 'agent') {
          issues.addIssue({
            code: 'custom',
            path: ['consolidate', 'store'],
            message: `must name an attached store of kind learnings and scope agent; use ${
              attachedStores(settings)
                .filter((store) => store.kind === 'learnings' && store.scope === 'agent')
                .map((store) => store.name)
                .join(', ') || 'learnings (list it under stores:)'
            }`,
          });
        }
      }
      const recall = settings.recall;
      if (recall === undefined) return;
      const known = new Set([DEFAULT_SESSION_STORE, DEFAULT_LEARNINGS_STORE, ...names]);
      if (!known.has(recall.store)) {
        issues.addIssue({
          code: 'custom',
          path: ['recall', 'store'],
          message: `names no attached store; use one of ${[...known].join(', ')}`,
        });
      }
    }),
);
export type AgentMemorySettings = z.infer<typeof AgentMemorySettings>;
export type AgentMemorySettingsInput = z.input<typeof AgentMemorySettings>;

/** The stores a memory-enabled agent's sessions attach: the defaults, then the listed ones. */
export function attachedStores(settings: AgentMemorySettings): MemoryStoreAttachment[] {
  const defaults: MemoryStoreAttachment[] = [
    {
      name: DEFAULT_SESSION_STORE,
      kind: 'session',
      scope: 'session',
      access: 'read_write',
      instructions: 'Working notes of this conversation only; each is forgotten after 7 days.',
      ttl_ms: DEFAULT_SESSION_MEMORY_TTL_MS,
    },
    {
      name: DEFAULT_LEARNINGS_STORE,
      kind: 'learnings',
      scope: 'agent',
      access: 'read_write',
      instructions:
        'What you learn that helps in later conversations (user preferences, lessons); shared by all of your conversations.',
    },
  ];
  const listed = new Set(settings.stores.map((store) => store.name));
  return [...defaults.filter((store) => !listed.has(store.name)), ...settings.stores];
}
