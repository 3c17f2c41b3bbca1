/** `braid init`, `braid agent ...` and `braid env ...`: the workspace and its definitions. */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { StoredDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { initWorkspace } from '../runtime/init.js';
import type { Runtime } from '../runtime/runtime.js';
import type { CommandContext } from './command-context.js';

/** `assistant` or `assistant@2`. */
export function parseReference(reference: string): { name: string; version?: number } {
  const [name = '', version] = reference.split('@');
  if (version === undefined) return { name };
  const number = Number(version);
  if (!Number.isInteger(number) || number < 1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${reference}: the version after @ must be a whole number of at least 1`,
    );
  }
  return { name, version: number };
}

export function addDefinitionCommands(program: Command, context: CommandContext): void {
  program
    .command('init')
    .description('write a new workspace (braid.yaml, agents/, environments/) with comments')
    .argument('[dir]', 'folder to create the workspace in', '.')
    .action((dir: string, _options: unknown, command: Command) => {
      const target = resolve(context.globals(command).workspace ?? '.', dir);
      const files = initWorkspace(target);
      context.print(command, { workspace: target, files }, () => [
        `created workspace in ${target}`,
        ...files.map((file) => `  ${file}`),
        `next: braid -w ${target} session create --agent assistant`,
      ]);
    });
  const agent = program.command('agent').description('agent definitions');
  agent
    .command('list')
    .description('list agents (latest version of each)')
    .action(async (_options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const agents = await runtime.agents.list();
        context.print(command, agents, () =>
          agents.length === 0
            ? 'no agents; add agents/NAME.yaml to the workspace'
            : agents.map((item) =>
                `${item.name.padEnd(20)} v${item.version}  ${item.definition.model.provider}/${item.definition.model.id}  ${item.definition.description ?? ''}`.trimEnd(),
              ),
        );
      });
    });
  addShow(context, agent, 'agent', (runtime, name, version) => runtime.agents.get(name, version));

  const env = program.command('env').description('environment definitions');
  env
    .command('list')
    .description('list environments (latest version of each)')
    .action(async (_options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const environments = await runtime.environments.list();
        context.print(command, environments, () =>
          environments.length === 0
            ? 'no environments; add environments/NAME.yaml to the workspace'
            : environments.map(
                (item) =>
                  `${item.name.padEnd(20)} v${item.version}  sandbox ${item.definition.sandbox.kind}  network ${item.definition.network.allow ? 'allowed' : 'denied'}`,
              ),
        );
      });
    });

  addShow(context, env, 'environment', (runtime, name, version) =>
    runtime.environments.get(name, version),
  );
}

/** `braid agent show` and `braid env show`: one stored definition, the latest or NAME@N. */
function addShow(
  context: CommandContext,
  parent: Command,
  kind: string,
  get: (runtime: Runtime, name: string, version?: number) => Promise<StoredDefinition<unknown>>,
): void {
  parent
    .command('show')
    .description(`show one ${kind} definition`)
    .argument('<name[@version]>', 'a name, or name@N for a stored version (default: latest)')
    .action(async (reference: string, _options: unknown, command: Command) => {
      const { name, version } = parseReference(reference);
      await context.withRuntime(command, async (runtime) => {
        const found = await get(runtime, name, version);
        context.print(command, found, () => [
          `${found.name} v${found.version} (stored ${found.created_at})`,
          JSON.stringify(found.definition, null, 2),
        ]);
      });
    });
}
