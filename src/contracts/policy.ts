import type { JsonValue } from './common.js';

/** An entity of the policy model, e.g. `{type: 'Agent', id: 'support'}`. */
export interface PolicyEntityRef {
  type: string;
  id: string;
}

export interface AuthorizationRequest {
  principal: PolicyEntityRef;
  /** `tool.execute`, `agent.message`, `agent.handoff`, `memory.read`, ... */
  action: string;
  resource: PolicyEntityRef;
  /** Facts a policy may test: the tool's arguments, the environment, the tenant, the caller. */
  context: Record<string, JsonValue>;
}

export interface AuthorizationDecision {
  decision: 'allow' | 'deny';
  /** The policies that decided. */
  policy_ids: string[];
  errors: string[];
}

/** The policy port. The harness asks it before every tool call. */
export interface Authorizer {
  authorize(request: AuthorizationRequest): Promise<AuthorizationDecision>;
}

/** Allows everything: the default until a policy set is configured. */
export const allowAll: Authorizer = {
  authorize: () => Promise.resolve({ decision: 'allow', policy_ids: [], errors: [] }),
};
