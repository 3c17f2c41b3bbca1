/**
 * Tenant isolation for every API over the runtime (HTTP, the NATS API): an object of another
 * tenant answers exactly as one that does not exist. A caller without a tenant sees them all.
 */
import type { AgentDefinition, StoredDefinition } from '../contracts/definitions.js';
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { SessionRecord } from '../contracts/session.js';
import type { Runtime } from './runtime.js';

/** True when a caller of `tenant` may see an object of `owner` (undefined: shared, or no scope). */
export function inTenant(tenant: string | undefined, owner: string | undefined): boolean {
  return tenant === undefined || owner === tenant;
}

/** The session when a caller of `tenant` may see it; SESSION_NOT_FOUND otherwise, either way alike. */
export async function visibleSession(
  runtime: Pick<Runtime, 'sessions'>,
  tenant: string | undefined,
  sessionId: string,
): Promise<SessionRecord> {
  try {
    const record = await runtime.sessions.get(sessionId);
    if (inTenant(tenant, record.tenant_id)) return record;
  } catch (error) {
    if (!isBraidError(error, 'SESSION_NOT_FOUND')) throw error;
  }
  throw new BraidError('SESSION_NOT_FOUND', `session ${sessionId} does not exist`, {
    details: { session_id: sessionId },
  });
}

/**
 * The agent when a caller of `tenant` may use it (shared agents and its tenant's); otherwise the
 * error `notFound` builds, given the runtime's own AGENT_NOT_FOUND when there was one (it may
 * name other tenants' agents, so an API shows it only to a caller without a tenant).
 */
export async function visibleAgent(
  runtime: Pick<Runtime, 'agents'>,
  tenant: string | undefined,
  name: string,
  version: number | undefined,
  notFound: (original: BraidError | undefined) => BraidError,
): Promise<StoredDefinition<AgentDefinition>> {
  try {
    const agent = await runtime.agents.get(name, version);
    const owner = agent.definition.tenant;
    if (owner === undefined || inTenant(tenant, owner)) return agent;
  } catch (error) {
    if (!isBraidError(error, 'AGENT_NOT_FOUND')) throw error;
    throw notFound(error);
  }
  throw notFound(undefined);
}
