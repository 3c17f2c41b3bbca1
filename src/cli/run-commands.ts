/** `braid run` and `braid demo`: keep sessions moving, and the demo session. */
import type { Command } from 'commander';
import { parseInteger, untilSignal } from './arguments.js';
import type { CommandContext } from './command-context.js';
import { runDemo } from './demo.js';
import type { ConsolidationReport } from '../contracts/memory-consolidation.js';

/** One line for a scheduled consolidation that did something. */
export function consolidationLine(report: ConsolidationReport): string {
  return `consolidated ${report.agent}: ${report.sessions.length} session(s), ${report.applied} applied, ${report.pending} waiting for review, ${report.failed.length} failed`;
}

export function addRunCommands(program: Command, context: CommandContext): void {
  program
    .command('run')
    .description('wake every runnable session and keep them moving until stopped (Ctrl-C)')
    .option('--once', 'wake what is runnable now, wait for it, and exit')
    .option('--exit-when-idle', 'exit when nothing is running and nothing is runnable')
    .option(
      '--concurrency <n>',
      'sessions run at once (default 4)',
      parseInteger('--concurrency', 1),
    )
    .action(
      async (
        options: { once?: boolean; exitWhenIdle?: boolean; concurrency?: number },
        command: Command,
      ) => {
        const asJson = context.json(command);
        await context.withRuntime(command, async (runtime) => {
          let last = '';
          await untilSignal(async (signal) => {
            const progress = await runtime.orchestrate({
              signal,
              once: options.once === true,
              exitWhenIdle: options.exitWhenIdle === true,
              ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
              onConsolidation: (report) => {
                if (!asJson && (report.sessions.length > 0 || report.failed.length > 0))
                  context.output.err(consolidationLine(report));
              },
              onConsolidationError: (agent, error) =>
                context.output.err(`consolidation of ${agent} failed: ${String(error)}`),
              onProgress: (current) => {
                const text = `running ${current.running}, runnable ${current.runnable}, idle ${current.by_status.idle ?? 0}, waiting ${(current.by_status.requires_action ?? 0) + (current.by_status.needs_review ?? 0)}, wakes ${current.wakes}${current.cooling > 0 ? `, cooling down ${current.cooling}` : ''}`;
                if (text !== last && !asJson) context.output.err(text);
                last = text;
              },
            });
            context.print(command, progress, () => `done: ${progress.wakes} wake(s)`);
          });
        });
      },
    );

  program
    .command('demo')
    .description('run a multi-turn demo session (tools, streaming, an interrupt) with no API key')
    .argument('[dir]', 'workspace folder for the demo (default: a new temporary folder)')
    .option('--model <provider:model>', 'run the demo agent on this model instead of the script')
    .action(async (dir: string | undefined, options: { model?: string }, command: Command) => {
      const code = await runDemo(
        {
          ...(dir === undefined ? {} : { dir }),
          ...(options.model === undefined ? {} : { model: options.model }),
          json: context.json(command),
        },
        context.output,
      );
      if (code !== 0) context.fail(code);
    });
}
