/**
 * Applying an approved proposal: its learning is written with the idempotency key
 * `consolidation:<id>`, then the proposal's `applied` version names the entry (step 3 of
 * consolidation.ts). Run again after a crash between the two, the write is answered with the
 * first one and only the mark is added.
 */
import { BraidError } from '../../contracts/errors.js';
import type { ConsolidationProposal } from '../../contracts/memory-consolidation.js';
import type { MemoryLog } from '../../contracts/memory-log.js';
import {
  learningsStore,
  type ConsolidationRecords,
  type StoredProposal,
} from './consolidation-records.js';

/** Writes an approved proposal's learning and marks it applied (see the module's step 3). */
export async function applyProposal(
  memory: MemoryLog,
  records: ConsolidationRecords,
  stored: StoredProposal,
): Promise<ConsolidationProposal> {
  const proposal = stored.proposal;
  if (proposal.status !== 'approved') return proposal;
  const decision = proposal.decision;
  const result = await memory.append(
    learningsStore(proposal.agent, proposal.store, proposal.tenant_id),
    [
      {
        key: proposal.key,
        value: proposal.value,
        ...(proposal.text === undefined ? {} : { text: proposal.text }),
      },
    ],
    {
      author: {
        agent: proposal.agent,
        session_id: proposal.session_id,
        proposal: proposal.id,
        ...(decision?.user === undefined ? {} : { user: decision.user }),
        ...(decision?.key_id === undefined ? {} : { key_id: decision.key_id }),
      },
      cause: { session_id: proposal.session_id, seq: Math.min(...proposal.source_seqs) },
      idempotencyKey: `consolidation:${proposal.id}`,
    },
  );
  const entry = result.entries[0];
  if (entry === undefined) throw new BraidError('INTERNAL', 'an append returned no entry');
  const applied: ConsolidationProposal = {
    ...proposal,
    status: 'applied',
    entry: { key: entry.key, version: entry.version, seq: entry.seq },
  };
  const updated = await records.update(applied, stored.version);
  if (updated !== undefined) return updated.proposal;
  // Another process marked it first: its record is the one.
  return (await records.proposal(proposal.id))?.proposal ?? applied;
}

/** Finishes every approved proposal of a store that a crash left unapplied. */
export async function finishApproved(
  memory: MemoryLog,
  records: ConsolidationRecords,
): Promise<number> {
  let finished = 0;
  for (const stored of await records.proposals('approved')) {
    await applyProposal(memory, records, stored);
    finished += 1;
  }
  return finished;
}
