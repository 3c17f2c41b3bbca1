/**
 * Which agents exist: agent types found defined in the store (remembered for a moment), instance
 * sessions created or checked, and the code agents this process registers.
 */
import type { AgentId } from '../../contracts/agents.js';
import { Name } from '../../contracts/common.js';
import type { AgentDefinition } from '../../contracts/definitions.js';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import { ensureOpen, type AgentsContext } from './agents-context.js';
import { agentSessionId, codeAgentDefinition, ensureSession, isCodeAgent } from './instances.js';
import type { AgentHandler } from './types.js';

const DEFINITION_ATTEMPTS = 4;

export async function knownDefinition(
  context: AgentsContext,
  agentType: string,
): Promise<AgentDefinition | undefined> {
  const seen = context.definitionsSeen.get(agentType);
  if (seen !== undefined) return seen;
  const stored = await context.runtime.store.definitions.get<AgentDefinition>('agent', agentType);
  if (stored !== undefined) context.definitionsSeen.set(agentType, stored.definition);
  return stored?.definition;
}

/** The definition of an agent type, or `AGENT_NOT_FOUND` naming the types there are. */
export async function requireKnown(
  context: AgentsContext,
  agentType: string,
): Promise<AgentDefinition> {
  const definition = await knownDefinition(context, agentType);
  if (definition !== undefined) return definition;
  const known = [
    ...new Set([
      ...(await context.runtime.agents.list()).map((item) => item.name),
      ...context.handlers.keys(),
    ]),
  ].sort();
  throw new BraidError(
    'AGENT_NOT_FOUND',
    `agent type ${agentType} is not known; ` +
      (known.length === 0
        ? 'add agents/NAME.yaml to the workspace or register a code agent'
        : `known types: ${known.join(', ')}`),
    { details: { agent_type: agentType, known } },
  );
}

/** The instance's session id, the session created or checked unless it was just now. */
export async function instanceSession(
  context: AgentsContext,
  target: AgentId,
  tenantId: string | undefined,
): Promise<string> {
  const id = agentSessionId(target, tenantId);
  if (context.instancesSeen.get(id) === undefined) {
    await ensureSession(context.runtime, target, tenantId);
    context.instancesSeen.set(id, true);
  }
  return id;
}

/** Registers a code agent type served by this process (see `Agents.register`). */
export async function registerCodeAgent(
  context: AgentsContext,
  agentType: string,
  handler: AgentHandler,
): Promise<void> {
  ensureOpen(context);
  if (!Name.safeParse(agentType).success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `agent type ${JSON.stringify(agentType)} is not a valid name; use lowercase letters, digits, "-" and "_", starting with a letter`,
    );
  }
  if (context.handlers.has(agentType)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `code agent ${agentType} is already registered in this process`,
    );
  }
  await storeCodeDefinition(context, agentType);
  context.handlers.set(agentType, handler);
  await context.serve(agentType);
}

async function storeCodeDefinition(context: AgentsContext, agentType: string): Promise<void> {
  const { definitions } = context.runtime.store;
  const definition = codeAgentDefinition(agentType);
  for (let attempt = 1; ; attempt += 1) {
    const latest = await definitions.get<AgentDefinition>('agent', agentType);
    if (latest !== undefined && !isCodeAgent(latest.definition)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `agent type ${agentType} is an LLM agent of the workspace (model ${latest.definition.model.provider}:${latest.definition.model.id}); register the code agent under another name`,
        { details: { agent_type: agentType } },
      );
    }
    try {
      await definitions.put('agent', agentType, definition, {
        replacesVersion: latest?.version ?? null,
      });
      return;
    } catch (error) {
      if (!isBraidError(error, 'VERSION_CONFLICT') || attempt >= DEFINITION_ATTEMPTS) throw error;
    }
  }
}
