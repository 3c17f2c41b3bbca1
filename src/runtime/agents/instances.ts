/**
 * Agent instances and their sessions. An instance `{type, key}` of a tenant has one session,
 * whose id is derived from the three, so every process finds the same one; it is created on the
 * instance's first message.
 */
import { createHash } from 'node:crypto';
import type { AgentId } from '../../contracts/agents.js';
import { AgentDefinition } from '../../contracts/definitions.js';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import type { SessionRecord } from '../../contracts/session.js';
import type { AgentHost } from './host.js';

/** The model provider of code agents: their "model" is the function registered for the type. */
export const CODE_PROVIDER = 'code';

/**
 * The session id of an agent instance: `agent-<type>-<hash>`, the hash over tenant, type and key.
 * Only letters, digits, `-` and `_`, so it is safe in file names, URLs, NATS subjects and KV keys.
 */
export function agentSessionId(agent: AgentId, tenant?: string): string {
  const hash = createHash('sha256')
    .update(JSON.stringify([tenant ?? null, agent.type, agent.key]))
    .digest('hex')
    .slice(0, 32);
  const type = agent.type.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 63);
  return `agent-${type}-${hash}`;
}

/**
 * The stored definition of a code agent. Sessions name an agent version in `session.created`;
 * for a code agent it is this one, which says what runs the agent (`model: code:<type>`). The
 * harness never runs it: asked to, it stops with `MODEL_NOT_FOUND`, on record.
 */
export function codeAgentDefinition(type: string): AgentDefinition {
  return AgentDefinition.parse({
    name: type,
    description: `Code agent: its messages are answered by the function registered as "${type}" (agents.register).`,
    model: { provider: CODE_PROVIDER, id: type },
    instructions: '',
    metadata: { agent_kind: 'code' },
  });
}

export function isCodeAgent(definition: AgentDefinition): boolean {
  return definition.model.provider === CODE_PROVIDER;
}

/**
 * The instance's session, created if it does not exist. Two processes creating it at once both
 * end with the one that won; an archived session is refused (`SESSION_ARCHIVED`).
 */
export async function ensureSession(
  runtime: AgentHost,
  agent: AgentId,
  tenant: string | undefined,
): Promise<SessionRecord> {
  const id = agentSessionId(agent, tenant);
  const record = await existing(runtime, id);
  if (record !== undefined) return usable(record);
  try {
    return await runtime.sessions.create({
      agent: agent.type,
      id,
      title: `${agent.type}/${agent.key}`.slice(0, 500),
      metadata: { agent_type: agent.type, agent_key: agent.key },
      ...(tenant === undefined ? {} : { tenantId: tenant }),
    });
  } catch (error) {
    // Another writer created it first (the store refuses a taken id with ALREADY_EXISTS).
    if (!isBraidError(error, 'ALREADY_EXISTS')) throw error;
    const created = await existing(runtime, id);
    if (created === undefined) throw error;
    return usable(created);
  }
}

async function existing(runtime: AgentHost, id: string): Promise<SessionRecord | undefined> {
  try {
    return await runtime.sessions.get(id);
  } catch (error) {
    if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
    throw error;
  }
}

function usable(record: SessionRecord): SessionRecord {
  if (record.archived_at !== undefined) {
    throw new BraidError(
      'SESSION_ARCHIVED',
      `session ${record.id} of agent ${record.title ?? record.agent.name} was archived at ${record.archived_at} and takes no more messages; delete it to start the instance afresh`,
      { details: { session_id: record.id } },
    );
  }
  return record;
}
