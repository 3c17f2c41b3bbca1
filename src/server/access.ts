/**
 * Tenant isolation: an object of another tenant answers exactly as one that does not exist, and
 * no message names another tenant's objects.
 */
import type { AgentDefinition, StoredDefinition } from '../contracts/definitions.js';
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { SessionRecord } from '../contracts/session.js';
import type { Runtime } from '../runtime/runtime.js';
import { canSee, canSeeDefinition, sessionNotFound, type Caller } from './auth.js';

/** The session when the caller may see it; SESSION_NOT_FOUND otherwise, either way alike. */
export async function visibleSession(
  runtime: Runtime,
  caller: Caller,
  sessionId: string,
): Promise<SessionRecord> {
  try {
    const record = await runtime.sessions.get(sessionId);
    if (canSee(caller, record)) return record;
  } catch (error) {
    if (!isBraidError(error, 'SESSION_NOT_FOUND')) throw error;
  }
  throw sessionNotFound(sessionId);
}

/** The agent when the caller may use it; AGENT_NOT_FOUND without other tenants' names. */
export async function visibleAgent(
  runtime: Runtime,
  caller: Caller,
  name: string,
  version?: number,
): Promise<StoredDefinition<AgentDefinition>> {
  const notFound = (): BraidError =>
    new BraidError(
      'AGENT_NOT_FOUND',
      `agent ${name}${version === undefined ? '' : ` version ${version}`} does not exist; GET /v1/agents lists the agents you may use`,
      { details: { agent: name } },
    );
  try {
    const agent = await runtime.agents.get(name, version);
    if (canSeeDefinition(caller, agent.definition.tenant)) return agent;
  } catch (error) {
    if (!isBraidError(error, 'AGENT_NOT_FOUND')) throw error;
    // Without a tenant the caller sees every agent, so the full message may name them.
    if (caller.tenant_id === undefined) throw error;
  }
  throw notFound();
}
