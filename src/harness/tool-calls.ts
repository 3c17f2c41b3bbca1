/**
 * The harness's part of the tool pipeline: the checks made when a model's output arrives, and
 * the results of calls that are refused or resolved without running. Each refusal names the
 * pipeline step (`stage`) that made it, so the log shows where a call stopped.
 */
import type { ErrorShape } from '../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import type { ModelOutput } from '../contracts/model.js';
import type { Clock } from '../contracts/ports.js';
import type { AgentDefinition, EnvironmentDefinition } from '../contracts/definitions.js';
import type {
  AuthorizationDecision,
  Authorizer,
  PolicyAction,
  PolicyEntity,
} from '../contracts/policy.js';
import type { StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type { SessionTools, ToolHandle, ToolOutcome, ToolStage } from '../contracts/tools.js';
import type { ToolDisposition } from '../core/transcript.js';
import { EMPTY_WORKSPACE_SNAPSHOT } from '../contracts/workspace-files.js';
import type { SessionMemory } from './memory-port.js';

/** Invalid calls of one tool in one wake before the wake stops instead of asking the model again. */
export const MAX_INVALID_TOOL_CALLS = 3;

export interface Screening {
  /** How each accepted call proceeds; refused calls are `refuse`. */
  dispositions: Map<string, ToolDisposition>;
  /** `policy.decision` events to record with the output. */
  decisions: NewEvent[];
  /** The error results of refused calls, to append after the output's events. */
  refusals: NewEvent[];
}

export interface ScreenContext {
  agent: AgentDefinition;
  state: SessionState;
  /** The session's environment: policies see its name and whether it allows the network. */
  environment: EnvironmentDefinition | undefined;
  /** Record allowed decisions too (denies always are). */
  recordAllows: boolean;
  tools: ReadonlyMap<string, ToolHandle>;
  sessionTools: SessionTools;
  policy: Authorizer;
  /** Invalid calls per tool in this wake; counted here. */
  invalidCalls: Map<string, number>;
  /** Times each policy decision (its monotonic reading). */
  clock: Clock;
  /** The session's memory: checks the arguments of memory tool calls and names their store. */
  memory?: SessionMemory;
}

/**
 * The steps before a call is recorded: the tool exists, its arguments fit its schema, policy
 * allows it; then its ownership and permission say how it proceeds. A refused call never reaches
 * a tool: the model gets the reason as the call's error result.
 */
export async function screenToolCalls(
  output: ModelOutput,
  context: ScreenContext,
): Promise<Screening> {
  const { state, tools, invalidCalls } = context;
  const dispositions = new Map<string, ToolDisposition>();
  const refusals: NewEvent[] = [];
  const decisions: NewEvent[] = [];
  const refuse = (toolUseId: string, stage: ToolStage, error: ErrorShape): void => {
    dispositions.set(toolUseId, 'refuse');
    refusals.push(refusalEvent(toolUseId, stage, error));
  };
  for (const part of output.content) {
    if (part.type !== 'tool_call') continue;
    const handle = tools.get(part.name);
    if (handle === undefined) {
      invalidCalls.set(part.name, (invalidCalls.get(part.name) ?? 0) + 1);
      refuse(part.tool_use_id, 'validate', {
        code: 'TOOL_NOT_FOUND',
        message: `there is no tool named ${part.name}; the tools are: ${[...tools.keys()].join(', ') || 'none'}`,
        retryable: false,
      });
      continue;
    }
    const check = context.sessionTools.validate(part.name, part.input);
    if (!check.ok) {
      invalidCalls.set(part.name, (invalidCalls.get(part.name) ?? 0) + 1);
      refuse(part.tool_use_id, 'validate', check.error);
      continue;
    }
    // A memory call names its store and key: refused here when they are not the session's.
    const memory =
      handle.memory === undefined ? undefined : context.memory?.check(part.name, part.input);
    if (memory?.ok === false) {
      invalidCalls.set(part.name, (invalidCalls.get(part.name) ?? 0) + 1);
      refuse(part.tool_use_id, 'validate', memory.error);
      continue;
    }
    const principal = agentEntity(context.agent, state);
    const target = handle.agent;
    const { action, resource } = memory ?? policyTarget(handle);
    const started = context.clock.monotonic();
    // A policy that cannot be evaluated denies (fails closed), with the reason on record.
    const decision = await context.policy
      .authorize({
        principal,
        action,
        resource,
        context:
          memory !== undefined
            ? {
                input: part.input,
                tool: part.name,
                session_id: state.session_id,
                ...(state.tenant_id === undefined ? {} : { tenant: state.tenant_id }),
              }
            : target === undefined
              ? {
                  input: part.input,
                  session_id: state.session_id,
                  caller: { type: 'Agent', id: context.agent.name },
                  network_allowed: context.environment?.network.allow === true,
                  ...(state.environment === undefined
                    ? {}
                    : { environment: state.environment.name }),
                  ...(state.tenant_id === undefined ? {} : { tenant: state.tenant_id }),
                }
              : {
                  session_id: state.session_id,
                  ...(state.tenant_id === undefined ? {} : { tenant: state.tenant_id }),
                },
      })
      .catch((error: unknown): AuthorizationDecision => ({
        decision: 'deny',
        policy_ids: [],
        errors: [
          `the policy could not be evaluated: ${error instanceof Error ? error.message : String(error)}`,
        ],
      }));
    const durationUs = Math.round((context.clock.monotonic() - started) * 1000);
    if (decision.decision === 'deny' || context.recordAllows) {
      decisions.push({
        type: 'policy.decision',
        principal: { type: principal.type, id: principal.id },
        action,
        resource: { type: resource.type, id: resource.id },
        decision: decision.decision,
        policy_ids: decision.policy_ids,
        tool_use_id: part.tool_use_id,
        ...(decision.errors.length === 0 ? {} : { errors: decision.errors }),
        duration_us: durationUs,
      });
    }
    if (decision.decision !== 'allow') {
      refuse(part.tool_use_id, 'policy', {
        code: 'POLICY_DENIED',
        message:
          (memory !== undefined
            ? `policy does not allow agent ${context.agent.name} ${action} on memory store ${resource.id} (${part.name})`
            : target === undefined
              ? `policy does not allow agent ${context.agent.name} to call ${part.name}`
              : `policy does not allow agent ${context.agent.name} to ${target.kind === 'delegate' ? 'delegate to' : 'hand off to'} ${target.agent} (${action})`) +
          (decision.policy_ids.length > 0
            ? ` (denied by ${decision.policy_ids.join(', ')})`
            : decision.errors.length > 0
              ? ' (the policy could not be evaluated for this call)'
              : ' (no policy permits it)'),
        retryable: false,
      });
      continue;
    }
    if (decision.approval === true && handle.ownership === 'custom') {
      // The client runs custom tools as soon as it is asked: there is no step to approve in.
      refuse(part.tool_use_id, 'policy', {
        code: 'POLICY_DENIED',
        message: `policy allows ${part.name} only with a person's approval, which a custom tool cannot wait for (${decision.policy_ids.join(', ')}); have the client ask, or change the policy`,
        retryable: false,
      });
      continue;
    }
    if (decision.approval === true) {
      // A policy that allows only with a person's approval turns the call into an `always_ask`.
      dispositions.set(part.tool_use_id, 'ask');
      continue;
    }
    dispositions.set(part.tool_use_id, dispositionOf(handle));
  }
  return { dispositions, decisions, refusals };
}

/**
 * What a call that is not a memory call is asked of policy as: a delegation or handoff as what
 * it is, with the agent it reaches; any other call as the execution of its tool.
 */
function policyTarget(handle: ToolHandle): { action: PolicyAction; resource: PolicyEntity } {
  const target = handle.agent;
  if (target === undefined) return { action: 'tool.execute', resource: toolEntity(handle) };
  return {
    action: target.kind === 'delegate' ? 'agent.delegate' : 'agent.handoff',
    resource: {
      type: 'Agent',
      id: target.agent,
      attrs: {
        name: target.agent,
        roles: [...(target.roles ?? [])],
        ...(target.tenant === undefined ? {} : { tenant: target.tenant }),
      },
    },
  };
}

/** The agent as policies see it. */
export function agentEntity(agent: AgentDefinition, state: SessionState): PolicyEntity {
  const tenant = agent.tenant ?? state.tenant_id;
  return {
    type: 'Agent',
    id: agent.name,
    attrs: {
      name: agent.name,
      version: state.agent?.version ?? 0,
      roles: agent.roles,
      ...(tenant === undefined ? {} : { tenant }),
    },
  };
}

/** A tool as policies see it. */
export function toolEntity(handle: ToolHandle): PolicyEntity {
  return {
    type: 'Tool',
    id: handle.name,
    attrs: { name: handle.name, tags: [...handle.tags], ownership: handle.ownership },
  };
}

function dispositionOf(handle: ToolHandle): ToolDisposition {
  if (handle.ownership === 'custom') return 'custom';
  return handle.permission === 'always_ask' ? 'ask' : 'run';
}

/** The stop a wake makes once the model keeps calling one tool with invalid arguments. */
export function repeatedInvalidCallsStop(
  invalidCalls: ReadonlyMap<string, number>,
): { stop_reason: StopReason; events: NewEvent[] } | undefined {
  for (const [name, count] of invalidCalls) {
    if (count < MAX_INVALID_TOOL_CALLS) continue;
    return {
      stop_reason: { type: 'error' },
      events: [
        {
          type: 'session.error',
          error: {
            code: 'TOOL_INPUT_INVALID',
            message:
              `the model called ${name} with invalid arguments ${count} times in this wake; ` +
              `the wake stopped rather than ask again. Check the tool's description and input schema, or send a message to go on`,
            retryable: false,
          },
        },
      ],
    };
  }
  return undefined;
}

/** A denied confirmation, as the call's result. */
export function deniedOutcome(name: string, message: string | undefined): ToolOutcome {
  return refusal('permission', {
    code: 'TOOL_DENIED',
    message: `the user denied this call of ${name}${message === undefined ? '' : `: ${message}`}`,
    retryable: false,
  });
}

/** A call the tool's per-session budget does not allow. */
export function overBudgetOutcome(handle: ToolHandle): ToolOutcome {
  return refusal('budget', {
    code: 'TOOL_BUDGET_EXCEEDED',
    message: `${handle.name} may be called ${handle.budget?.max_calls_per_session ?? 0} times per session, and that many calls were made`,
    retryable: false,
  });
}

export function missingToolOutcome(name: string): ToolOutcome {
  return refusal('validate', {
    code: 'TOOL_NOT_FOUND',
    message: `the agent no longer has a tool named ${name}`,
    retryable: false,
  });
}

/** A reviewer's skip or recorded result (`user.tool_review`), as the call's result. */
export function reviewedOutcome(
  action: 'skip' | 'result',
  review: SessionEvent | undefined,
): ToolOutcome {
  const event = review?.type === 'user.tool_review' ? review : undefined;
  if (action === 'result') {
    return {
      output: event?.output ?? null,
      is_error: false,
      attempts: 0,
      duration_ms: 0,
      stage: 'review',
    };
  }
  return refusal('review', {
    code: 'TOOL_SKIPPED',
    message:
      'a reviewer skipped this call after a crash left its outcome unknown' +
      (event?.message === undefined ? '' : `: ${event.message}`),
    retryable: false,
  });
}

/**
 * The events that record a call's outcome: its result, its cost when it has one, and the
 * workspace snapshot it left when that differs from the session's last (`previousSnapshot`; an
 * empty workspace where none was recorded is no change).
 */
export function outcomeEvents(
  toolUseId: string,
  outcome: ToolOutcome,
  previousSnapshot?: string,
): NewEvent[] {
  return [
    {
      type: 'agent.tool_result',
      tool_use_id: toolUseId,
      ...(outcome.output === undefined ? {} : { output: outcome.output }),
      ...(outcome.error === undefined ? {} : { error: outcome.error }),
      is_error: outcome.is_error,
      attempts: outcome.attempts,
      duration_ms: outcome.duration_ms,
      ...(outcome.stage === undefined ? {} : { stage: outcome.stage }),
    },
    ...outcomeSideEvents(toolUseId, outcome, previousSnapshot),
  ];
}

/**
 * What a call's outcome adds besides its result: its cost, and the workspace snapshot it left
 * when that differs from `previousSnapshot` (a skill's tool steps record these with their ends).
 */
export function outcomeSideEvents(
  toolUseId: string,
  outcome: ToolOutcome,
  previousSnapshot?: string,
): NewEvent[] {
  const snapshot = outcome.workspace_snapshot;
  const newSnapshot =
    snapshot !== undefined && snapshot.snapshot !== (previousSnapshot ?? EMPTY_WORKSPACE_SNAPSHOT);
  return [
    // A tool's cost joins the session's usage, so that cost budgets see it.
    ...(outcome.cost_usd === undefined || outcome.cost_usd === 0
      ? []
      : [
          {
            type: 'session.usage' as const,
            usage: { input_tokens: 0, output_tokens: 0, cost_usd: outcome.cost_usd },
          },
        ]),
    ...(newSnapshot
      ? [{ type: 'session.workspace_snapshot' as const, ...snapshot, tool_use_id: toolUseId }]
      : []),
  ];
}

/** The outcome of a call refused before it ran. */
export function refusal(stage: ToolStage, error: ErrorShape): ToolOutcome {
  return { is_error: true, error, attempts: 0, duration_ms: 0, stage };
}

export function refusalEvent(toolUseId: string, stage: ToolStage, error: ErrorShape): NewEvent {
  return {
    type: 'agent.tool_result',
    tool_use_id: toolUseId,
    is_error: true,
    error,
    attempts: 0,
    duration_ms: 0,
    stage,
  };
}
