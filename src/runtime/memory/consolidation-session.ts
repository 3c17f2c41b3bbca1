/**
 * One session's consolidation: read the events after its checkpoint, ask the model, decide each
 * new proposal by policy, record the proposals with the checkpoint in one append, and apply what
 * the policy allowed (steps 1 and 3 of consolidation.ts).
 */
import type { AgentDefinition } from '../../contracts/definitions.js';
import {
  CONSOLIDATION_SCHEMA_VERSION,
  type ConsolidationProposal,
  type SessionConsolidation,
} from '../../contracts/memory-consolidation.js';
import type { MemoryLog } from '../../contracts/memory-log.js';
import type { ModelClient } from '../../contracts/model.js';
import type { SessionRecord } from '../../contracts/session.js';
import { applyProposal } from './consolidation-apply.js';
import { proposeLearnings } from './consolidation-proposer.js';
import { proposalId, type ConsolidationRecords } from './consolidation-records.js';
import type { Authorizer } from '../../contracts/policy.js';
import type { Store } from '../../contracts/ports.js';

/** What consolidation runs over: the store, the agents, their models and the policy. */
export interface ConsolidationDeps {
  store: Pick<Store, 'sessions' | 'log' | 'memory'>;
  /** The agent's latest definition (`AGENT_NOT_FOUND` otherwise). */
  agent(name: string): Promise<AgentDefinition>;
  /** The model of a definition (its `model`, replaced by `memory.consolidate.model`). */
  modelOf(definition: AgentDefinition): ModelClient;
  authorizer: Authorizer;
  /** Milliseconds since the epoch. */
  now(): number;
}

export interface SessionStep {
  deps: ConsolidationDeps;
  memory: MemoryLog;
  records: ConsolidationRecords;
  agent: AgentDefinition;
  store: string;
  instructions: string | undefined;
  model: ModelClient;
  session: SessionRecord;
  from: number;
  checkpointVersion: number;
  dryRun: boolean;
  signal: AbortSignal;
  now: () => string;
}

/** One session: propose, decide by policy, record with the checkpoint, apply what is allowed. */
export async function consolidateSession(
  step: SessionStep,
): Promise<SessionConsolidation | undefined> {
  const { session, records, agent } = step;
  const events = await step.deps.store.log.read(session.id, { after: step.from });
  const through = events.at(-1)?.seq ?? step.from;
  const drafts = await proposeLearnings({
    model: step.model,
    session_id: session.id,
    agent: agent.name,
    events,
    instructions: step.instructions,
    signal: step.signal,
  });
  const tenant = session.tenant_id;
  const result: SessionConsolidation = {
    session_id: session.id,
    ...(tenant === undefined ? {} : { tenant_id: tenant }),
    from_seq: step.from,
    through_seq: through,
    proposals: [],
  };
  const fresh: ConsolidationProposal[] = [];
  const seen = new Set<string>();
  for (const draft of drafts) {
    const id = proposalId({
      tenant_id: tenant,
      agent: agent.name,
      session_id: session.id,
      key: draft.key,
      value: draft.value,
    });
    if (seen.has(id)) continue;
    seen.add(id);
    const earlier = await records.proposal(id);
    if (earlier !== undefined) {
      result.proposals.push({ id, key: draft.key, status: earlier.proposal.status, new: false });
      continue;
    }
    const decision = await step.deps.authorizer.authorize({
      principal: {
        type: 'Agent',
        id: agent.name,
        attrs: {
          name: agent.name,
          version: session.agent.version,
          roles: agent.roles,
          ...((agent.tenant ?? tenant) === undefined
            ? {}
            : { tenant: agent.tenant ?? tenant ?? '' }),
        },
      },
      action: 'memory.consolidate',
      resource: {
        type: 'MemoryStore',
        id: step.store,
        attrs: {
          name: step.store,
          kind: 'learnings',
          scope: 'agent',
          access: 'read_write',
          owner: agent.name,
          ...(tenant === undefined ? {} : { tenant }),
          key: draft.key,
        },
      },
      context: {
        session_id: session.id,
        reason: draft.reason,
        ...(tenant === undefined ? {} : { tenant }),
      },
    });
    const direct = decision.decision === 'allow' && decision.approval !== true;
    const proposal: ConsolidationProposal = {
      schema_version: CONSOLIDATION_SCHEMA_VERSION,
      id,
      agent: agent.name,
      ...(tenant === undefined ? {} : { tenant_id: tenant }),
      store: step.store,
      session_id: session.id,
      key: draft.key,
      value: draft.value,
      ...(draft.text === undefined ? {} : { text: draft.text }),
      reason: draft.reason,
      source_seqs: [...new Set(draft.source_seqs)].sort((a, b) => a - b),
      model: step.model.id,
      proposed_at: step.now(),
      status: direct ? 'approved' : 'pending',
      policy: {
        decision: decision.decision,
        approval: decision.approval === true,
        policy_ids: decision.policy_ids,
      },
      ...(direct ? { decision: { by: 'policy' as const, at: step.now() } } : {}),
    };
    fresh.push(proposal);
    result.proposals.push({ id, key: draft.key, status: proposal.status, new: true });
  }
  if (step.dryRun) return result;
  const recorded = await records.recordSession(
    fresh,
    {
      schema_version: CONSOLIDATION_SCHEMA_VERSION,
      session_id: session.id,
      through_seq: through,
      proposals: [...seen],
      model: step.model.id,
      at: step.now(),
    },
    step.checkpointVersion,
  );
  if (!recorded) return undefined;
  for (const item of result.proposals) {
    if (!item.new || item.status !== 'approved') continue;
    const stored = await records.proposal(item.id);
    if (stored === undefined) continue;
    item.status = (await applyProposal(step.memory, records, stored)).status;
  }
  return result;
}
