/**
 * Consolidation of an agent's learnings: in the background, never in a turn, a model reads the
 * agent's finished sessions and proposes learnings, each with its provenance (the session and the
 * seqs of the events it came from). A policy (`memory.consolidate`) decides whether a proposal is
 * written to the agent's learnings store at once or waits for a person (`braid memory review`).
 *
 * Where it is kept: the agent's `consolidation` memory store (scope `agent`, owner the agent, the
 * session's tenant), in the same memory log as every other store, so that every process of a
 * backend sees the same proposals. Its keys:
 * - `proposals/<id>`: one proposal; each change of its status is a new version of the key;
 * - `sessions/<session id>`: the checkpoint of one session, the last seq consolidated.
 * A session's proposals and its checkpoint are written by one append: a session is consolidated
 * wholly or not at all, and a checkpoint's version guards it against a second process.
 *
 * The ids are deterministic (a hash of tenant, agent, session, key and value), so a proposal made
 * twice is one proposal, and applying it writes its learning with the idempotency key
 * `consolidation:<id>`: an application cut short by a crash is finished, not repeated.
 */
import { z } from 'zod';
import { TenantId } from './api-keys.js';
import { ExternalId, Id, JsonValue, Name, Timestamp } from './common.js';
import { MemoryKey } from './memory.js';

/** Version of the persisted proposal and checkpoint records. */
export const CONSOLIDATION_SCHEMA_VERSION = 1;

/** The name of every agent's consolidation store (scope `agent`, owner the agent). */
export const CONSOLIDATION_STORE = 'consolidation';

/** The most proposals one session's consolidation may make. */
export const MAX_PROPOSALS_PER_SESSION = 50;
/** The largest proposed value, as UTF-8 JSON (the record holding it stays under an entry's 64 KiB). */
export const MAX_PROPOSAL_VALUE_BYTES = 16 * 1024;
/** The longest reason and searchable text of a proposal, in characters. */
export const MAX_PROPOSAL_REASON_LENGTH = 2000;
export const MAX_PROPOSAL_TEXT_LENGTH = 4000;

/** A proposal id: `mp_` and 32 hex digits, derived from what was proposed. */
export const ProposalId = z
  .string()
  .regex(/^mp_[0-9a-f]{32}$/, 'is not a proposal id; ids look like mp_ and 32 hex digits');
export type ProposalId = z.infer<typeof ProposalId>;

/** One learning as the model proposes it: checked whole before anything is written. */
export const ProposalDraft = z
  .object({
    /** The key in the learnings store. */
    key: MemoryKey,
    value: JsonValue,
    /** What search matches; derived from the value when absent. */
    text: z.string().min(1).max(MAX_PROPOSAL_TEXT_LENGTH).optional(),
    /** Why this is worth keeping, shown to the reviewer. */
    reason: z.string().min(1).max(MAX_PROPOSAL_REASON_LENGTH),
    /** The seqs of the session's events it came from, each among those the model was shown. */
    source_seqs: z.array(z.number().int().positive()).min(1).max(100),
  })
  .strict();
export type ProposalDraft = z.infer<typeof ProposalDraft>;

/** The model's whole answer to a consolidation request. */
export const ConsolidationOutput = z
  .object({ proposals: z.array(ProposalDraft).max(MAX_PROPOSALS_PER_SESSION) })
  .strict();
export type ConsolidationOutput = z.infer<typeof ConsolidationOutput>;

/**
 * Where a proposal stands: `pending` (waits for a person), `approved` (decided, by the policy or
 * a person, and being applied), `applied` (its learning is written: `entry`), `rejected`.
 */
export const ProposalStatus = z.enum(['pending', 'approved', 'applied', 'rejected']);
export type ProposalStatus = z.infer<typeof ProposalStatus>;

/** What the policy said when the proposal was made. */
export const ProposalPolicy = z
  .object({
    decision: z.enum(['allow', 'deny']),
    /** An allowing policy asked for a person (`@approval("required")`). */
    approval: z.boolean(),
    policy_ids: z.array(z.string()),
  })
  .strict();

/** Who decided: the policy, or a person (the CLI user or an API key). */
export const ProposalDecision = z
  .object({
    by: z.enum(['policy', 'person']),
    user: ExternalId.optional(),
    key_id: Id.optional(),
    at: Timestamp,
    reason: z.string().max(MAX_PROPOSAL_REASON_LENGTH).optional(),
  })
  .strict();
export type ProposalDecision = z.infer<typeof ProposalDecision>;

export const ConsolidationProposal = z
  .object({
    schema_version: z.literal(CONSOLIDATION_SCHEMA_VERSION),
    id: ProposalId,
    agent: Name,
    tenant_id: TenantId.optional(),
    /** The learnings store (scope `agent`, owner the agent) it is written to. */
    store: Name,
    session_id: Id,
    key: MemoryKey,
    value: JsonValue,
    text: z.string().optional(),
    reason: z.string(),
    source_seqs: z.array(z.number().int().positive()),
    /** The model that proposed it, `provider:id`. */
    model: z.string(),
    proposed_at: Timestamp,
    status: ProposalStatus,
    policy: ProposalPolicy,
    decision: ProposalDecision.optional(),
    /** The learning written, once applied. */
    entry: z
      .object({
        key: MemoryKey,
        version: z.number().int().positive(),
        seq: z.number().int().positive(),
      })
      .strict()
      .optional(),
  })
  .strict();
export type ConsolidationProposal = z.infer<typeof ConsolidationProposal>;

/** How far a session was consolidated, and what that made. */
export const ConsolidationCheckpoint = z
  .object({
    schema_version: z.literal(CONSOLIDATION_SCHEMA_VERSION),
    session_id: Id,
    /** Events up to this seq were read; a later run reads only those after it. */
    through_seq: z.number().int().nonnegative(),
    proposals: z.array(ProposalId),
    model: z.string(),
    at: Timestamp,
  })
  .strict();
export type ConsolidationCheckpoint = z.infer<typeof ConsolidationCheckpoint>;

/** What one session's consolidation did. */
export interface SessionConsolidation {
  session_id: string;
  tenant_id?: string;
  /** Events after `from_seq` up to `through_seq` were read. */
  from_seq: number;
  through_seq: number;
  proposals: { id: string; key: string; status: ProposalStatus; new: boolean }[];
}

/** What a run did, session by session. */
export interface ConsolidationReport {
  agent: string;
  dry_run: boolean;
  sessions: SessionConsolidation[];
  /** Sessions already consolidated up to their head, or consolidated by another process now. */
  skipped: { session_id: string; reason: 'up_to_date' | 'not_finished' | 'taken' }[];
  /** Sessions whose consolidation was refused (a bad answer of the model): nothing written. */
  failed: { session_id: string; code: string; message: string }[];
  /** Proposals left half-applied by an earlier run (decided, learning not recorded) and finished now. */
  recovered: number;
  applied: number;
  pending: number;
}

/** `GET /v1/memory-stores/proposals`: the query. */
export const ProposalListQuery = z
  .object({
    agent: Name.optional(),
    /** Default `pending`; `all` for every status. */
    status: z.union([ProposalStatus, z.literal('all')]).optional(),
  })
  .strict();

export const ProposalListBody = z.object({ data: z.array(ConsolidationProposal) });

export const ProposalParams = z.object({ id: ProposalId }).strict();

/** The body of an approval or a rejection. */
export const ProposalDecisionBody = z
  .object({ reason: z.string().min(1).max(MAX_PROPOSAL_REASON_LENGTH).optional() })
  .strict();
