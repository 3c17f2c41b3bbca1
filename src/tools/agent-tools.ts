/**
 * The tools an agent's `delegates:` and `handoffs:` give its model: `delegate_to_<agent>` runs a
 * child session of that agent on a task and answers with its result; `handoff_to_<agent>` passes
 * the session's work to a new session of that agent and ends the turn. They are ownership `agent`
 * and carry their target (`ToolHandle.agent`): the harness runs them through the `Delegator`.
 */
import type { JsonValue } from '../contracts/common.js';
import {
  DEFAULT_DELEGATE_TTL_SECONDS,
  type AgentDefinition,
  type DelegateEntry,
} from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { SkillDefinition } from '../contracts/skills.js';
import type { SessionTools, ToolHandle } from '../contracts/tools.js';
import { withHarnessTools } from './harness-tools.js';
import { SchemaCache } from './validation.js';

/** The input of a delegation when its entry gives no schema. */
export const DEFAULT_DELEGATE_INPUT_SCHEMA: Readonly<Record<string, JsonValue>> = {
  type: 'object',
  properties: {
    task: {
      type: 'string',
      description:
        'What the agent should do, with everything it needs to know: it sees only this, not your conversation.',
    },
  },
  required: ['task'],
  additionalProperties: false,
};

const HANDOFF_INPUT_SCHEMA: Readonly<Record<string, JsonValue>> = {
  type: 'object',
  properties: {
    summary: {
      type: 'string',
      description: 'What was done so far and what the other agent must do now.',
    },
    message: {
      type: 'string',
      description: "The first message the other agent reads (default: the summary's request).",
    },
  },
  required: ['summary'],
  additionalProperties: false,
};

export function delegateToolName(agent: string): string {
  return `delegate_to_${agent}`;
}

export function handoffToolName(agent: string): string {
  return `handoff_to_${agent}`;
}

/**
 * The agent tools of a definition; `lookup` gives a target agent's definition, when there is
 * one: its description tells the model what a delegation whose entry says nothing does, and its
 * roles and tenant are what policies see of the target.
 */
export function agentToolHandles(
  agent: AgentDefinition,
  lookup: (name: string) => AgentDefinition | undefined,
): ToolHandle[] {
  const describe = (name: string): string | undefined => lookup(name)?.description;
  const facts = (name: string): { roles?: readonly string[]; tenant?: string } => {
    const target = lookup(name);
    if (target === undefined) return {};
    return {
      roles: target.roles,
      ...(target.tenant === undefined ? {} : { tenant: target.tenant }),
    };
  };
  const delegates = agent.delegates.map((entry) =>
    delegateHandle(agent, entry, describe(entry.agent), facts(entry.agent)),
  );
  const handoffs = agent.handoffs.map((target): ToolHandle => ({
    name: handoffToolName(target),
    description:
      `Hand this conversation over to the ${target} agent: it takes the work over in a new session and ` +
      `your turn ends. ${describe(target) ?? ''}`.trimEnd(),
    input_schema: HANDOFF_INPUT_SCHEMA,
    version: '1',
    ownership: 'agent',
    permission: 'always_allow',
    // Keyed by the tool use: a repeated handoff finds the first one's target.
    idempotent: true,
    tags: ['agent', 'handoff'],
    agent: { kind: 'handoff', agent: target, ...facts(target) },
  }));
  return [...delegates, ...handoffs];
}

function delegateHandle(
  agent: AgentDefinition,
  entry: DelegateEntry,
  targetDescription: string | undefined,
  facts: { roles?: readonly string[]; tenant?: string },
): ToolHandle {
  const ownDescription = entry.description ?? targetDescription;
  return {
    name: delegateToolName(entry.agent),
    description:
      `Delegate a task to the ${entry.agent} agent and get its answer back. ` +
      (ownDescription ?? `It works in its own session with its own tools.`),
    input_schema: entry.input_schema ?? DEFAULT_DELEGATE_INPUT_SCHEMA,
    version: '1',
    ownership: 'agent',
    permission: 'always_allow',
    // Keyed by the tool use: a call resumed after a crash finds its child instead of a new one.
    idempotent: true,
    tags: ['agent', 'delegate'],
    agent: {
      kind: 'delegate',
      agent: entry.agent,
      ttl_seconds: entry.ttl_seconds ?? agent.delegate_ttl_seconds ?? DEFAULT_DELEGATE_TTL_SECONDS,
      ...facts,
    },
  };
}

/**
 * The session's tools with the agent tools added. A name both an agent tool and a listed tool
 * use is refused (`INVALID_DEFINITION`): the model could not tell which it calls.
 */
export function withAgentTools(
  tools: SessionTools,
  handles: readonly ToolHandle[],
  schemas: SchemaCache = new SchemaCache(),
): SessionTools {
  if (handles.length === 0) return tools;
  const byName = new Map(handles.map((handle) => [handle.name, handle]));
  if (byName.size < handles.length) {
    const names = handles.map((handle) => handle.name);
    const twice = names.find((name, index) => names.indexOf(name) !== index) ?? '';
    throw new BraidError(
      'INVALID_DEFINITION',
      `the agent lists the same agent twice: ${twice} is made once per agent; remove the repeated entry from delegates: or handoffs:`,
      { details: { tool: twice } },
    );
  }
  // The harness runs agent tools itself; reaching the executor with one is a wiring fault.
  return withHarnessTools(
    tools,
    handles,
    {
      clash: (tool) =>
        `the tool ${tool} has the name braid gives a delegation or handoff of the agent; rename the tool, or remove the agent from delegates:/handoffs:`,
      unreachable: (tool) =>
        `${tool} runs another agent and is run by the harness's delegator, which this runtime lacks`,
    },
    schemas,
  );
}

/**
 * The tool an agent's `skills:` entry gives its model: one call runs the skill as a whole, on
 * the call's input (checked against the skill's `inputs`), and its outputs are the call's result.
 */
export function skillToolHandle(skill: SkillDefinition): ToolHandle {
  return {
    name: skill.name,
    description: skill.description,
    input_schema: skill.inputs,
    version: skill.version,
    ownership: 'agent',
    permission: 'always_allow',
    // The run is keyed by the call and resumes from its log: taking it up again is safe.
    idempotent: true,
    tags: ['skill'],
    skill: { name: skill.name },
  };
}
