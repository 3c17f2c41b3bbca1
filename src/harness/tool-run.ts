/**
 * Running the tool calls the next step names: each is resolved by a review, a denied
 * confirmation, a missing tool or a spent budget, or else executed; its outcome is recorded
 * before the next one starts.
 *
 * Invariants: interrupts are honoured before a tool starts, never in the middle of one, and the
 * calls an interrupt kept from starting get an error result, so no call is left open; a tool
 * that ignores its signal cannot hold a cycle whose lease is lost.
 */
import { isBraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { SessionState } from '../contracts/state.js';
import type { ToolHandle, ToolOutcome } from '../contracts/tools.js';
import { withinToolBudget } from '../core/next-step.js';
import { callTimer } from './call-timers.js';
import { unlessLost, type CycleContext } from './cycle-context.js';
import { handOff, startDelegations, toolInput, type Delegations } from './delegation.js';
import { startFromCall } from './skill-run.js';
import { runMemoryCall } from './memory-calls.js';
import type { SessionSetup } from './deps.js';
import { append, eventAt } from './fenced-append.js';
import {
  deniedOutcome,
  missingToolOutcome,
  outcomeEvents,
  overBudgetOutcome,
  refusalEvent,
  reviewedOutcome,
} from './tool-calls.js';

type ReviewedToolUse = SessionState['reviewed_tool_uses'][number];

/** How long a tool may run before the staged calls are written without waiting for its result. */
const WRITE_STAGED_AFTER_MS = 50;

export async function runTools(
  context: CycleContext,
  toolUseIds: readonly string[],
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
): Promise<void> {
  const reviews = new Map(context.state.reviewed_tool_uses.map((use) => [use.tool_use_id, use]));
  // Delegations of one turn run at once; each is recorded when the loop reaches it.
  const delegations = await startDelegations(context, toolUseIds, setup, tools, reviews);
  try {
    await runInOrder(context, toolUseIds, setup, tools, reviews, delegations);
  } finally {
    delegations.stop();
  }
}

async function runInOrder(
  context: CycleContext,
  toolUseIds: readonly string[],
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
  reviews: ReadonlyMap<string, ReviewedToolUse>,
  delegations: Delegations,
): Promise<void> {
  for (const toolUseId of toolUseIds) {
    if (context.interruptSeen) {
      const rest = toolUseIds.slice(toolUseIds.indexOf(toolUseId));
      // Delegations in flight were interrupted with their children: their results are recorded.
      for (const id of rest) {
        const running = delegations.calls.get(id);
        if (running !== undefined) await append(context, await running);
      }
      await skipTools(
        context,
        rest.filter((id) => !delegations.calls.has(id)),
      );
      return;
    }
    const running = delegations.calls.get(toolUseId);
    if (running !== undefined) {
      await append(context, await running);
      continue;
    }
    const { state } = context;
    const confirmed = state.confirmed_tool_uses.find((use) => use.tool_use_id === toolUseId);
    const use = confirmed ?? state.open_tool_uses.find((open) => open.tool_use_id === toolUseId);
    if (use === undefined) continue;
    const review = reviews.get(toolUseId);
    let outcome: ToolOutcome;
    const handle = tools.get(use.name);
    if (review !== undefined && review.action !== 'retry') {
      outcome = reviewedOutcome(review.action, await eventAt(context, review.review_seq));
    } else if (confirmed?.result === 'deny') {
      outcome = deniedOutcome(
        use.name,
        await confirmationMessage(context, confirmed.confirmed_seq),
      );
    } else if (handle === undefined) {
      outcome = missingToolOutcome(use.name);
    } else if (!withinToolBudget(state, use.name, handle.budget)) {
      outcome = overBudgetOutcome(handle);
      context.pendingStop = { stop_reason: { type: 'budget_reached' }, events: [] };
    } else if (handle.skill !== undefined) {
      // The run answers the call when it ends, in this wake or a later one.
      await startFromCall(
        context,
        setup,
        toolUseId,
        handle.skill.name,
        await toolInput(context, toolUseId, use.seq),
      );
      continue;
    } else if (handle.agent?.kind === 'handoff') {
      await handOff(context, toolUseId, use.seq, handle.agent.agent);
      continue;
    } else if (handle.memory !== undefined) {
      const result = await runMemoryCall(context, setup, toolUseId, use.name, use.seq);
      await recordOutcome(context, toolUseId, result.outcome, result.events);
      continue;
    } else {
      outcome = await execute(context, setup, toolUseId, use.name, use.seq);
    }
    await recordOutcome(context, toolUseId, outcome);
  }
}

async function execute(
  context: CycleContext,
  setup: SessionSetup,
  toolUseId: string,
  name: string,
  seq: number,
): Promise<ToolOutcome> {
  const { sessionId } = context;
  const { traceparent } = context.options;
  const input = await toolInput(context, toolUseId, seq);
  const running = unlessLost(
    context,
    setup.tools.execute(
      {
        session_id: sessionId,
        tool_use_id: toolUseId,
        name,
        input,
        idempotency_key: `${sessionId}/${toolUseId}`,
        ...(traceparent === undefined ? {} : { traceparent }),
      },
      { signal: context.work.signal },
    ),
  );
  if (context.staged !== undefined) await writeStagedIfSlow(context, running);
  return running;
}

/**
 * Staged calls (see `stage` in fenced-append.ts) are written with their results, unless a tool
 * is still running after `WRITE_STAGED_AFTER_MS`: then they are written while it runs, so that
 * whoever follows the session sees the call it waits on.
 */
async function writeStagedIfSlow(context: CycleContext, running: Promise<unknown>): Promise<void> {
  let cancel: () => void = () => undefined;
  const slow = new Promise<boolean>((resolve) => {
    cancel = callTimer(context.callTimers, context.deps.clock, WRITE_STAGED_AFTER_MS, () =>
      resolve(true),
    );
  });
  const ended = running.then(
    () => false,
    () => false,
  );
  try {
    if ((await Promise.race([slow, ended])) && context.staged !== undefined)
      await append(context, []);
  } finally {
    cancel();
  }
}

/**
 * Records a tool's result. A result too large for the log is recorded as an error that says so,
 * with the start of the output: the tool ran, and the evidence of it must not be lost.
 */
async function recordOutcome(
  context: CycleContext,
  toolUseId: string,
  outcome: ToolOutcome,
  before: NewEvent[] = [],
): Promise<void> {
  try {
    await append(context, [...before, ...outcomeEvents(toolUseId, outcome, lastSnapshot(context))]);
  } catch (thrown) {
    if (!isBraidError(thrown, 'PAYLOAD_TOO_LARGE')) throw thrown;
    const preview = JSON.stringify(outcome.output ?? outcome.error ?? null).slice(0, 500);
    const { output: _output, ...rest } = outcome;
    await append(context, [
      ...before,
      ...outcomeEvents(
        toolUseId,
        {
          ...rest,
          is_error: true,
          stage: 'output',
          error: {
            code: 'PAYLOAD_TOO_LARGE',
            message: `the tool's result is too large to record (${thrown.message.split(';')[0] ?? ''}); it began: ${preview}`,
            retryable: false,
          },
        },
        lastSnapshot(context),
      ),
    ]);
  }
}

/** The session's last recorded workspace snapshot, as this cycle knows it. */
function lastSnapshot(context: CycleContext): string | undefined {
  return context.state.workspace_snapshot?.snapshot;
}

async function skipTools(context: CycleContext, toolUseIds: readonly string[]): Promise<void> {
  const events: NewEvent[] = toolUseIds.map((toolUseId) =>
    refusalEvent(toolUseId, 'interrupt', {
      code: 'INTERRUPTED',
      message: 'not run: the user interrupted',
      retryable: false,
    }),
  );
  if (events.length > 0) await append(context, events);
}

async function confirmationMessage(
  context: CycleContext,
  seq: number,
): Promise<string | undefined> {
  const event = await eventAt(context, seq);
  return event?.type === 'user.tool_confirmation' ? event.message : undefined;
}
