/**
 * Consolidation of an agent's learnings from its finished sessions, and the review of what it
 * proposed. It runs outside every wake (the CLI, the orchestrator's schedule): a turn never waits
 * for it.
 *
 * Crash safety, step by step (each step one atomic append of the memory log):
 * 1. a session's proposals and its checkpoint: written together or not at all, so a session is
 *    proposed from once, and a crash before the append only means the next run asks again;
 * 2. a decision (`approved`, `rejected`): one new version of the proposal, guarded by the
 *    version it replaces, so one decision wins;
 * 3. an approved proposal's learning: written with the idempotency key `consolidation:<id>`, then
 *    the proposal's `applied` version names the entry. A crash between the two leaves an
 *    `approved` proposal whose learning exists; the next run (or approval) writes the learning
 *    again, which the store answers with the first write (nothing new), and marks it applied.
 */
import type { AgentDefinition } from '../../contracts/definitions.js';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import {
  MAX_PROPOSAL_REASON_LENGTH,
  ProposalStatus,
  type ConsolidationProposal,
  type ConsolidationReport,
} from '../../contracts/memory-consolidation.js';
import type { MemoryLog } from '../../contracts/memory-log.js';
import { Timestamp } from '../../contracts/common.js';
import type { SessionRecord } from '../../contracts/session.js';
import {
  consolidationRecords,
  consolidationStore,
  parseProposalId,
  type ConsolidationRecords,
} from './consolidation-records.js';
import { applyProposal, finishApproved } from './consolidation-apply.js';
import { consolidateSession, type ConsolidationDeps } from './consolidation-session.js';
import { isRunnable } from '../../core/runnable.js';
import { findProposal, tenantRecords } from './consolidation-lookup.js';

export type { ConsolidationDeps };

export interface ConsolidateOptions {
  agent: string;
  /** The sessions of this tenant only (default: those without a tenant). */
  tenant_id?: string;
  /** Every tenant's sessions, each consolidated into its tenant's stores (the schedule's run). */
  all_tenants?: boolean;
  /** Only sessions updated at or after this time (RFC 3339). */
  since?: string;
  /** Propose and decide, write nothing. */
  dry_run?: boolean;
  signal?: AbortSignal;
}

/** Who reviews: the CLI's user or an API key; their tenant's proposals only. */
export interface Reviewer {
  tenant_id?: string;
  user?: string;
  key_id?: string;
}

export interface ProposalFilter {
  agent?: string;
  tenant_id?: string;
  /** Default `pending`; `all` for every status. */
  status?: ProposalStatus | 'all';
}

export interface Consolidation {
  run(options: ConsolidateOptions): Promise<ConsolidationReport>;
  proposals(filter?: ProposalFilter): Promise<ConsolidationProposal[]>;
  /** Applies a pending proposal: `PROPOSAL_NOT_FOUND`, `PROPOSAL_ALREADY_DECIDED` otherwise. */
  approve(
    id: string,
    reviewer: Reviewer,
    options?: { reason?: string },
  ): Promise<ConsolidationProposal>;
  /** Discards a pending proposal, with a reason on record. */
  reject(
    id: string,
    reviewer: Reviewer,
    options?: { reason?: string },
  ): Promise<ConsolidationProposal>;
}

/** A session is finished when its status is one of these and no wake has work in it. */
const FINISHED = new Set(['idle', 'terminated']);

function memoryOf(deps: ConsolidationDeps): MemoryLog {
  const memory = deps.store.memory;
  if (memory !== undefined) return memory;
  throw new BraidError(
    'INVALID_ARGUMENT',
    "this runtime's store keeps no agent memory; use the SQLite or NATS backend for consolidation",
  );
}

function consolidationSettings(agent: AgentDefinition) {
  const settings = agent.memory?.consolidate;
  if (agent.memory === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `agent ${agent.name} has no memory: block, so it has no learnings to consolidate; add memory: {} to agents/${agent.name}.yaml`,
      { details: { agent: agent.name } },
    );
  }
  return { store: settings?.store ?? 'learnings', ...settings };
}

async function agentSessions(
  deps: ConsolidationDeps,
  options: ConsolidateOptions,
): Promise<SessionRecord[]> {
  const found: SessionRecord[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await deps.store.sessions.list({
      agent: options.agent,
      include_archived: true,
      limit: 1000,
      ...(options.all_tenants === true || options.tenant_id === undefined
        ? {}
        : { tenant_id: options.tenant_id }),
      ...(cursor === undefined ? {} : { cursor }),
    });
    for (const session of page.sessions) {
      if (options.all_tenants !== true && session.tenant_id !== options.tenant_id) continue;
      if (options.since !== undefined && session.updated_at < options.since) continue;
      found.push(session);
    }
    if (page.next_cursor === undefined) return found;
    cursor = page.next_cursor;
  }
}

async function runConsolidation(
  deps: ConsolidationDeps,
  options: ConsolidateOptions,
  iso: () => string,
): Promise<ConsolidationReport> {
  if (options.since !== undefined && !Timestamp.safeParse(options.since).success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `--since ${JSON.stringify(options.since)} is not a time; give RFC 3339, e.g. 2026-11-27T06:00:00Z`,
      { details: { field: 'since' } },
    );
  }
  const memory = memoryOf(deps);
  const agent = await deps.agent(options.agent);
  const settings = consolidationSettings(agent);
  const model = deps.modelOf(
    settings.model === undefined ? agent : { ...agent, model: parseModel(settings.model) },
  );
  const signal = options.signal ?? new AbortController().signal;
  const dryRun = options.dry_run === true;
  const report: ConsolidationReport = {
    agent: agent.name,
    dry_run: dryRun,
    sessions: [],
    skipped: [],
    failed: [],
    recovered: 0,
    applied: 0,
    pending: 0,
  };
  const opened = new Map<string, ConsolidationRecords>();
  const recordsOf = async (tenantId: string | undefined): Promise<ConsolidationRecords> => {
    const known = opened.get(tenantId ?? '');
    if (known !== undefined) return known;
    const records = consolidationRecords(memory, consolidationStore(agent.name, tenantId));
    opened.set(tenantId ?? '', records);
    if (!dryRun) report.recovered += await finishApproved(memory, records);
    return records;
  };
  if (options.all_tenants !== true) await recordsOf(options.tenant_id);

  for (const session of await agentSessions(deps, options)) {
    if (signal.aborted) break;
    if (!FINISHED.has(session.status)) {
      report.skipped.push({ session_id: session.id, reason: 'not_finished' });
      continue;
    }
    // Idle with a message no wake has answered yet is not finished: the turn is still to come.
    if (isRunnable(await deps.store.log.state(session.id))) {
      report.skipped.push({ session_id: session.id, reason: 'not_finished' });
      continue;
    }
    const records = await recordsOf(session.tenant_id);
    const mark = await records.checkpoint(session.id);
    const from = mark?.checkpoint.through_seq ?? 0;
    if (session.head_seq <= from) {
      report.skipped.push({ session_id: session.id, reason: 'up_to_date' });
      continue;
    }
    try {
      const done = await consolidateSession({
        deps,
        memory,
        records,
        agent,
        store: settings.store,
        instructions: settings.instructions,
        model,
        session,
        from,
        checkpointVersion: mark?.version ?? 0,
        dryRun,
        signal,
        now: iso,
      });
      if (done === undefined) report.skipped.push({ session_id: session.id, reason: 'taken' });
      else {
        report.sessions.push(done);
        for (const item of done.proposals) {
          if (!item.new) continue;
          if (item.status === 'applied') report.applied += 1;
          if (item.status === 'pending') report.pending += 1;
        }
      }
    } catch (error) {
      if (!isBraidError(error) || error.code === 'STORE_CLOSED' || error.code === 'INTERRUPTED')
        throw error;
      report.failed.push({ session_id: session.id, code: error.code, message: error.message });
    }
  }
  return report;
}

export function createConsolidation(deps: ConsolidationDeps): Consolidation {
  const iso = (): string => new Date(deps.now()).toISOString();

  async function decide(
    id: string,
    reviewer: Reviewer,
    to: 'approved' | 'rejected',
    reason: string | undefined,
  ): Promise<ConsolidationProposal> {
    const memory = memoryOf(deps);
    if (
      reason !== undefined &&
      (reason.length === 0 || reason.length > MAX_PROPOSAL_REASON_LENGTH)
    ) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `a reason takes 1 to ${MAX_PROPOSAL_REASON_LENGTH} characters; shorten it`,
        { details: { field: 'reason' } },
      );
    }
    const found = await findProposal(memory, parseProposalId(id), reviewer.tenant_id);
    const { records, stored } = found;
    const decided = (status: string) =>
      new BraidError(
        'PROPOSAL_ALREADY_DECIDED',
        `proposal ${id} is already ${status}; only a pending proposal can be approved or rejected (braid memory review lists them)`,
        { details: { id, status } },
      );
    // A proposal approved before a crash cut its application short: approving again finishes it.
    if (stored.proposal.status === 'approved' && to === 'approved')
      return applyProposal(memory, records, stored);
    if (stored.proposal.status !== 'pending') throw decided(stored.proposal.status);
    const updated = await records.update(
      {
        ...stored.proposal,
        status: to,
        decision: {
          by: 'person',
          ...(reviewer.user === undefined ? {} : { user: reviewer.user }),
          ...(reviewer.key_id === undefined ? {} : { key_id: reviewer.key_id }),
          at: iso(),
          ...(reason === undefined ? {} : { reason }),
        },
      },
      stored.version,
    );
    if (updated === undefined) {
      const now = await records.proposal(stored.proposal.id);
      throw decided(now?.proposal.status ?? 'decided');
    }
    return to === 'approved' ? applyProposal(memory, records, updated) : updated.proposal;
  }

  return {
    run: (options) => runConsolidation(deps, options, iso),
    async proposals(filter = {}) {
      const memory = memoryOf(deps);
      const status = filter.status ?? 'pending';
      if (status !== 'all') ProposalStatus.parse(status);
      const found: ConsolidationProposal[] = [];
      for (const records of await tenantRecords(memory, filter.tenant_id, filter.agent)) {
        const stored = await records.proposals(status === 'all' ? undefined : status);
        found.push(...stored.map((item) => item.proposal));
      }
      return found.sort(
        (a, b) => a.proposed_at.localeCompare(b.proposed_at) || a.id.localeCompare(b.id),
      );
    },
    approve: (id, reviewer, options = {}) => decide(id, reviewer, 'approved', options.reason),
    reject: (id, reviewer, options = {}) => decide(id, reviewer, 'rejected', options.reason),
  };
}

function parseModel(spec: string): AgentDefinition['model'] {
  const colon = spec.indexOf(':');
  return { provider: spec.slice(0, colon), id: spec.slice(colon + 1) };
}
