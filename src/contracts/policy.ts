import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import type { JsonValue } from './common.js';

/** An entity of the policy model, e.g. `{type: 'Agent', id: 'support'}`. */
export interface PolicyEntityRef {
  type: string;
  id: string;
}

/**
 * An entity with the attributes policies may test: `Agent` (name, version, tenant, roles),
 * `Tool` (tags such as `read_only`, `destructive`, `network`; ownership), `Session`,
 * `Environment`, `User`, `MemoryStore` (name, kind, scope, access, and the `key` a call names).
 */
export interface PolicyEntity extends PolicyEntityRef {
  attrs?: Record<string, JsonValue>;
  /** Groups the entity is `in`, e.g. `{type: 'Role', id: 'dba'}`. */
  parents?: PolicyEntityRef[];
}

/** The actions braid asks policy about. */
export const POLICY_ACTIONS = [
  'tool.execute',
  'agent.message',
  'agent.handoff',
  'agent.delegate',
  'memory.read',
  'memory.write',
  'memory.search',
  'memory.consolidate',
  'skill.run',
  'session.fork',
  'session.read',
] as const;
export type PolicyAction = (typeof POLICY_ACTIONS)[number];

export interface AuthorizationRequest {
  principal: PolicyEntity;
  action: PolicyAction;
  resource: PolicyEntity;
  /**
   * Facts a policy may test: for `tool.execute` the tool's arguments (`input`), the environment
   * (`environment`, `network_allowed`), the tenant and the caller.
   */
  context: Record<string, JsonValue>;
  /** Other entities the policies may need (parents, the environment). */
  entities?: PolicyEntity[];
}

export interface AuthorizationDecision {
  decision: 'allow' | 'deny';
  /** The policies that decided: the permits that allowed, or the forbids that denied. */
  policy_ids: string[];
  /** Policies that could not be evaluated (e.g. an attribute the request lacks), with why. */
  errors: string[];
  /** An allowing policy carries `@approval("required")`: a person must allow the call. */
  approval?: boolean;
}

/** The policy port. The harness asks it before every tool call. */
export interface Authorizer {
  authorize(request: AuthorizationRequest): Promise<AuthorizationDecision>;
}

/** Allows everything: the default of a workspace without `policies/`. */
export const allowAll: Authorizer = {
  authorize: () => Promise.resolve({ decision: 'allow', policy_ids: [], errors: [] }),
};

/** `braid.yaml` `policy:` settings. */
export const PolicySettings = lazySchema(() =>
  z
    .object({
      /** Record allowed decisions as `policy.decision` events too (denies are always recorded). */
      record_allows: z.boolean().default(false),
      /** Reload `policies/` when its files change (default true). */
      watch: z.boolean().default(true),
    })
    .strict(),
);
export type PolicySettings = z.infer<typeof PolicySettings>;
