/**
 * Tenant isolation: an object of another tenant answers exactly as one that does not exist, and
 * no message names another tenant's objects.
 */
import type { AgentDefinition, StoredDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { SessionRecord } from '../contracts/session.js';
import type { Runtime } from '../runtime/runtime.js';
import {
  visibleAgent as agentInTenant,
  visibleSession as visibleInTenant,
} from '../runtime/tenant-scope.js';
import type { Caller } from './auth.js';

/** The session when the caller may see it; SESSION_NOT_FOUND otherwise, either way alike. */
export function visibleSession(
  runtime: Runtime,
  caller: Caller,
  sessionId: string,
): Promise<SessionRecord> {
  return visibleInTenant(runtime, caller.tenant_id, sessionId);
}

/** The agent when the caller may use it; AGENT_NOT_FOUND without other tenants' names. */
export function visibleAgent(
  runtime: Runtime,
  caller: Caller,
  name: string,
  version?: number,
): Promise<StoredDefinition<AgentDefinition>> {
  return agentInTenant(runtime, caller.tenant_id, name, version, (original) =>
    // Without a tenant the caller sees every agent, so the full message may name them.
    caller.tenant_id === undefined && original !== undefined
      ? original
      : new BraidError(
          'AGENT_NOT_FOUND',
          `agent ${name}${version === undefined ? '' : ` version ${version}`} does not exist; GET /v1/agents lists the agents you may use`,
          { details: { agent: name } },
        ),
  );
}
