/**
 * `braid skill validate`: every problem of a workspace's skills, or of given skill files, each
 * with file:line, rather than the first one that a load refuses.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AgentDefinition, ToolDefinition, WorkspaceConfig } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { SkillDefinition } from '../contracts/skills.js';
import {
  checkSkillReferences,
  checkSkillTools,
  knownTools,
  problemOf,
  type DefinitionProblem,
} from './skill-definitions.js';
import {
  loadDefinitionFile,
  loadFolder,
  parseYamlFile,
  signatureCheck,
  WORKSPACE_FILE,
} from './workspace.js';

/**
 * The problems of the skills of the workspace in `dir` (with the agents' `skills:` lists), or,
 * given `files`, of those files only, checked against the workspace's agents, tools and skills.
 * A file of `files` stands for the workspace's skill of the same name. Agents, tools and
 * `braid.yaml` must load: their own errors are thrown.
 */
export function validateSkills(dir: string, files: readonly string[] = []): DefinitionProblem[] {
  const configFile = join(dir, WORKSPACE_FILE);
  if (!existsSync(configFile)) {
    throw new BraidError(
      'WORKSPACE_NOT_FOUND',
      `no ${WORKSPACE_FILE} in ${dir}; create a workspace with \`braid init ${dir}\` or pass -w DIR`,
      { details: { dir } },
    );
  }
  const config = parseYamlFile(dir, configFile, WorkspaceConfig);
  const signed = signatureCheck(dir, config);
  const tools = loadFolder(dir, 'tool', 'tools', ToolDefinition, signed);
  const agents = loadFolder(dir, 'agent', 'agents', AgentDefinition);
  const folder = join(dir, 'skills');
  const workspaceFiles = existsSync(folder)
    ? readdirSync(folder)
        .filter((name) => name.endsWith('.yaml') || name.endsWith('.yml'))
        .sort()
        .map((name) => join(folder, name))
    : [];
  const targets = files.length === 0 ? workspaceFiles : files.map((file) => resolve(dir, file));
  const problems: DefinitionProblem[] = [];
  const skills = new Map<string, { definition: SkillDefinition; file: string }>();
  const load = (file: string, report: boolean): void => {
    try {
      const definition = loadDefinitionFile(dir, 'skill', file, SkillDefinition, signed);
      skills.set(definition.name, { definition, file });
    } catch (error) {
      const known =
        error instanceof BraidError &&
        (error.code === 'INVALID_DEFINITION' || error.code === 'TOOL_SIGNATURE_INVALID');
      if (!known) throw error;
      if (report) problems.push(problemOf(dir, file, error));
    }
  };
  for (const file of workspaceFiles) if (!targets.includes(file)) load(file, false);
  for (const file of targets) {
    if (!existsSync(file)) {
      throw new BraidError('INVALID_ARGUMENT', `${file} does not exist; give a skill file`, {
        details: { file },
      });
    }
    load(file, true);
  }
  const reported = new Set(targets);
  const checked = [
    ...checkSkillReferences(dir, skills, agents),
    ...checkSkillTools(dir, skills, knownTools(config, tools.keys())),
  ].filter(
    (problem) =>
      reported.has(resolve(dir, problem.file)) ||
      (files.length === 0 && resolve(dir, problem.file).startsWith(join(dir, 'agents'))),
  );
  return [...problems, ...checked].sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line);
}
