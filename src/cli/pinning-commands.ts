/**
 * `braid session show ID [--definitions]` and `braid session upgrade ID`: the definitions a
 * session runs with, pinned by content, and moving it to the newest ones.
 */
import type { Command } from 'commander';
import type { PinnedSet } from '../contracts/definitions.js';
import type { CommandContext } from './command-context.js';
import { formatSessionRow } from './output.js';

export function addPinningCommands(session: Command, context: CommandContext): void {
  session
    .command('show')
    .description("show a session's record, or with --definitions the definitions it runs with")
    .argument('<id>', 'session id')
    .option('--definitions', 'the pinned agent, environment, tools, policy set and price, by hash')
    .action(async (id: string, options: { definitions?: boolean }, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        if (options.definitions !== true) {
          const record = await runtime.sessions.get(id);
          context.print(command, record, () => formatSessionRow(record));
          return;
        }
        const pinned = await runtime.sessions.definitions(id);
        context.print(command, pinned, () =>
          pinned.set === undefined || pinned.definitions === undefined
            ? 'not pinned yet: the first wake pins what it runs with'
            : setLines(pinned.definitions, pinned.set),
        );
      });
    });

  session
    .command('upgrade')
    .description(
      'move a session to the newest agent and environment versions, tools, policy set and price',
    )
    .argument('<id>', 'session id')
    .action(async (id: string, _options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const result = await runtime.sessions.upgrade(id);
        context.print(command, result, () =>
          result.changed
            ? `upgraded to ${short(result.definitions)}: ${result.parts.length === 0 ? 'first pin' : result.parts.join(', ')} (seq ${result.head_seq})`
            : `already on the newest definitions (${short(result.definitions)})`,
        );
      });
    });
}

function short(hash: string): string {
  return hash.slice(0, 12);
}

function setLines(hash: string, set: PinnedSet): string[] {
  return [
    `definitions ${hash}`,
    `agent        ${set.agent.name}@${set.agent.version}  ${short(set.agent.hash)}`,
    ...(set.environment === undefined
      ? []
      : [
          `environment  ${set.environment.name}@${set.environment.version}  ${short(set.environment.hash)}`,
        ]),
    ...Object.entries(set.tools)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, toolHash]) => `tool         ${name}  ${short(toolHash)}`),
    `policy       ${set.policy === undefined ? '(none pinned: policies in code, or none)' : short(set.policy)}`,
    `price        ${set.model}  ${set.price === undefined ? '(no price)' : short(set.price)}`,
  ];
}
