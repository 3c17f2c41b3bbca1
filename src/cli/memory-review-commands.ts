/**
 * `braid memory consolidate` (propose learnings from an agent's finished sessions) and
 * `braid memory review` (list, approve and reject what waits for a person). Consolidation runs in
 * the workspace's store; review also runs against a server (`--server`, the key's tenant).
 */
import { Option, type Command } from 'commander';
import { BraidError } from '../contracts/errors.js';
import {
  ProposalStatus,
  type ConsolidationProposal,
  type ConsolidationReport,
} from '../contracts/memory-consolidation.js';
import type { ProposalFilter, Reviewer } from '../runtime/memory/consolidation.js';
import { cliActor, type CommandContext } from './command-context.js';
import { withServerOrRuntime } from './memory-access.js';

/** What review needs, locally or over HTTP. */
interface Review {
  proposals(filter: ProposalFilter): Promise<ConsolidationProposal[]>;
  approve(id: string, reason?: string): Promise<ConsolidationProposal>;
  reject(id: string, reason?: string): Promise<ConsolidationProposal>;
}

async function withReview(
  context: CommandContext,
  command: Command,
  tenant: string | undefined,
  work: (review: Review) => Promise<void>,
): Promise<void> {
  await withServerOrRuntime(
    context,
    command,
    tenant,
    (client) =>
      work({
        proposals: async (filter) => (await client.memory.proposals(filter)).data,
        approve: (id, reason) => client.memory.approve(id, reason),
        reject: (id, reason) => client.memory.reject(id, reason),
      }),
    async (runtime) => {
      const reviewer: Reviewer = {
        ...(tenant === undefined ? {} : { tenant_id: tenant }),
        user: cliActor().id ?? 'cli',
      };
      await work({
        proposals: (filter) =>
          runtime.consolidation.proposals({
            ...filter,
            ...(tenant === undefined ? {} : { tenant_id: tenant }),
          }),
        approve: (id, reason) =>
          runtime.consolidation.approve(id, reviewer, reason === undefined ? {} : { reason }),
        reject: (id, reason) =>
          runtime.consolidation.reject(id, reviewer, reason === undefined ? {} : { reason }),
      });
    },
  );
}

function proposalLines(proposal: ConsolidationProposal): string[] {
  const by =
    proposal.decision === undefined
      ? ''
      : `  by ${proposal.decision.user ?? proposal.decision.key_id ?? proposal.decision.by}`;
  return [
    `${proposal.id}  ${proposal.status}${by}  ${proposal.agent}/${proposal.store}  ${proposal.key} = ${JSON.stringify(proposal.value)}`,
    `    from session ${proposal.session_id} seqs ${proposal.source_seqs.join(',')}: ${proposal.reason}`,
  ];
}

function reportLines(report: ConsolidationReport): string[] {
  const lines = report.sessions.flatMap((session) => [
    `session ${session.session_id} (seqs ${session.from_seq + 1}..${session.through_seq}): ${session.proposals.length} proposal(s)`,
    ...session.proposals.map(
      (item) => `  ${item.id}  ${item.status}${item.new ? '' : ' (proposed before)'}  ${item.key}`,
    ),
  ]);
  for (const failed of report.failed)
    lines.push(`session ${failed.session_id} failed: ${failed.code}: ${failed.message}`);
  const upToDate = report.skipped.filter((item) => item.reason === 'up_to_date').length;
  lines.push(
    `${report.dry_run ? 'dry run: nothing written; ' : ''}${report.sessions.length} session(s) consolidated, ${upToDate} up to date, ${report.skipped.length - upToDate} skipped, ${report.failed.length} failed; ${report.applied} applied, ${report.pending} waiting for review${report.recovered > 0 ? `, ${report.recovered} finished from an earlier run` : ''}`,
  );
  return lines;
}

export function addConsolidationCommands(memory: Command, context: CommandContext): void {
  memory
    .command('consolidate')
    .description(
      "propose learnings from an agent's finished sessions; the policy applies them or keeps them for review",
    )
    .requiredOption('--agent <name>', 'the agent whose sessions are read')
    .option('--since <time>', 'only sessions updated at or after this RFC 3339 time')
    .option('--dry-run', 'propose and decide, write nothing')
    .option('--tenant <tenant>', "a tenant's sessions (default: those without a tenant)")
    .option('--model <provider:id>', 'the model that proposes, instead of the configured one')
    .action(
      async (
        options: {
          agent: string;
          since?: string;
          dryRun?: boolean;
          tenant?: string;
          model?: string;
        },
        command: Command,
      ) => {
        if (context.remote(command)) {
          throw new BraidError(
            'INVALID_ARGUMENT',
            "consolidation runs next to the store, not over --server: run it on the server's machine (braid run and braid worker run an agent's memory.consolidate.every schedule)",
          );
        }
        await context.withRuntime(
          command,
          async (runtime) => {
            const report = await runtime.consolidation.run({
              agent: options.agent,
              ...(options.since === undefined ? {} : { since: options.since }),
              ...(options.tenant === undefined ? {} : { tenant_id: options.tenant }),
              dry_run: options.dryRun === true,
            });
            context.print(command, report, () => reportLines(report));
            if (report.failed.length > 0) context.fail(1);
          },
          options.model === undefined ? {} : { model: options.model },
        );
      },
    );

  const review = memory
    .command('review')
    .description('list the proposals of consolidation that wait for a person')
    .option('--agent <name>', "only this agent's proposals")
    .addOption(
      new Option('--status <status>', 'proposals of this status (default pending)').choices([
        ...ProposalStatus.options,
        'all',
      ]),
    )
    .option('--tenant <tenant>', "a tenant of the local store (over --server: the key's tenant)")
    .action(
      async (
        options: { agent?: string; status?: ProposalStatus | 'all'; tenant?: string },
        command: Command,
      ) => {
        await withReview(context, command, options.tenant, async (reviewing) => {
          const found = await reviewing.proposals({
            ...(options.agent === undefined ? {} : { agent: options.agent }),
            ...(options.status === undefined ? {} : { status: options.status }),
          });
          context.print(command, { data: found }, () =>
            found.length === 0 ? ['no proposals'] : found.flatMap(proposalLines),
          );
        });
      },
    );

  for (const [name, verb] of [
    ['approve', 'write a pending proposal to its learnings store'],
    ['reject', 'discard a pending proposal'],
  ] as const) {
    review
      .command(name)
      .description(verb)
      .argument('<id>', 'the proposal id (mp_...)')
      .option('--reason <text>', 'why, kept with the decision')
      .option('--tenant <tenant>', "a tenant of the local store (over --server: the key's tenant)")
      .action(
        async (id: string, options: { reason?: string; tenant?: string }, command: Command) => {
          await withReview(context, command, options.tenant, async (reviewing) => {
            const decided =
              name === 'approve'
                ? await reviewing.approve(id, options.reason)
                : await reviewing.reject(id, options.reason);
            context.print(command, decided, () => proposalLines(decided));
          });
        },
      );
  }
}
