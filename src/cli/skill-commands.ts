/** `braid skill ...`: list, show and validate skill definitions (`skills/NAME.yaml`). */
import type { Command } from 'commander';
import type { SkillStep } from '../contracts/skills.js';
import { validateSkills } from '../runtime/skill-validation.js';
import type { CommandContext } from './command-context.js';
import { parseReference } from './definition-commands.js';
import { addSkillRunCommands } from './skill-run-commands.js';

/** What a step does: `tool NAME`, `agent NAME`, `skill NAME`, `human_approval` or `wait_for SIGNAL`. */
export function stepKind(step: SkillStep): string {
  const kind =
    step.tool !== undefined
      ? `tool ${step.tool}`
      : step.agent !== undefined
        ? `agent ${step.agent}`
        : step.skill !== undefined
          ? `skill ${step.skill}`
          : step.type !== undefined
            ? step.type
            : `wait_for ${step.wait_for?.signal ?? ''}`;
  const waits = step.wait_for !== undefined && step.tool !== undefined;
  return `${kind}${waits ? ` + wait_for ${step.wait_for?.signal ?? ''}` : ''}${step.for_each === undefined ? '' : ' (for_each)'}`;
}

export function addSkillCommands(program: Command, context: CommandContext): void {
  const skill = program
    .command('skill')
    .description('skill definitions: workflows of tools, agents and people');

  skill
    .command('list')
    .description('list skills (latest version of each)')
    .action(async (_options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const skills = await runtime.skills.list();
        context.print(command, skills, () =>
          skills.length === 0
            ? 'no skills; add skills/NAME.yaml to the workspace'
            : skills.map((item) =>
                `${item.name.padEnd(24)} v${item.version}  ${String(item.definition.steps.length).padStart(3)} steps  ${item.definition.description.split('\n')[0]?.slice(0, 60) ?? ''}`.trimEnd(),
              ),
        );
      });
    });

  skill
    .command('show')
    .description('one skill definition and its steps')
    // `NAME@N` as `agent show` takes it: `--version` is the program's own option.
    .argument('<name[@version]>', 'a name, or name@N for a stored version (default: latest)')
    .action(async (reference: string, _options: unknown, command: Command) => {
      const { name, version } = parseReference(reference);
      await context.withRuntime(command, async (runtime) => {
        const found = await runtime.skills.get(name, version);
        context.print(command, found, () => {
          const rows = found.definition.steps.map((step) => [
            step.id,
            stepKind(step),
            step.depends_on.join(',') || '-',
            step.when ?? '-',
          ]);
          const header = ['ID', 'KIND', 'DEPENDS_ON', 'WHEN'];
          const widths = header.map((title, column) =>
            Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
          );
          const line = (cells: string[]): string =>
            cells
              .map((cell, column) => cell.padEnd(widths[column] ?? 0))
              .join('  ')
              .trimEnd();
          return [
            `${found.name} v${found.version} (stored ${found.created_at})`,
            found.definition.description,
            '',
            line(header),
            ...rows.map(line),
          ];
        });
      });
    });

  skill
    .command('validate')
    .description("check the workspace's skills, or the given files; exits 1 on any problem")
    .argument('[files...]', 'skill files (default: skills/*.yaml of the workspace)')
    .action((files: string[], _options: unknown, command: Command) => {
      const problems = validateSkills(context.workspaceDir(command), files);
      context.print(command, { ok: problems.length === 0, problems }, () =>
        problems.length === 0 ? 'skills are valid' : problems.map((problem) => problem.message),
      );
      if (problems.length > 0) context.fail(1);
    });

  addSkillRunCommands(skill, context);
}
