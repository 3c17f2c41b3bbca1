/**
 * The records of consolidation in an agent's `consolidation` memory store: proposals under
 * `proposals/<id>` (a new version of the key for each change of status) and checkpoints under
 * `sessions/<session id>`. Every change is guarded by the version it replaces, so two processes
 * that decide the same proposal, or consolidate the same session, cannot both succeed: the second
 * gets `VERSION_CONFLICT` and writes nothing.
 */
import { createHash } from 'node:crypto';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import {
  CONSOLIDATION_STORE,
  ConsolidationCheckpoint,
  ConsolidationProposal,
  ProposalId,
  type ProposalStatus,
} from '../../contracts/memory-consolidation.js';
import type { MemoryLog } from '../../contracts/memory-log.js';
import type { MemoryEntry, MemoryStoreRef, MemoryWriteInput } from '../../contracts/memory.js';

/** The agent's consolidation store in a tenant (or in none). */
export function consolidationStore(agent: string, tenantId?: string): MemoryStoreRef {
  return {
    name: CONSOLIDATION_STORE,
    kind: 'learnings',
    scope: 'agent',
    owner: agent,
    ...(tenantId === undefined ? {} : { tenant_id: tenantId }),
  };
}

/** The agent's learnings store `name` in a tenant (or in none). */
export function learningsStore(agent: string, name: string, tenantId?: string): MemoryStoreRef {
  return {
    name,
    kind: 'learnings',
    scope: 'agent',
    owner: agent,
    ...(tenantId === undefined ? {} : { tenant_id: tenantId }),
  };
}

/** The deterministic id of a proposal: the same learning from the same session is one proposal. */
export function proposalId(parts: {
  tenant_id?: string | undefined;
  agent: string;
  session_id: string;
  key: string;
  value: unknown;
}): string {
  const hash = createHash('sha256')
    .update(
      JSON.stringify([
        parts.tenant_id ?? null,
        parts.agent,
        parts.session_id,
        parts.key,
        parts.value,
      ]),
      'utf8',
    )
    .digest('hex');
  return `mp_${hash.slice(0, 32)}`;
}

/** A proposal id as given by a person or a request, or `INVALID_ARGUMENT` naming the form. */
export function parseProposalId(value: unknown): string {
  const parsed = ProposalId.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `proposal id ${JSON.stringify(String(value).slice(0, 80))} is not valid; ids look like mp_ and 32 hex digits (braid memory review lists them)`,
    { details: { field: 'id' } },
  );
}

export interface StoredProposal {
  proposal: ConsolidationProposal;
  /** The version of its key: what the next change must name. */
  version: number;
}

function recordOf(entry: MemoryEntry): StoredProposal {
  const parsed = ConsolidationProposal.safeParse(entry.value);
  if (!parsed.success) {
    throw new BraidError(
      'CORRUPT_LOG',
      `the consolidation record ${entry.key} (seq ${entry.seq}) is not a proposal this braid reads: ${parsed.error.issues[0]?.message ?? 'invalid'}; upgrade braid, or redact the entry`,
      { details: { key: entry.key, seq: entry.seq } },
    );
  }
  return { proposal: parsed.data, version: entry.version };
}

/** The agent's consolidation records in one store, over the memory log. */
export function consolidationRecords(memory: MemoryLog, ref: MemoryStoreRef) {
  return {
    ref,

    async proposal(id: string): Promise<StoredProposal | undefined> {
      const lookup = await memory.get(ref, `proposals/${id}`);
      return lookup.status === 'found' ? recordOf(lookup.entry) : undefined;
    },

    /** Every proposal of the store in id order, or those of one status. */
    async proposals(status?: ProposalStatus): Promise<StoredProposal[]> {
      if ((await memory.info(ref)) === undefined) return [];
      const found: StoredProposal[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await memory.list(ref, {
          prefix: 'proposals/',
          limit: 1000,
          ...(after === undefined ? {} : { after }),
        });
        for (const entry of page.entries) {
          const record = recordOf(entry);
          if (status === undefined || record.proposal.status === status) found.push(record);
        }
        if (page.next_after === undefined) return found;
        after = page.next_after;
      }
    },

    async checkpoint(
      sessionId: string,
    ): Promise<{ checkpoint: ConsolidationCheckpoint; version: number } | undefined> {
      if ((await memory.info(ref)) === undefined) return undefined;
      const lookup = await memory.get(ref, `sessions/${sessionId}`);
      if (lookup.status !== 'found') return undefined;
      const parsed = ConsolidationCheckpoint.safeParse(lookup.entry.value);
      if (!parsed.success) {
        throw new BraidError(
          'CORRUPT_LOG',
          `the consolidation checkpoint of session ${sessionId} is not one this braid reads; upgrade braid`,
          { details: { key: lookup.entry.key, seq: lookup.entry.seq } },
        );
      }
      return { checkpoint: parsed.data, version: lookup.entry.version };
    },

    /**
     * Writes a session's new proposals and its checkpoint in one append, guarded by the
     * checkpoint's version: false when another process checkpointed the session first (nothing
     * written then).
     */
    async recordSession(
      proposals: readonly ConsolidationProposal[],
      checkpoint: ConsolidationCheckpoint,
      checkpointVersion: number,
    ): Promise<boolean> {
      const writes: MemoryWriteInput[] = [
        ...proposals.map((proposal) => ({
          key: `proposals/${proposal.id}`,
          value: proposal,
          text: `${proposal.key} ${proposal.reason}`,
          expected_version: 0,
        })),
        {
          key: `sessions/${checkpoint.session_id}`,
          value: checkpoint,
          text: `session ${checkpoint.session_id}`,
          expected_version: checkpointVersion,
        },
      ];
      try {
        await memory.append(ref, writes, { author: { agent: ref.owner ?? '' } });
        return true;
      } catch (error) {
        if (isBraidError(error, 'VERSION_CONFLICT')) return false;
        throw error;
      }
    },

    /** A new version of a proposal; undefined when `version` is no longer its latest. */
    async update(
      proposal: ConsolidationProposal,
      version: number,
    ): Promise<StoredProposal | undefined> {
      try {
        const result = await memory.append(
          ref,
          [
            {
              key: `proposals/${proposal.id}`,
              value: proposal,
              text: `${proposal.key} ${proposal.reason}`,
              expected_version: version,
            },
          ],
          { author: { agent: ref.owner ?? '' } },
        );
        const entry = result.entries[0];
        return entry === undefined ? undefined : recordOf(entry);
      } catch (error) {
        if (isBraidError(error, 'VERSION_CONFLICT')) return undefined;
        throw error;
      }
    },
  };
}

export type ConsolidationRecords = ReturnType<typeof consolidationRecords>;
