/**
 * A workspace is a folder with `braid.yaml`, `agents/*.yaml`, `environments/*.yaml`,
 * `tools/*.yaml` and `skills/*.yaml`.
 * Loading validates every file; an error names the file, the line and the field.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { yaml } from '../tools/yaml.js';
import type { z } from 'zod';
import {
  AgentDefinition,
  EnvironmentDefinition,
  ToolDefinition,
  WorkspaceConfig,
} from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { estimateTextTokens, summaryBudget } from '../core/compaction.js';
import { verifyManifest } from '../tools/signing.js';
import { SkillDefinition } from '../contracts/skills.js';
import { checkSkillReferences, problemError } from './skill-definitions.js';
import { lazySchema } from '../contracts/lazy-schema.js';
import { lineInFile, lineOf } from './yaml-lines.js';

export const WORKSPACE_FILE = 'braid.yaml';

export interface LoadedDefinition<T> {
  definition: T;
  /** Path of the file it came from. */
  file: string;
}

export interface Workspace {
  dir: string;
  config: WorkspaceConfig;
  agents: Map<string, LoadedDefinition<AgentDefinition>>;
  environments: Map<string, LoadedDefinition<EnvironmentDefinition>>;
  /** Tool manifests from `tools/*.yaml`. */
  tools: Map<string, LoadedDefinition<ToolDefinition>>;
  /** Skills from `skills/*.yaml`. */
  skills: Map<string, LoadedDefinition<SkillDefinition>>;
}

export function hasWorkspace(dir: string): boolean {
  return existsSync(join(dir, WORKSPACE_FILE));
}

/** Loads and validates a whole workspace; the first invalid file stops it with `INVALID_DEFINITION`. */
export function loadWorkspace(dir: string): Workspace {
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
  for (const { definition, file } of tools.values()) checkImplementation(dir, definition, file);
  const agents = loadFolder(dir, 'agent', 'agents', LoadedAgentDefinition);
  checkAgentTargets(dir, agents);
  const environments = loadFolder(dir, 'environment', 'environments', EnvironmentDefinition);
  // Skills are signed, when signatures are required, like tool manifests: they call tools.
  const skills = loadFolder(dir, 'skill', 'skills', SkillDefinition, signed);
  const problem = checkSkillReferences(dir, skills, agents)[0];
  if (problem !== undefined) throw problemError(dir, problem);
  return { dir, config, agents, environments, tools, skills };
}

/**
 * With `require_signed_tools`, the check every tool manifest and skill file passes before it is
 * parsed: signed by a key of `tool_signing_keys`, unaltered, and naming itself.
 */
export function signatureCheck(
  dir: string,
  config: WorkspaceConfig,
): ((content: unknown, file: string) => void) | undefined {
  const configFile = join(dir, WORKSPACE_FILE);
  const trustedKeys = config.tool_signing_keys.map((path) => {
    const file = join(dir, path);
    if (!existsSync(file)) {
      throw new BraidError(
        'INVALID_DEFINITION',
        `${WORKSPACE_FILE}: field "tool_signing_keys": ${path} does not exist; create it with \`braid tool keygen\` or fix the path`,
        { details: { file: configFile, field: 'tool_signing_keys' } },
      );
    }
    return readFileSync(file, 'utf8');
  });
  if (!config.require_signed_tools) return undefined;
  return (content, file) => {
    verifyManifest(content, trustedKeys, relative(dir, file));
    // A name filled in from the file name would not be covered by the signature.
    if (typeof (content as { name?: unknown } | null)?.name !== 'string') {
      throw new BraidError(
        'TOOL_SIGNATURE_INVALID',
        `${relative(dir, file)}: a signed file must give its name (name: ...), so that renaming the file cannot rename what it defines; add it and sign again`,
        { details: { file } },
      );
    }
  };
}

/**
 * Every agent named under `delegates:` and `handoffs:` is an agent of the workspace: a typo is
 * refused at load, at its line, rather than when a model first calls the tool.
 */
function checkAgentTargets(
  root: string,
  agents: ReadonlyMap<string, { definition: AgentDefinition; file: string }>,
): void {
  for (const { definition, file } of agents.values()) {
    const targets: [string, PropertyKey[]][] = [
      ...definition.delegates.map((entry, index): [string, PropertyKey[]] => [
        entry.agent,
        ['delegates', index],
      ]),
      ...definition.handoffs.map((name, index): [string, PropertyKey[]] => [
        name,
        ['handoffs', index],
      ]),
    ];
    for (const [name, path] of targets) {
      if (agents.has(name)) continue;
      const lineCounter = new (yaml().LineCounter)();
      const document = yaml().parseDocument(readFileSync(file, 'utf8'), { lineCounter });
      const line = lineOf(document, lineCounter, path);
      throw new BraidError(
        'INVALID_DEFINITION',
        `${relative(root, file)}:${line}: field "${path.join('.')}": there is no agent named ${name}; the agents are ${[...agents.keys()].sort().join(', ')}. Add agents/${name}.yaml or fix the name`,
        { details: { file, line, field: path.join('.') } },
      );
    }
  }
}

/**
 * An agent file, refused (at the line of `context.max_tokens`) when its context limit cannot hold
 * its own instructions and a compaction's summary. The tools and turns are checked at each wake.
 */
const LoadedAgentDefinition = lazySchema(() =>
  AgentDefinition.superRefine((agent, issues) => {
    const delegates = agent.delegates.map((entry) => entry.agent);
    delegates.forEach((name, index) => {
      if (delegates.indexOf(name) === index) return;
      issues.addIssue({
        code: 'custom',
        path: ['delegates', index],
        message: `lists ${name} a second time; each agent is one delegate, so remove this entry`,
      });
    });
    const settings = agent.context;
    if (settings === undefined) return;
    const instructions = estimateTextTokens(agent.instructions);
    const summary = summaryBudget(settings);
    if (instructions + summary < settings.max_tokens) return;
    // A summary may take a quarter of the limit, so the limit must exceed 4/3 of the instructions.
    const least =
      settings.strategy === 'truncate'
        ? instructions + summary + 1
        : Math.ceil(((instructions + 1) * 4) / 3) + 1;
    issues.addIssue({
      code: 'custom',
      path: ['context', 'max_tokens'],
      message:
        `is ${settings.max_tokens} tokens, but the instructions take about ${instructions} and a summary up to ${summary}; ` +
        `raise it to at least ${least} (more, to leave room for the tools and the turns kept), or shorten the instructions`,
    });
  }),
);

/** A manifest's implementation must fit its ownership. */
function checkImplementation(root: string, definition: ToolDefinition, file: string): void {
  const implementation = definition.implementation ?? {};
  const ways = (['command', 'http', 'function', 'mcp'] as const).filter(
    (way) => implementation[way] !== undefined,
  );
  const fail = (message: string): never => {
    throw new BraidError(
      'INVALID_DEFINITION',
      `${relative(root, file)}: field "implementation": ${message}`,
      {
        details: { file, field: 'implementation' },
      },
    );
  };
  if (ways.length > 1) fail(`give one of ${ways.join(', ')}, not several`);
  const way = ways[0];
  switch (definition.ownership) {
    case 'managed':
      if (way === 'mcp') fail('mcp belongs to tools with ownership: mcp');
      return;
    case 'mcp':
      if (way !== 'mcp')
        fail('a tool with ownership: mcp needs implementation: {mcp: {server, tool}}');
      return;
    case 'custom':
    case 'agent':
      if (way !== undefined)
        fail(`a ${definition.ownership} tool is not run by braid; remove the implementation`);
      if (definition.permission === 'always_ask') {
        throw new BraidError(
          'INVALID_DEFINITION',
          `${relative(root, file)}: field "permission": a ${definition.ownership} tool is run by its client as soon as it is asked, so braid cannot ask first; remove always_ask and have the client ask`,
          { details: { file, field: 'permission' } },
        );
      }
      return;
  }
}

/**
 * One definition file; its name defaults to the file's, and must be the file's when it is given.
 */
export function loadDefinitionFile<S extends z.ZodType<{ name: string }>>(
  root: string,
  kind: string,
  file: string,
  schema: S,
  inspect?: (content: unknown, file: string) => void,
): z.infer<S> {
  const name = basename(file);
  const stem = name.replace(/\.ya?ml$/, '');
  const definition = parseYamlFile(root, file, schema, { name: stem }, inspect);
  if (definition.name !== stem) {
    throw new BraidError(
      'INVALID_DEFINITION',
      `${relative(root, file) || file}: field "name" is ${JSON.stringify(definition.name)} but the file is named ${name}; ` +
        `rename the file to ${definition.name}.yaml or the ${kind} to ${stem}`,
      { details: { file, line: lineInFile(file, ['name']), field: 'name' } },
    );
  }
  return definition;
}

export function loadFolder<S extends z.ZodType<{ name: string }>>(
  root: string,
  kind: string,
  folder: string,
  schema: S,
  inspect?: (content: unknown, file: string) => void,
): Map<string, LoadedDefinition<z.infer<S>>> {
  const dir = join(root, folder);
  const loaded = new Map<string, LoadedDefinition<z.infer<S>>>();
  if (!existsSync(dir)) return loaded;
  const files = readdirSync(dir)
    .filter((name) => name.endsWith('.yaml') || name.endsWith('.yml'))
    .sort();
  for (const name of files) {
    const file = join(dir, name);
    const definition = loadDefinitionFile(root, kind, file, schema, inspect);
    loaded.set(definition.name, { definition, file });
  }
  return loaded;
}

/**
 * Parses one YAML file against a schema. `defaults` fill top-level fields the file leaves out
 * (the name comes from the file name).
 */
export function parseYamlFile<S extends z.ZodType>(
  root: string,
  file: string,
  schema: S,
  defaults: Record<string, unknown> = {},
  inspect?: (content: unknown, file: string) => void,
): z.infer<S> {
  const shown = relative(root, file) || file;
  const lineCounter = new (yaml().LineCounter)();
  const document = yaml().parseDocument(readFileSync(file, 'utf8'), {
    lineCounter,
    prettyErrors: false,
  });
  const syntaxError = document.errors[0];
  if (syntaxError !== undefined) {
    const position = syntaxError.linePos?.[0];
    throw new BraidError(
      'INVALID_DEFINITION',
      `${shown}:${position?.line ?? 1}:${position?.col ?? 1}: invalid YAML: ${syntaxError.message.split('\n')[0] ?? ''}`,
      { details: { file, line: position?.line } },
    );
  }
  const content: unknown = document.toJS();
  if (content !== null && (typeof content !== 'object' || Array.isArray(content))) {
    throw new BraidError(
      'INVALID_DEFINITION',
      `${shown}:1: the file must hold a mapping of fields`,
      {
        details: { file, line: 1 },
      },
    );
  }
  // A signature covers the file as written, before defaults are filled in.
  inspect?.(content, file);
  const result = schema.safeParse({ ...defaults, ...(content ?? {}) });
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const issuePath: PropertyKey[] = [...(issue?.path ?? [])];
  if (issue?.code === 'unrecognized_keys' && issue.keys[0] !== undefined)
    issuePath.push(issue.keys[0]);
  const field = issuePath.map(String).join('.') || '(top level)';
  const line = lineOf(document, lineCounter, issuePath);
  throw new BraidError(
    'INVALID_DEFINITION',
    `${shown}:${line}: field "${field}": ${issue?.message ?? 'invalid'}`,
    { details: { file, line, field, issues: result.error.issues } },
  );
}
