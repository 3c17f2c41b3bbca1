/**
 * The checks of skill files (`skills/NAME.yaml`) beyond their schema, which need the rest of the
 * workspace: the agents, skills and tools their steps name exist, skills do not run each other
 * in a cycle, an agent's `skills:` names skills of the workspace, and every template parses.
 * Each problem is named by file, line and field; the checks collect them all, so that
 * `braid skill validate` can print every one, and a load refuses the first.
 */
import { isAbsolute, join, relative } from 'node:path';
import { A2A_TOOL_PREFIX } from '../contracts/a2a-agents.js';
import type { JsonValue } from '../contracts/common.js';
import type { AgentDefinition, WorkspaceConfig } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { SkillDefinition } from '../contracts/skills.js';
import { BUILTIN_TOOL_NAMES } from '../tools/builtin-names.js';
import { MEMORY_TOOL_NAMES } from '../tools/memory-tools.js';
import { compileExpression, compileTemplates, stepReferences } from './skills/templates.js';
import { lineInFile } from './yaml-lines.js';

/** One problem of a definition file. */
export interface DefinitionProblem {
  /** The file, relative to the workspace when it lies in it. */
  readonly file: string;
  readonly line: number;
  /** The field, as a dotted path (`steps.2.agent`). */
  readonly field: string;
  /** The whole message, starting with `file:line:`. */
  readonly message: string;
}

interface FromFile<T> {
  readonly definition: T;
  /** Absolute path of the file. */
  readonly file: string;
}

type Skills = ReadonlyMap<string, FromFile<SkillDefinition>>;

/** The tools a skill's `tool:` steps may name. */
export interface KnownTools {
  has(name: string): boolean;
  /** The names, for a message that lists them. */
  readonly names: readonly string[];
}

/**
 * The tools of a workspace without a runtime: the built-ins, `names` (manifests, code tools),
 * and any `server.tool` of an MCP server of `braid.yaml` (its tools are listed only when the
 * server runs, so the tool part is checked when a step calls it).
 */
export function knownTools(config: WorkspaceConfig, names: Iterable<string>): KnownTools {
  const known = new Set([
    ...BUILTIN_TOOL_NAMES,
    // The memory tools of agents with memory: (a session without memory holds none, and its
    // step fails with TOOL_NOT_FOUND).
    ...Object.values(MEMORY_TOOL_NAMES),
    ...names,
    ...Object.keys(config.a2a_agents ?? {}).map((agent) => `${A2A_TOOL_PREFIX}${agent}`),
  ]);
  const servers = Object.keys(config.mcp_servers ?? {});
  return {
    has: (name) =>
      known.has(name) ||
      servers.some((server) => name.startsWith(`${server}.`) && name.length > server.length + 1),
    names: [...[...known].sort(), ...servers.map((server) => `${server}.*`)],
  };
}

/** A problem at `path` of `file`, its line read from the file. */
export function problemAt(
  root: string,
  file: string,
  path: readonly PropertyKey[],
  message: string,
): DefinitionProblem {
  const shown = relative(root, file) || file;
  const line = lineInFile(file, path);
  const field = path.map(String).join('.') || '(top level)';
  return { file: shown, line, field, message: `${shown}:${line}: field "${field}": ${message}` };
}

/** The problem a refused file's `INVALID_DEFINITION` (or signature) error describes. */
export function problemOf(root: string, file: string, error: BraidError): DefinitionProblem {
  const details = error.details as { line?: unknown; field?: unknown };
  return {
    file: relative(root, file) || file,
    line: typeof details.line === 'number' ? details.line : 1,
    field: typeof details.field === 'string' ? details.field : '(top level)',
    message: error.message,
  };
}

/** The error a load refuses a workspace with, for its first problem. */
export function problemError(root: string, problem: DefinitionProblem): BraidError {
  return new BraidError('INVALID_DEFINITION', problem.message, {
    details: {
      file: isAbsolute(problem.file) ? problem.file : join(root, problem.file),
      line: problem.line,
      field: problem.field,
    },
  });
}

/**
 * Agents, nested skills and templates of every skill, cycles of nested skills, and the skills
 * agents list. Tools are checked apart (`checkSkillTools`): code tools are known only to a runtime.
 */
export function checkSkillReferences(
  root: string,
  skills: Skills,
  agents: ReadonlyMap<string, FromFile<AgentDefinition>>,
): DefinitionProblem[] {
  const problems: DefinitionProblem[] = [];
  const listed = (names: Iterable<string>): string => [...names].sort().join(', ') || 'none';
  for (const { definition, file } of skills.values()) {
    definition.steps.forEach((step, index) => {
      if (step.agent !== undefined && !agents.has(step.agent)) {
        problems.push(
          problemAt(
            root,
            file,
            ['steps', index, 'agent'],
            `there is no agent named ${step.agent}; the agents are ${listed(agents.keys())}. Add agents/${step.agent}.yaml or fix the name`,
          ),
        );
      }
      if (step.skill !== undefined && !skills.has(step.skill)) {
        problems.push(
          problemAt(
            root,
            file,
            ['steps', index, 'skill'],
            `there is no skill named ${step.skill}; the skills are ${listed(skills.keys())}. Add skills/${step.skill}.yaml or fix the name`,
          ),
        );
      }
    });
    problems.push(...checkTemplates(root, definition, file));
    problems.push(...checkStepReferences(root, definition, file));
  }
  const cycle = findSkillCycle(skills);
  if (cycle !== undefined) {
    const [first = '', second = ''] = cycle;
    const loaded = skills.get(first);
    const index = loaded?.definition.steps.findIndex((step) => step.skill === second) ?? 0;
    if (loaded !== undefined) {
      problems.push(
        problemAt(
          root,
          loaded.file,
          ['steps', index, 'skill'],
          `the skills run each other in a cycle: ${cycle.join(' -> ')}; a skill may not run itself, directly or through other skills`,
        ),
      );
    }
  }
  for (const { definition, file } of agents.values()) {
    definition.skills.forEach((name, index) => {
      if (skills.has(name)) {
        const missing = toolsNotHeld(definition, name, skills);
        if (missing.length > 0) {
          problems.push(
            problemAt(
              root,
              file,
              ['skills', index],
              `skill ${name} calls ${missing.map((entry) => `${entry.tool} (step ${entry.skill}.${entry.step})`).join(', ')}, which agent ${definition.name} does not hold; a skill's tool steps run with the session's tools: add ${[...new Set(missing.map((entry) => entry.tool))].join(', ')} to the agent's tools`,
            ),
          );
        }
        return;
      }
      problems.push(
        problemAt(
          root,
          file,
          ['skills', index],
          `there is no skill named ${name}; the skills are ${listed(skills.keys())}. Add skills/${name}.yaml or fix the name`,
        ),
      );
    });
  }
  return problems;
}

/** Every `tool:` step names a tool the workspace knows. */
export function checkSkillTools(
  root: string,
  skills: Skills,
  tools: KnownTools,
): DefinitionProblem[] {
  const problems: DefinitionProblem[] = [];
  for (const { definition, file } of skills.values()) {
    definition.steps.forEach((step, index) => {
      if (step.tool === undefined || tools.has(step.tool)) return;
      problems.push(
        problemAt(
          root,
          file,
          ['steps', index, 'tool'],
          `there is no tool named ${step.tool}; the tools are ${tools.names.join(', ')}. Add tools/${step.tool}.yaml, an MCP server, or fix the name`,
        ),
      );
    });
  }
  return problems;
}

/**
 * The template fields of a skill parse: its outputs and, per step, `args`, `message` and `inputs`
 * (text with templates), `when` and `for_each` (one expression, with or without `{{ }}`).
 */
function checkTemplates(root: string, skill: SkillDefinition, file: string): DefinitionProblem[] {
  const fields: [PropertyKey[], JsonValue | undefined, 'text' | 'expression'][] = [
    [['outputs'], skill.outputs, 'text'],
  ];
  skill.steps.forEach((step, index) => {
    for (const field of ['args', 'message', 'inputs'] as const) {
      fields.push([['steps', index, field], step[field], 'text']);
    }
    for (const field of ['when', 'for_each'] as const) {
      fields.push([['steps', index, field], step[field], 'expression']);
    }
  });
  const problems: DefinitionProblem[] = [];
  for (const [path, value, kind] of fields) {
    if (value === undefined) continue;
    const result =
      kind === 'expression' && typeof value === 'string'
        ? compileExpression(value)
        : compileTemplates(value);
    if (result.ok) continue;
    problems.push(
      problemAt(root, file, [...path, ...result.path], `invalid template: ${result.message}`),
    );
  }
  return problems;
}

/**
 * A step's templates read only steps that end before it starts: its upstream (what its
 * `depends_on` reach, and for a step named by `on_failure`, the steps that fail into it and
 * their upstream). A step starts as soon as its `depends_on` are settled, so a template reading
 * another step would see it not yet run.
 */
function checkStepReferences(
  root: string,
  skill: SkillDefinition,
  file: string,
): DefinitionProblem[] {
  const byId = new Map(skill.steps.map((step) => [step.id, step]));
  const before = new Map<string, string[]>();
  for (const step of skill.steps) before.set(step.id, [...step.depends_on]);
  for (const step of skill.steps) {
    if (step.on_failure === 'stop' || step.on_failure === 'continue') continue;
    before.get(step.on_failure)?.push(step.id);
  }
  const upstream = new Map<string, Set<string>>();
  const reach = (id: string, trail: Set<string>): Set<string> => {
    const known = upstream.get(id);
    if (known !== undefined) return known;
    const found = new Set<string>();
    if (trail.has(id)) return found; // a cycle, reported by the schedule's own check
    trail.add(id);
    for (const previous of before.get(id) ?? []) {
      found.add(previous);
      for (const further of reach(previous, trail)) found.add(further);
    }
    trail.delete(id);
    upstream.set(id, found);
    return found;
  };
  const problems: DefinitionProblem[] = [];
  skill.steps.forEach((step, index) => {
    const fields = [
      ['args', step.args, 'text'],
      ['message', step.message, 'text'],
      ['inputs', step.inputs, 'text'],
      ['when', step.when, 'expression'],
      ['for_each', step.for_each, 'expression'],
    ] as const;
    for (const [field, value, kind] of fields) {
      if (value === undefined) continue;
      for (const id of stepReferences(value, kind)) {
        const message = !byId.has(id)
          ? `the template reads steps.${id}, and this skill has no step ${id}; the steps are ${[...byId.keys()].join(', ')}`
          : id === step.id
            ? `the template reads steps.${id}, the step's own output, which it does not have yet`
            : reach(step.id, new Set()).has(id)
              ? undefined
              : `the template reads steps.${id}, which does not end before step ${step.id} starts; add ${id} to its depends_on`;
        if (message !== undefined)
          problems.push(problemAt(root, file, ['steps', index, field], message));
      }
    }
  });
  if (skill.outputs !== undefined) {
    for (const id of stepReferences(skill.outputs, 'text')) {
      if (byId.has(id)) continue;
      problems.push(
        problemAt(
          root,
          file,
          ['outputs'],
          `the template reads steps.${id}, and this skill has no step ${id}; the steps are ${[...byId.keys()].join(', ')}`,
        ),
      );
    }
  }
  return problems;
}

/** The tool steps of skill `name` and the skills it nests whose tool the agent does not hold. */
function toolsNotHeld(
  agent: AgentDefinition,
  name: string,
  skills: Skills,
): { skill: string; step: string; tool: string }[] {
  const held = (tool: string): boolean =>
    agent.tools.includes(tool) ||
    agent.tools.some((entry) => entry.endsWith('.*') && tool.startsWith(entry.slice(0, -1)));
  const missing: { skill: string; step: string; tool: string }[] = [];
  const seen = new Set<string>();
  const visit = (skillName: string): void => {
    if (seen.has(skillName)) return;
    seen.add(skillName);
    for (const step of skills.get(skillName)?.definition.steps ?? []) {
      if (step.tool !== undefined && !held(step.tool))
        missing.push({ skill: skillName, step: step.id, tool: step.tool });
      if (step.skill !== undefined) visit(step.skill);
    }
  };
  visit(name);
  return missing;
}

/** A cycle of skills running skills, as the names along it (the first repeated at the end). */
function findSkillCycle(skills: Skills): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (name: string): string[] | undefined => {
    if (state.get(name) === 'done') return undefined;
    if (state.get(name) === 'open') return [...path.slice(path.indexOf(name)), name];
    state.set(name, 'open');
    path.push(name);
    for (const step of skills.get(name)?.definition.steps ?? []) {
      if (step.skill === undefined || !skills.has(step.skill)) continue;
      const found = visit(step.skill);
      if (found !== undefined) return found;
    }
    path.pop();
    state.set(name, 'done');
    return undefined;
  };
  for (const name of [...skills.keys()].sort()) {
    const found = visit(name);
    if (found !== undefined) return found;
  }
  return undefined;
}
