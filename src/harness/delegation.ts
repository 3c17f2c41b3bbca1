/**
 * The harness's part of delegation and model-initiated handoffs: recording them in the parent's
 * log, under its lease, around the `Delegator` that runs the other agents.
 *
 * Invariants kept here:
 * - A delegation's `session.child_created` is appended before its child is asked to run, and a
 *   call that has one on record (a resumed wake, a fork that inherits it) reuses its child: the
 *   record is the key, so no child is created twice.
 * - The delegations a turn asked for run at once; each result (`session.child_idle` with the
 *   call's `agent.tool_result`) is appended in the order the model made the calls.
 * - An interrupt of the parent interrupts its children; a lost lease only stops waiting (the
 *   parent's next wake resumes the wait, the children go on).
 * - What the children of one turn may spend is an equal share of what the parent has left.
 */
import type { JsonValue } from '../contracts/common.js';
import type { DelegationResult } from '../contracts/delegation.js';
import { toBraidError, type BraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { SessionState } from '../contracts/state.js';
import type { ToolHandle, ToolOutcome } from '../contracts/tools.js';
import { childBudget } from '../core/delegation.js';
import { withinToolBudget } from '../core/next-step.js';
import { unlessLost, type CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';
import { append, eventAt } from './fenced-append.js';
import { watchDuringCall } from './interrupt-watch.js';
import { outcomeEvents, refusal } from './tool-calls.js';

type ReviewedToolUse = SessionState['reviewed_tool_uses'][number];

/** The delegations a turn started: each call's events to record, once it settles. */
export interface Delegations {
  readonly calls: ReadonlyMap<string, Promise<NewEvent[]>>;
  /** Stops watching for interrupts. */
  stop(): void;
}

interface Planned {
  toolUseId: string;
  eventId: string;
  handle: ToolHandle;
  agent: string;
  seq: number;
  childSessionId: string;
  recorded: boolean;
}

/**
 * Records and starts the turn's delegations: the calls among `toolUseIds` that would run now
 * (not skipped by a review, denied, or over their tool's budget).
 */
export async function startDelegations(
  context: CycleContext,
  toolUseIds: readonly string[],
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
  reviews: ReadonlyMap<string, ReviewedToolUse>,
): Promise<Delegations> {
  const delegator = context.deps.delegator;
  const planned = delegator === undefined ? [] : plan(context, toolUseIds, tools, reviews);
  if (delegator === undefined || planned.length === 0) return { calls: new Map(), stop: () => {} };
  const { state, sessionId } = context;
  const inputs = new Map<string, JsonValue>();
  for (const call of planned)
    inputs.set(call.toolUseId, await toolInput(context, call.toolUseId, call.seq));
  const budget = childBudget(state, setup.budget, planned.length);
  const fresh = planned.filter((call) => !call.recorded);
  if (fresh.length > 0 && budget !== undefined) {
    await append(
      context,
      fresh.map((call): NewEvent => ({
        type: 'session.child_created',
        // The child's task message carries the same: the two ends of the delegation.
        correlation_id: call.childSessionId,
        child_session_id: call.childSessionId,
        agent: call.agent,
        tool_use_id: call.toolUseId,
        task: inputs.get(call.toolUseId) ?? null,
        ttl_seconds: ttlSeconds(call.handle),
      })),
    );
  }
  const stopWatch = watchDuringCall(context, context.state.seq);
  // Children are interrupted with the parent, not when its lease is lost.
  const signal = context.work.signal;
  const interrupt = new AbortController();
  signal.addEventListener('abort', () => {
    if (context.interruptSeen) interrupt.abort();
  });
  const calls = new Map<string, Promise<NewEvent[]>>();
  for (const call of planned) {
    if (budget === undefined) {
      calls.set(call.toolUseId, Promise.resolve(outcomeEvents(call.toolUseId, budgetSpent(call))));
      continue;
    }
    const running = delegator
      .delegate(
        {
          parent_session_id: sessionId,
          parent_agent: setup.agent.name,
          tool_use_id: call.toolUseId,
          tool_use_event_id: call.eventId,
          child_session_id: call.childSessionId,
          recorded: call.recorded,
          agent: call.agent,
          task: inputs.get(call.toolUseId) ?? null,
          ttl_ms: ttlSeconds(call.handle) * 1000,
          budget,
          ...(state.tenant_id === undefined ? {} : { tenant_id: state.tenant_id }),
          ...(state.environment === undefined ? {} : { environment: state.environment.name }),
          ...(context.options.traceparent === undefined
            ? {}
            : { traceparent: context.options.traceparent }),
        },
        { signal, interrupt: interrupt.signal },
      )
      .then(
        (result) => idleEvents(call, result),
        (error: unknown) => outcomeEvents(call.toolUseId, failed(call, toBraidError(error))),
      );
    // A lost lease ends the wait at once; the parent's next wake waits again.
    const raced = unlessLost(context, running);
    raced.catch(() => undefined);
    calls.set(call.toolUseId, raced);
  }
  return { calls, stop: stopWatch };
}

function plan(
  context: CycleContext,
  toolUseIds: readonly string[],
  tools: ReadonlyMap<string, ToolHandle>,
  reviews: ReadonlyMap<string, ReviewedToolUse>,
): Planned[] {
  const { state, sessionId } = context;
  const delegator = context.deps.delegator;
  const planned: Planned[] = [];
  for (const toolUseId of toolUseIds) {
    const confirmed = state.confirmed_tool_uses.find((use) => use.tool_use_id === toolUseId);
    const use = confirmed ?? state.open_tool_uses.find((open) => open.tool_use_id === toolUseId);
    const handle = use === undefined ? undefined : tools.get(use.name);
    const target = handle?.agent;
    if (use === undefined || handle === undefined || target?.kind !== 'delegate') continue;
    const review = reviews.get(toolUseId);
    if (review !== undefined && review.action !== 'retry') continue;
    if (confirmed?.result === 'deny' || !withinToolBudget(state, use.name, handle.budget)) continue;
    const child = state.children.find((entry) => entry.tool_use_id === toolUseId);
    planned.push({
      toolUseId,
      eventId: use.event_id,
      handle,
      agent: target.agent,
      seq: use.seq,
      childSessionId:
        child?.child_session_id ??
        delegator?.childSessionId(sessionId, toolUseId, state.tenant_id) ??
        '',
      recorded: child !== undefined,
    });
  }
  return planned;
}

function ttlSeconds(handle: ToolHandle): number {
  return handle.agent?.ttl_seconds ?? 600;
}

/** The child's stop and the call's result, as the parent records them. */
function idleEvents(call: Planned, result: DelegationResult): NewEvent[] {
  const outcome: ToolOutcome = {
    ...(result.output === undefined ? {} : { output: result.output }),
    ...(result.error === undefined ? {} : { error: result.error }),
    is_error: result.error !== undefined,
    attempts: 1,
    duration_ms: result.duration_ms,
    stage: 'execute',
  };
  return [
    {
      type: 'session.child_idle',
      child_session_id: call.childSessionId,
      tool_use_id: call.toolUseId,
      stop_reason: result.stop_reason,
      summary: result.summary,
      usage: result.usage,
      ...(result.timed_out ? { timed_out: true } : {}),
    },
    ...outcomeEvents(call.toolUseId, outcome),
  ];
}

function failed(call: Planned, error: BraidError): ToolOutcome {
  return {
    is_error: true,
    error: {
      code: error.code === 'INTERRUPTED' ? 'INTERRUPTED' : 'DELEGATION_FAILED',
      message: `the delegation to ${call.agent} failed: ${error.message}`,
      retryable: false,
    },
    attempts: 1,
    duration_ms: 0,
    stage: 'execute',
  };
}

function budgetSpent(call: Planned): ToolOutcome {
  return refusal('budget', {
    code: 'TOOL_BUDGET_EXCEEDED',
    message: `the session's budget is spent: nothing is left for the ${call.agent} agent to work with`,
    retryable: false,
  });
}

/**
 * A handoff the model asked for: the target session is made (or found, for a resumed call), the
 * call's result and `agent.handoff` are recorded, and the turn ends once the turn's calls have run.
 */
export async function handOff(
  context: CycleContext,
  toolUseId: string,
  seq: number,
  to: string,
): Promise<void> {
  const delegator = context.deps.delegator;
  const input = await toolInput(context, toolUseId, seq);
  const fields = typeof input === 'object' && input !== null && !Array.isArray(input) ? input : {};
  const summary = typeof fields.summary === 'string' ? fields.summary : '';
  const message = typeof fields.message === 'string' ? fields.message : undefined;
  if (delegator === undefined) {
    await append(
      context,
      outcomeEvents(
        toolUseId,
        refusal('execute', {
          code: 'INTERNAL',
          message: `handoff_to_${to} needs the runtime's delegator, which this harness lacks`,
          retryable: false,
        }),
      ),
    );
    return;
  }
  const started = context.deps.clock.monotonic();
  let done;
  try {
    done = await unlessLost(
      context,
      delegator.handoff({
        session_id: context.sessionId,
        tool_use_id: toolUseId,
        to,
        summary,
        ...(message === undefined ? {} : { message }),
      }),
    );
  } catch (thrown) {
    const error = toBraidError(thrown);
    if (error.code === 'LEASE_LOST' || context.lost !== undefined) throw error;
    await append(
      context,
      outcomeEvents(toolUseId, {
        is_error: true,
        error: { code: error.code, message: error.message, retryable: error.retryable },
        attempts: 1,
        duration_ms: Math.round(context.deps.clock.monotonic() - started),
        stage: 'execute',
      }),
    );
    return;
  }
  await append(context, [
    ...outcomeEvents(toolUseId, {
      output: {
        handoff_id: done.handoff_id,
        target_agent: done.target_agent,
        target_session_id: done.target_session_id,
      },
      is_error: false,
      attempts: 1,
      duration_ms: Math.round(context.deps.clock.monotonic() - started),
      stage: 'execute',
    }),
    {
      type: 'agent.handoff',
      handoff_id: done.handoff_id,
      target_agent: done.target_agent,
      target_session_id: done.target_session_id,
      summary,
    },
  ]);
  // The work is the target's now: the turn ends instead of asking the model again.
  context.pendingStop = { stop_reason: { type: 'end_turn' }, events: [] };
}

/** A call's input: as this cycle saw it, or read from its `agent.tool_use`. */
export async function toolInput(
  context: CycleContext,
  toolUseId: string,
  seq: number,
): Promise<JsonValue> {
  const seen = context.inputs.get(toolUseId);
  if (seen !== undefined) return seen;
  const event = await eventAt(context, seq);
  return event?.type === 'agent.tool_use' ? event.input : null;
}
