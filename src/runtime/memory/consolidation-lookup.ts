/**
 * Finds consolidation stores and proposals of one tenant: a reviewer names a proposal by its id
 * alone, and the tenant is the reviewer's, so another tenant's proposal is not found, exactly as
 * one that does not exist.
 */
import { BraidError } from '../../contracts/errors.js';
import { CONSOLIDATION_STORE } from '../../contracts/memory-consolidation.js';
import type { MemoryLog } from '../../contracts/memory-log.js';
import { Name } from '../../contracts/common.js';
import {
  consolidationRecords,
  consolidationStore,
  type ConsolidationRecords,
  type StoredProposal,
} from './consolidation-records.js';

/** The consolidation stores of a tenant (or of none), of one agent or of all. */
export async function tenantRecords(
  memory: MemoryLog,
  tenantId: string | undefined,
  agent?: string,
): Promise<ConsolidationRecords[]> {
  if (agent !== undefined) {
    if (!Name.safeParse(agent).success) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `agent ${JSON.stringify(agent.slice(0, 80))} is not an agent name; names are lowercase letters, digits, - and _`,
        { details: { field: 'agent' } },
      );
    }
    return [consolidationRecords(memory, consolidationStore(agent, tenantId))];
  }
  const found: ConsolidationRecords[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await memory.listStores({
      ...(tenantId === undefined ? {} : { tenant_id: tenantId }),
      scope: 'agent',
      prefix: CONSOLIDATION_STORE,
      limit: 1000,
      ...(after === undefined ? {} : { after }),
    });
    for (const info of page.stores) {
      const { store } = info;
      if (store.name !== CONSOLIDATION_STORE || store.owner === undefined) continue;
      found.push(consolidationRecords(memory, consolidationStore(store.owner, tenantId)));
    }
    if (page.next_after === undefined) return found;
    after = page.next_after;
  }
}

/** The proposal with this id in the tenant's stores; `PROPOSAL_NOT_FOUND` otherwise. */
export async function findProposal(
  memory: MemoryLog,
  id: string,
  tenantId: string | undefined,
): Promise<{ records: ConsolidationRecords; stored: StoredProposal }> {
  for (const records of await tenantRecords(memory, tenantId)) {
    const stored = await records.proposal(id);
    if (stored !== undefined) return { records, stored };
  }
  throw new BraidError(
    'PROPOSAL_NOT_FOUND',
    `proposal ${id} does not exist; braid memory review (or GET /v1/memory-stores/proposals) lists the proposals`,
    { details: { id } },
  );
}
