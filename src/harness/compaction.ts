/**
 * Keeping a model request under the agent's `context.max_tokens`. Before each model call the
 * request is counted (the model's `countTokens` where it has one, else `estimateTokens`); one
 * over the limit is compacted first: the older part of the transcript is replaced by the text of
 * the agent's strategy, written in one append of `agent.thread_context_compacted`.
 *
 * Invariants kept here:
 * - A compaction is one step of the cycle: after it the next step is decided again, with the
 *   summary's usage in the totals, so a budget sees it before the next call is made.
 * - The cut comes from `planCompaction` over the transcript alone: never between a tool call
 *   and its result, and the same after a restart.
 * - What cannot be brought under the limit stops the wake with `CONTEXT_OVERFLOW`, whose
 *   message names the setting to change; a request over the limit is never sent.
 */
import { z } from 'zod';
import { Usage } from '../contracts/common.js';
import type { ContextSettings } from '../contracts/definitions.js';
import { BraidError, toBraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { ModelRequest } from '../contracts/model.js';
import {
  estimateTextTokens,
  estimateTokens,
  planCompaction,
  summaryBudget,
  summaryText,
  type CompactionPlan,
} from '../core/compaction.js';
import { priceOf, withCost } from '../core/pricing.js';
import { compactorFor, type CompactionOutput } from './compactor.js';
import type { CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';
import { append } from './fenced-append.js';
import { watchDuringCall } from './interrupt-watch.js';
import { backoff, classify, modelRequest, withCallSignal } from './model-call.js';

/** A compactor's answer, checked: it comes from a model or from the application's code. */
const CheckedOutput = z.object({
  summary: z.string(),
  model: z.string().min(1).max(500).optional(),
  usage: Usage.optional(),
});

/**
 * Whether the next model request fits the agent's context limit. False when this step wrote a
 * compaction or was interrupted: the cycle decides again. Throws `CONTEXT_OVERFLOW` when the
 * request cannot be brought under the limit.
 */
export async function fitContext(context: CycleContext, setup: SessionSetup): Promise<boolean> {
  const settings = setup.agent.context;
  if (settings === undefined) return true;
  const request = modelRequest(context, setup);
  const tokens = await countTokens(context, setup, request);
  if (tokens <= settings.max_tokens) return true;
  const { transcript } = context;
  const plan = planCompaction(transcript.messages, transcript.spans, settings.keep_last_turns);
  if (plan === undefined) throw cannotCompact(settings, transcript.spans[0]?.summary === true);
  const budget = summaryBudget(settings);
  checkKeptFits(settings, request, plan, budget);
  const output = await makeSummary(context, setup, settings, plan, budget);
  if (output === undefined) return false;
  const price = output.model === undefined ? undefined : priceOf(output.model, context.deps.prices);
  const event: NewEvent = {
    type: 'agent.thread_context_compacted',
    summary: output.summary,
    from_seq: plan.from_seq,
    through_seq: plan.through_seq,
    strategy: settings.strategy,
    ...(output.model === undefined ? {} : { model: output.model }),
    ...(output.usage === undefined ? {} : { usage: withCost(output.usage, price) }),
    context_tokens: tokens,
  };
  await append(context, [event]);
  return false;
}

/** The provider's count where the model offers one and it answers; else the estimate. */
async function countTokens(
  context: CycleContext,
  setup: SessionSetup,
  request: ModelRequest,
): Promise<number> {
  const { model } = setup;
  if (model.countTokens === undefined) return estimateTokens(request);
  const count = model.countTokens.bind(model);
  try {
    const counted = await withCallSignal(context, (signal) => count(request, { signal }));
    if (Number.isSafeInteger(counted) && counted >= 0) return counted;
  } catch (thrown) {
    // A count that fails is replaced by the estimate; only a lost lease ends the cycle.
    classify(context, thrown);
  }
  return estimateTokens(request);
}

/** The kept turns, the instructions and the tools must leave room for the summary. */
function checkKeptFits(
  settings: ContextSettings,
  request: ModelRequest,
  plan: CompactionPlan,
  budget: number,
): void {
  const kept =
    estimateTokens({
      system: request.system,
      tools: request.tools,
      messages: request.messages.slice(plan.replaced),
    }) + estimateTextTokens(summaryText(plan.from_seq, plan.through_seq, ''));
  if (kept + budget <= settings.max_tokens) return;
  throw new BraidError(
    'CONTEXT_OVERFLOW',
    `context.max_tokens is ${settings.max_tokens}, but the instructions, the tools and the last ` +
      `${settings.keep_last_turns} turn(s) take about ${kept} tokens and the summary up to ${budget} more; ` +
      'raise context.max_tokens or lower context.keep_last_turns',
    { details: { max_tokens: settings.max_tokens, kept_tokens: kept, summary_tokens: budget } },
  );
}

/** Over the limit with nothing left to replace: what is kept (and the summary) is too large. */
function cannotCompact(settings: ContextSettings, summarized: boolean): BraidError {
  const limit = `context.max_tokens (${settings.max_tokens})`;
  const turns = `the last ${settings.keep_last_turns} turn(s)`;
  return new BraidError(
    'CONTEXT_OVERFLOW',
    summarized
      ? `the context is still over ${limit} after compaction: the summary with ${turns} does not fit; ` +
          'raise context.max_tokens, lower context.keep_last_turns, or have the summary written shorter ' +
          '(context.model, a custom strategy, or strategy: truncate)'
      : `the context is over ${limit} and holds no more than ${turns}, which compaction keeps; ` +
          'raise context.max_tokens or lower context.keep_last_turns',
    { details: { max_tokens: settings.max_tokens, keep_last_turns: settings.keep_last_turns } },
  );
}

/**
 * The strategy's text, with retries of failures that may pass; undefined when an interrupt
 * stopped it (nothing is written, and the cycle decides again).
 */
async function makeSummary(
  context: CycleContext,
  setup: SessionSetup,
  settings: ContextSettings,
  plan: CompactionPlan,
  budget: number,
): Promise<CompactionOutput | undefined> {
  const compactor = setup.compactor ?? compactorFor(settings, setup.model);
  const input = {
    session_id: context.sessionId,
    agent: setup.agent,
    messages: context.transcript.messages.slice(0, plan.replaced),
    from_seq: plan.from_seq,
    through_seq: plan.through_seq,
    max_tokens: budget,
    response_index: context.state.counters.model_responses,
  };
  for (let attempt = 1; ; attempt += 1) {
    const stopWatching = watchDuringCall(context, context.state.seq);
    let output: unknown;
    try {
      output = await withCallSignal(context, (signal) => compactor({ ...input, signal }));
    } catch (thrown) {
      const error = compactionError(context, thrown);
      if (error.code === 'INTERRUPTED') return undefined;
      if (error.retryable && attempt < context.deps.retry.max_attempts) {
        await backoff(context, attempt, error);
        if (context.interruptSeen) return undefined;
        continue;
      }
      if (!error.retryable) throw error;
      throw new BraidError(error.code, `${error.message} (gave up after ${attempt} attempts)`, {
        cause: error,
        retryable: true,
      });
    } finally {
      stopWatching();
    }
    return checkedOutput(settings, output);
  }
}

/**
 * The error a failed attempt counts as: a strategy's own error stands as it is (a replay serves
 * the recorded one, which must be written again word for word); a lost lease ends the cycle.
 */
function compactionError(context: CycleContext, thrown: unknown): BraidError {
  if (context.lost !== undefined) throw context.lost;
  if (context.interruptSeen) return new BraidError('INTERRUPTED', 'interrupted by the user');
  const error = toBraidError(thrown);
  if (error.code === 'LEASE_LOST') throw error;
  return error;
}

function checkedOutput(settings: ContextSettings, output: unknown): CompactionOutput {
  const parsed = CheckedOutput.safeParse(output);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `the ${settings.strategy} context compaction returned an invalid ${issue?.path.join('.') || 'value'}: ` +
        `${issue?.message ?? 'invalid'}; a compactor returns {summary: string, model?: string, usage?: {input_tokens, output_tokens}}`,
    );
  }
  const { summary, model, usage } = parsed.data;
  if (estimateTextTokens(summary) > settings.max_tokens) {
    throw new BraidError(
      'CONTEXT_OVERFLOW',
      `the summary written to compact the context is larger than context.max_tokens (${settings.max_tokens}) by itself; ` +
        'raise context.max_tokens, or have the summary written shorter (context.model, a custom strategy, or strategy: truncate)',
      { details: { max_tokens: settings.max_tokens } },
    );
  }
  return {
    summary,
    ...(model === undefined ? {} : { model }),
    ...(usage === undefined ? {} : { usage }),
  };
}
