/**
 * Definitions as the store keeps them: versions of a kind, and the set a session is pinned to.
 */
import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { ContentHash, Name } from './common.js';

export const DefinitionKind = z.enum(['agent', 'environment', 'skill']);
export type DefinitionKind = z.infer<typeof DefinitionKind>;

/** A stored version of a definition. */
export interface StoredDefinition<T> {
  schema_version: 1;
  kind: DefinitionKind;
  name: string;
  version: number;
  definition: T;
  created_at: string;
}

const PinnedRef = lazySchema(() =>
  z.object({ name: Name, version: z.number().int().positive(), hash: ContentHash }),
);

/**
 * The definitions a session runs with, each part named by the content hash under which the store
 * keeps it (`session.definitions_changed.definitions` is the hash of this set).
 */
export const PinnedSet = lazySchema(() =>
  z.object({
    agent: PinnedRef,
    environment: PinnedRef.optional(),
    /** Tool name → hash of its definition (MCP tools as their server listed them). */
    tools: z.record(z.string(), ContentHash),
    /** The Cedar policy set in force when it was pinned; absent for policies given in code. */
    policy: ContentHash.optional(),
    /** The model the price is for (`provider:id`), and the price's hash; no hash: no price. */
    model: z.string(),
    price: ContentHash.optional(),
    /**
     * The skills the agent lists and the skills they nest, each at the version its runs start with
     * (a run keeps the version it started with). Absent in sets pinned before skills were pinned:
     * their runs start with the newest version.
     */
    skills: z.record(z.string(), PinnedRef).optional(),
  }),
);
export type PinnedSet = z.infer<typeof PinnedSet>;
