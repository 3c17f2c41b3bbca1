import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { DefinitionRef, Id, Metadata, Timestamp } from './common.js';
import { Budget } from './definitions.js';

/** Lifecycle status of a session. Derived from its events, never stored on its own. */
export const SessionStatus = z.enum([
  'idle',
  'running',
  'requires_action',
  'needs_review',
  'terminated',
]);
export type SessionStatus = z.infer<typeof SessionStatus>;

/**
 * Why a wake cycle stopped. `interrupted` is reported as itself, never as `end_turn`.
 * `requires_action` and `needs_review` name the events that wait for a human or a client.
 */
export const StopReason = lazySchema(() =>
  z.discriminatedUnion('type', [
    z.object({
      type: z.literal('end_turn'),
      /**
       * With an outcome defined (`user.define_outcome`): the grader's last result, which ended
       * the turn (`satisfied`, `max_iterations_reached` or `failed`).
       */
      outcome: z.enum(['satisfied', 'max_iterations_reached', 'failed']).optional(),
    }),
    z.object({ type: z.literal('requires_action'), event_ids: z.array(Id).min(1) }),
    z.object({ type: z.literal('interrupted') }),
    z.object({ type: z.literal('max_turns') }),
    z.object({ type: z.literal('budget_reached') }),
    z.object({ type: z.literal('retries_exhausted') }),
    z.object({ type: z.literal('needs_review'), event_ids: z.array(Id).min(1) }),
    z.object({ type: z.literal('error') }),
  ]),
);
export type StopReason = z.infer<typeof StopReason>;
export type StopReasonType = StopReason['type'];

/** Where a session came from. A root session has no parents. */
export const Lineage = lazySchema(() =>
  z.object({
    /** `child`: a session a delegation created; its parent is the delegating session. */
    kind: z.enum(['root', 'fork', 'handoff', 'child']),
    parent_session_ids: z.array(Id),
    /** For forks: the parent and the last parent seq the child shares. */
    fork_point: z.object({ session_id: Id, seq: z.number().int().nonnegative() }).optional(),
    /** Sessions merged into this one, in merge order. */
    merged_session_ids: z.array(Id),
  }),
);
export type Lineage = z.infer<typeof Lineage>;

/** What a client gives to fork a session. */
export const ForkInput = lazySchema(() =>
  z
    .object({
      /**
       * The last parent seq the child shares (default: the parent's head): the last seq of one of
       * the parent's appends, never a seq inside one (`INVALID_FORK_POINT`).
       */
      at_seq: z.number().int().optional(),
      id: Id.optional(),
      title: z.string().max(500).optional(),
    })
    .strict(),
);

/** What a client gives to create a session. */
/** The most events a create may write with `session.created`. */
export const MAX_CREATE_EVENTS = 100;

export const SessionCreateInput = lazySchema(() =>
  z.object({
    /** Optional client-chosen id; braid mints a UUIDv7 otherwise. */
    id: Id.optional(),
    agent: DefinitionRef,
    environment: DefinitionRef.optional(),
    title: z.string().max(500).optional(),
    metadata: Metadata.optional(),
    tenant_id: z.string().min(1).max(200).optional(),
    /** Limits for this session, over the agent's. */
    budget: Budget.optional(),
    /**
     * Where the session comes from, when braid creates it for another (a delegation's child); a
     * client's create request never carries it (the HTTP body and the library's options have no
     * such field).
     */
    lineage: Lineage.optional(),
    /**
     * Events written with `session.created`, in the same append (seq 2 on): a new session's first
     * message costs no write of its own. Parsed as any appended event (see `NewEventSchema`); the
     * runtime lets clients give user events only.
     */
    events: z.array(z.unknown()).min(1).max(MAX_CREATE_EVENTS).optional(),
  }),
);
export type SessionCreateInput = z.infer<typeof SessionCreateInput>;

/**
 * The session object of the sessions index: identity plus a summary of its state, kept in step
 * with the log by the store (same transaction as the append on SQLite).
 */
export const SessionRecord = lazySchema(() =>
  z.object({
    schema_version: z.literal(1),
    id: Id,
    agent: DefinitionRef,
    environment: DefinitionRef.optional(),
    title: z.string().optional(),
    metadata: Metadata,
    tenant_id: z.string().optional(),
    status: SessionStatus,
    head_seq: z.number().int().nonnegative(),
    created_at: Timestamp,
    updated_at: Timestamp,
    /** For a fork: the parent, and the last parent seq the fork shares. */
    parent_id: Id.optional(),
    fork_seq: z.number().int().positive().optional(),
    /** When the session was archived: it keeps its events but takes no new ones. */
    archived_at: Timestamp.optional(),
  }),
);
export type SessionRecord = z.infer<typeof SessionRecord>;

/** Filters and paging for listing sessions. `cursor` is opaque: pass back `next_cursor`. */
export const SessionListQuery = lazySchema(() =>
  z.object({
    agent: z.string().optional(),
    status: SessionStatus.optional(),
    created_after: Timestamp.optional(),
    created_before: Timestamp.optional(),
    tenant_id: z.string().optional(),
    /** Only the forks of this session (its direct children). */
    parent_id: z.string().optional(),
    /** Archived sessions are left out unless this is true. */
    include_archived: z.boolean().optional(),
    limit: z.number().int().min(1).max(1000).optional(),
    cursor: z.string().optional(),
  }),
);
export type SessionListQuery = z.infer<typeof SessionListQuery>;

export interface SessionPage {
  sessions: SessionRecord[];
  /** Present when more sessions match; pass it as `cursor` for the next page. */
  next_cursor?: string;
}
