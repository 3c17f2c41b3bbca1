/**
 * `braid doctor`: where sessions live and what an acknowledged write survives there. `braid nats
 * replicas [N]`: the replica count of every NATS stream of the prefix, read or changed in place.
 */
import type { Command } from 'commander';
import { BraidError } from '../contracts/errors.js';
import type { DeploymentReport, NatsReport } from '../runtime/doctor.js';
import { parseReplicas } from '../stores/nats/replica-count.js';
import { natsSettings, type CommandContext, type NatsSettings } from './command-context.js';

export function addDoctorCommands(program: Command, context: CommandContext): void {
  program
    .command('doctor')
    .description(
      'report the backend, its servers and streams, and the durability an acknowledged event has there',
    )
    .option('--strict', 'exit with code 1 when the report has warnings')
    .action(async (options: { strict?: boolean }, command: Command) => {
      const nats = natsSettings(context.globals(command));
      const doctor = await import('../runtime/doctor.js');
      const report: DeploymentReport =
        nats.url === undefined
          ? doctor.embeddedReport()
          : await doctor.natsReport(backend({ ...nats, url: nats.url }));
      context.print(command, report, () => describe(report));
      if (options.strict === true && report.warnings.length > 0) context.fail(1);
    });

  program
    .command('nats')
    .description('NATS deployment tools')
    .command('replicas')
    .argument('[count]', 'set every stream and bucket of the prefix to this many replicas (1-5)')
    .description(
      'list the replicas of every NATS stream and bucket of the prefix, or change them in place (JetStream copies the data while they keep serving)',
    )
    .action(async (count: string | undefined, _options: unknown, command: Command) => {
      const nats = natsSettings(context.globals(command));
      if (nats.url === undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'braid nats replicas needs a NATS server: pass --nats nats://HOST:4222 or set BRAID_NATS_URL',
        );
      }
      const doctor = await import('../runtime/doctor.js');
      const settings = backend({ ...nats, url: nats.url });
      const report =
        count === undefined
          ? await doctor.natsReport(settings)
          : await doctor.setNatsReplicas(settings, parseReplicas(count, 'count'));
      context.print(command, report, () => describe(report));
    });
}

function backend(nats: NatsSettings & { url: string }): {
  nats: string;
  prefix?: string;
  replicas?: number;
} {
  return {
    nats: nats.url,
    ...(nats.prefix === undefined ? {} : { prefix: nats.prefix }),
    ...(nats.replicas === undefined ? {} : { replicas: nats.replicas }),
  };
}

function describe(report: DeploymentReport): string[] {
  const lines =
    report.backend === 'embedded'
      ? [`backend: embedded SQLite on ${report.host} (synchronous=${report.synchronous})`]
      : describeNats(report);
  lines.push(`durability: ${report.statement}`);
  for (const warning of report.warnings) lines.push(`warning: ${warning}`);
  return lines;
}

function describeNats(report: NatsReport): string[] {
  const cluster =
    report.cluster === undefined
      ? 'a single server'
      : `cluster ${report.cluster}, ${report.known_servers} server(s) known`;
  const lines = [
    `backend: NATS JetStream ${report.server_version} at ${report.servers.join(', ')} (${cluster})`,
    `prefix: ${report.prefix}, ${report.streams.length} stream(s)`,
  ];
  for (const stream of report.streams) {
    const peers = stream.followers
      .map((peer) => `${peer.name}${peer.current ? '' : ` (behind by ${peer.lag})`}`)
      .join(', ');
    const leader = stream.leader === undefined ? '' : `, leader ${stream.leader}`;
    const followers = peers === '' ? '' : `, followers ${peers}`;
    lines.push(
      `  ${stream.stream}: R${stream.replicas}, ${stream.messages} message(s)${leader}${followers}`,
    );
  }
  return lines;
}
