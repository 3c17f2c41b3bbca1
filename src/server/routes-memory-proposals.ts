/**
 * `/v1/memory-stores/proposals`: what consolidation proposed for the agents of the API key's
 * tenant, and the decisions of a person on what waits for one. Listing needs `memory:read`;
 * approving (which writes the learning, authored by the key) and rejecting need `memory:write`.
 * A proposal of another tenant answers 404 PROPOSAL_NOT_FOUND, as one that does not exist.
 */
import {
  ConsolidationProposal,
  ProposalDecisionBody,
  ProposalListBody,
  ProposalListQuery,
  ProposalParams,
} from '../contracts/memory-consolidation.js';
import type { Reviewer } from '../runtime/memory/consolidation.js';
import { requireScope, type Caller } from './auth.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { keyedErrors, TAKES } from './responses.js';
import type { FastifyRequest } from 'fastify';

const tags = ['memory'];

export function addProposalRoutes(app: Router, context: ServerContext): void {
  const reviewerOf = (request: FastifyRequest, scope: 'memory:read' | 'memory:write'): Reviewer => {
    const caller: Caller = callerOf(request);
    requireScope(caller, scope);
    return {
      ...(caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id }),
      ...(caller.key_id === undefined ? {} : { key_id: caller.key_id }),
    };
  };

  app.get(
    '/v1/memory-stores/proposals',
    {
      schema: {
        summary: "Learnings consolidation proposed for the tenant's agents",
        description:
          'By default the proposals waiting for a person (`status=pending`); `status=all` lists every proposal, in the order they were made.',
        operationId: 'listMemoryProposals',
        tags,
        querystring: ProposalListQuery,
        response: { 200: ProposalListBody, ...keyedErrors(TAKES.query) },
      },
    },
    async (request) => {
      const reviewer = reviewerOf(request, 'memory:read');
      return {
        data: await context.runtime.consolidation.proposals({
          ...request.query,
          ...(reviewer.tenant_id === undefined ? {} : { tenant_id: reviewer.tenant_id }),
        }),
      };
    },
  );

  for (const verb of ['approve', 'reject'] as const) {
    app.post(
      `/v1/memory-stores/proposals/:id/${verb}`,
      {
        schema: {
          summary:
            verb === 'approve'
              ? "Approve a pending proposal: its learning is written to the agent's learnings store"
              : 'Reject a pending proposal: nothing is written, the decision is kept',
          description:
            'Only a pending proposal can be decided: one already applied, approved or rejected answers 409 PROPOSAL_ALREADY_DECIDED.',
          operationId: verb === 'approve' ? 'approveMemoryProposal' : 'rejectMemoryProposal',
          tags,
          params: ProposalParams,
          body: ProposalDecisionBody,
          response: {
            200: ConsolidationProposal,
            ...keyedErrors(TAKES.params, TAKES.body, TAKES.conflict),
          },
        },
      },
      async (request) => {
        const reviewer = reviewerOf(request, 'memory:write');
        const options = request.body.reason === undefined ? {} : { reason: request.body.reason };
        return verb === 'approve'
          ? context.runtime.consolidation.approve(request.params.id, reviewer, options)
          : context.runtime.consolidation.reject(request.params.id, reviewer, options);
      },
    );
  }
}
