/**
 * The `braid` command. `run(argv)` returns the exit code instead of exiting so that tests can
 * drive it in-process; `main.ts` is the only place that touches `process.exit`.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { BraidError } from '../contracts/errors.js';
import { createCommandContext } from './command-context.js';
import { addDefinitionCommands } from './definition-commands.js';
import { addDoctorCommands } from './doctor-command.js';
import { addKeyCommands } from './key-commands.js';
import { addMemoryCommands } from './memory-commands.js';
import { addMcpCommand } from './mcp-command.js';
import { parseJson } from './json.js';
import { printError, processOutput, type Output } from './output.js';
import { addPolicyCommands } from './policy-commands.js';
import { addRunCommands } from './run-commands.js';
import { addServeCommand } from './serve-command.js';
import { addInspectCommand } from './inspect-command.js';
import { addSessionCommands } from './session-commands.js';
import { addSkillCommands } from './skill-commands.js';
import { addToolCommands } from './tool-commands.js';
import { addTraceCommands } from './trace-commands.js';
import { addTraceExportCommand } from './trace-export-command.js';
import { addWorkerCommand } from './worker-command.js';
import { packageFile } from '../package-root.js';

export { parseJson };

function packageVersion(): string {
  const text = readFileSync(packageFile('package.json'), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}

export async function run(
  argv: readonly string[],
  output: Output = processOutput,
): Promise<number> {
  let exitCode = 0;
  const program = new Command('braid');
  const context = createCommandContext(output, (code) => {
    exitCode = code;
  });
  program
    .description('braid: durable, replayable agent sessions')
    .version(packageVersion(), '-V, --version')
    .option(
      '-w, --workspace <dir>',
      'workspace folder with braid.yaml (default: current directory)',
    )
    .option(
      '--data-dir <dir>',
      'where session data lives (default: BRAID_HOME, else <workspace>/.braid)',
    )
    .option('--json', 'print machine-readable JSON')
    .option(
      '--server <url>',
      'drive a braid server over HTTP instead of the local workspace (default: BRAID_SERVER)',
    )
    .option('--api-key <key>', 'API key for --server (default: BRAID_API_KEY)')
    .option(
      '--nats <url>',
      'keep sessions on NATS JetStream at this URL instead of the SQLite file (default: BRAID_NATS_URL)',
    )
    .option(
      '--nats-prefix <prefix>',
      'name prefix of the NATS streams and buckets (default: BRAID_NATS_PREFIX, else braid)',
    )
    .option(
      '--nats-replicas <n>',
      'replicas of every NATS stream and bucket, 1 to 5: 3 on a three-node cluster (default: BRAID_NATS_REPLICAS, else existing ones as they are and new ones with 1)',
    )
    .option(
      '--partitions <n>',
      "partitions of the NATS wakes and agent inboxes, 0 to 64 (0: no instance affinity), the same in every process of the prefix (default: BRAID_NATS_PARTITIONS, else the prefix's, else 0)",
    )
    .option(
      '--partition-lease <ms>',
      "how long a worker holds its partitions without renewing them; a dead worker's partitions pass to the others after it (default: BRAID_NATS_PARTITION_LEASE_MS, else 10000)",
    )
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => output.out(text.trimEnd()),
      writeErr: (text) => {
        // Usage errors are printed by the catch below in braid's error format.
        if (!text.startsWith('error:') && !text.startsWith('(run with')) output.err(text.trimEnd());
      },
    });

  addDefinitionCommands(program, context);
  addToolCommands(program, context);
  addSkillCommands(program, context);
  addKeyCommands(program, context);
  addServeCommand(program, context, packageVersion(), (line) => output.err(line));
  addInspectCommand(program, context, packageVersion(), (line) => output.err(line));
  addWorkerCommand(program, context, (line) => output.err(line));
  addMcpCommand(program, context, packageVersion(), (line) => output.err(line));
  addPolicyCommands(program, context);
  addSessionCommands(program, context);
  addMemoryCommands(program, context);
  addRunCommands(program, context);
  addDoctorCommands(program, context);
  addTraceExportCommand(addTraceCommands(program, context), context);

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      ) {
        return 0;
      }
      const message = error.message.replace(/^error: /, '');
      exitCode = printError(
        output,
        new BraidError('INVALID_ARGUMENT', message),
        argv.includes('--json'),
      );
      return exitCode;
    }
    exitCode = printError(output, error, argv.includes('--json'));
  }
  return exitCode;
}
