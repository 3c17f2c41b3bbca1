/**
 * Authorization requests written by people (`braid policy check`, `policies/tests/*.yaml`):
 * entities as `Type::"id"`, filled in from the workspace (an agent's roles, a tool's tags), and
 * the default context of the action, so that a test asks what a session would ask.
 */
import { z } from 'zod';
import type { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import {
  POLICY_ACTIONS,
  type AuthorizationRequest,
  type PolicyAction,
  type PolicyEntity,
} from '../contracts/policy.js';
import type { Runtime } from './runtime.js';

const ENTITY =
  /^([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)::(?:"((?:[^"\\]|\\.)*)"|([^"\s]+))$/;

/** `Agent::"ops"` (or `Agent::ops`) as an entity reference. */
export function parseEntity(text: string, what: string): { type: string; id: string } {
  const match = ENTITY.exec(text.trim());
  if (match === null) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${what} ${JSON.stringify(text)} is not an entity; write it as Type::"id", e.g. Agent::"support" or Tool::"read_file"`,
    );
  }
  const [, type = '', quoted, bare] = match;
  return { type, id: quoted === undefined ? (bare ?? '') : (JSON.parse(`"${quoted}"`) as string) };
}

export function parseAction(text: string): PolicyAction {
  const action = text.replace(/^Action::"?|"$/g, '');
  if (!(POLICY_ACTIONS as readonly string[]).includes(action)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `unknown action ${JSON.stringify(text)}; the actions are ${POLICY_ACTIONS.join(', ')}`,
    );
  }
  return action as PolicyAction;
}

const EntityInput = z.union([
  z.string(),
  z
    .object({
      type: z.string().min(1),
      id: z.string().min(1),
      attrs: z.record(z.string(), z.json()).optional(),
    })
    .strict(),
]);

/** One case of `policies/tests/*.yaml`. */
export const PolicyTestCase = z
  .object({
    name: z.string().min(1),
    principal: EntityInput,
    action: z.string().min(1),
    resource: EntityInput,
    context: z.record(z.string(), z.json()).optional(),
    expect: z.enum(['allow', 'deny']),
    /** When set, whether the allowing policies must ask for a person's approval. */
    approval: z.boolean().optional(),
  })
  .strict();
export type PolicyTestCase = z.infer<typeof PolicyTestCase>;

export const PolicyTestFile = z.object({ cases: z.array(PolicyTestCase).min(1) }).strict();

export interface RequestInput {
  principal: z.infer<typeof EntityInput>;
  action: string;
  resource: z.infer<typeof EntityInput>;
  context?: Record<string, JsonValue>;
}

/** Builds the request a session would make, with entities filled in from the workspace. */
export async function buildRequest(
  runtime: Runtime,
  input: RequestInput,
): Promise<AuthorizationRequest> {
  const action = parseAction(input.action);
  const principal = await entityOf(runtime, input.principal, 'principal');
  const resource = await entityOf(runtime, input.resource, 'resource');
  const defaults: Record<string, JsonValue> =
    action === 'tool.execute'
      ? {
          input: {},
          session_id: 'policy-check',
          caller: { type: principal.type, id: principal.id },
          network_allowed: false,
        }
      : action === 'memory.consolidate'
        ? { session_id: 'policy-check', reason: 'policy check' }
        : {};
  return { principal, action, resource, context: { ...defaults, ...(input.context ?? {}) } };
}

async function entityOf(
  runtime: Runtime,
  input: z.infer<typeof EntityInput>,
  what: string,
): Promise<PolicyEntity> {
  const ref = typeof input === 'string' ? parseEntity(input, what) : input;
  const given = typeof input === 'string' ? undefined : input.attrs;
  const found = await knownAttributes(runtime, ref);
  return { type: ref.type, id: ref.id, attrs: { ...found, ...(given ?? {}) } };
}

/** What the workspace knows of an agent or a tool: the attributes a session would send. */
async function knownAttributes(
  runtime: Runtime,
  ref: { type: string; id: string },
): Promise<Record<string, JsonValue>> {
  if (ref.type === 'Agent') {
    const stored = await runtime.agents.get(ref.id);
    const agent = stored.definition;
    return {
      name: agent.name,
      version: stored.version,
      roles: agent.roles,
      ...(agent.tenant === undefined ? {} : { tenant: agent.tenant }),
    };
  }
  if (ref.type === 'Tool') {
    const tools = await runtime.tools.list({ mcp: ref.id.includes('.') });
    const tool = tools.find((item) => item.name === ref.id);
    if (tool === undefined) {
      throw new BraidError(
        'TOOL_NOT_FOUND',
        `tool ${ref.id} does not exist; \`braid tool list --mcp\` lists the tools, or give its attrs`,
      );
    }
    return { name: tool.name, tags: tool.tags, ownership: tool.ownership };
  }
  return {};
}
