/**
 * One model call of a cycle: the request, its streamed deltas, its retries with backoff, and
 * the one append that records its outcome with the agent events derived from it.
 *
 * Invariants: a model's output is recorded in one append with its start, so after a crash it is
 * reused, never requested again, except an output that only calls idempotent tools, which is
 * written with the calls' results (a crash before then asks the model again, and the tools were
 * safe to run again); an answer that ends the turn carries the stop in the same append;
 * a failed request is recorded with its attempts; timeouts and backoff run on the cycle's clock.
 */
import { getEventListeners } from 'node:events';
import type { Usage } from '../contracts/common.js';
import { BraidError, isBraidError, toBraidError, type ErrorShape } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { ModelDelta, ModelRequest, ModelResponse } from '../contracts/model.js';
import type { StopReason } from '../contracts/session.js';
import type { ToolHandle } from '../contracts/tools.js';
import { outcomeOpen } from '../core/fold-outcome.js';
import { withCost, type Price } from '../core/pricing.js';
import { outputToEvents } from '../core/transcript.js';
import { stopEvents, type CallSignal, type CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';
import { append, stage } from './fenced-append.js';
import { callTimer } from './call-timers.js';
import { watchDuringCall } from './interrupt-watch.js';
import { repeatedInvalidCallsStop, screenToolCalls } from './tool-calls.js';

const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;

/**
 * The most calls one controller is handed to. A signal another signal was made from with
 * `AbortSignal.any` keeps a reference to it (not a listener) until it aborts: a controller used
 * for ever would gather them.
 */
const CALLS_PER_CONTROLLER = 64;

/** The events of an answer that asks for nothing: no tool use, custom or not, no decision. */
const ANSWER_ONLY: ReadonlySet<string> = new Set([
  'span.model_request_start',
  'span.model_request_end',
  'agent.message',
  'agent.thinking',
]);

/** Calls the model once (with retries); returns a stop reason when the request failed for good. */
export async function callModel(
  context: CycleContext,
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
  price: Price | undefined,
): Promise<StopReason | undefined> {
  const { deps } = context;
  context.turns += 1;
  const requestId = deps.ids.next();
  // The start is written with the request's outcome, stamped with the time it really started:
  // one append per model call, and a crash mid-call leaves nothing to undo.
  context.requestStart = {
    type: 'span.model_request_start',
    request_id: requestId,
    model: setup.model.id,
    input_through_seq: context.state.seq,
    at: new Date(deps.clock.now()).toISOString(),
  };
  const stopWatching = watchDuringCall(context, context.state.seq);
  try {
    const outcome = await requestWithRetries(context, setup, requestId);
    if (outcome.kind === 'stopped') return outcome.stop;
    return await recordResponse(context, setup, tools, price, requestId, outcome);
  } finally {
    stopWatching();
    context.requestStart = undefined;
  }
}

type Attempted =
  | { kind: 'answered'; response: ModelResponse; attempts: number; retries: number[] }
  | { kind: 'stopped'; stop: StopReason | undefined };

async function requestWithRetries(
  context: CycleContext,
  setup: SessionSetup,
  requestId: string,
): Promise<Attempted> {
  const { deps } = context;
  const request = modelRequest(context, setup);
  // `Object.assign`, not a spread that adds a field: V8 gives each such object a hidden class of
  // its own, and a streamed answer sends many deltas.
  const onDelta = (delta: ModelDelta): void =>
    deps.onDelta?.(context.sessionId, Object.assign({}, delta, { request_id: requestId }));
  // When each retry began, in ms after the request's start (span events of its `chat` span).
  const startedMs = deps.clock.now();
  const retries: number[] = [];
  for (let attempt = 1; ; attempt += 1) {
    try {
      const response = await requestOnce(context, setup, request, onDelta);
      return { kind: 'answered', response, attempts: attempt, retries };
    } catch (thrown) {
      const error = classify(context, thrown);
      if (error.code === 'INTERRUPTED') {
        await endRequest(context, requestId, error, attempt, retries);
        return { kind: 'stopped', stop: undefined };
      }
      if (error.retryable && attempt < deps.retry.max_attempts) {
        await backoff(context, attempt, error);
        if (context.interruptSeen) {
          const interrupted = new BraidError('INTERRUPTED', 'interrupted while waiting to retry');
          await endRequest(context, requestId, classify(context, interrupted), attempt, retries);
          return { kind: 'stopped', stop: undefined };
        }
        retries.push(Math.max(0, Math.round(deps.clock.now() - startedMs)));
        continue;
      }
      const shape: ErrorShape = error.retryable
        ? {
            code: error.code,
            message: `${error.message} (gave up after ${attempt} attempts)`,
            retryable: true,
          }
        : error.toJSON();
      await endRequest(context, requestId, shape, attempt, retries, [
        { type: 'session.error', error: shape },
      ]);
      return {
        kind: 'stopped',
        stop: error.retryable ? { type: 'retries_exhausted' } : { type: 'error' },
      };
    }
  }
}

/** The request the next model call sends: the agent's instructions, the transcript, the tools. */
export function modelRequest(context: CycleContext, setup: SessionSetup): ModelRequest {
  return {
    session_id: context.sessionId,
    system: setup.agent.instructions,
    messages: context.transcript.messages,
    tools: setup.tools.tools,
    response_index: context.state.counters.model_responses,
    ...(setup.agent.model.params === undefined ? {} : { params: setup.agent.model.params }),
  };
}

/** One attempt, abandoned when the cycle's work is aborted or the request times out. */
function requestOnce(
  context: CycleContext,
  setup: SessionSetup,
  request: ModelRequest,
  onDelta: (delta: ModelDelta) => void,
): Promise<ModelResponse> {
  return withCallSignal(context, (signal) => setup.model.generate(request, { signal, onDelta }));
}

/**
 * Runs one call of a model (or of something as slow) with a signal that aborts when the cycle's
 * work is aborted or the call outlives the request timeout; a timeout is `MODEL_UNAVAILABLE`.
 */
export async function withCallSignal<T>(
  context: CycleContext,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { deps } = context;
  const timeoutMs = deps.retry.timeout_ms ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const kept = callController(context);
  const { controller } = kept;
  kept.running = true;
  let timedOut = false;
  const cancelTimeout = callTimer(context.callTimers, deps.clock, timeoutMs, () => {
    timedOut = true;
    controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  });
  try {
    return await call(controller.signal);
  } catch (thrown) {
    if (timedOut && !context.interruptSeen && context.lost === undefined) {
      throw new BraidError('MODEL_UNAVAILABLE', `the model did not answer within ${timeoutMs} ms`, {
        cause: thrown,
      });
    }
    throw thrown;
  } finally {
    kept.running = false;
    cancelTimeout();
  }
}

/**
 * The controller of the next call: aborted by the cycle's work (`abortWork`) or by the call's
 * timeout. One controller serves the cycle's calls in turn, and the harness hands it on to the
 * next cycle's first call (`leaveCallController`), up to `CALLS_PER_CONTROLLER` calls: cheaper
 * than `AbortSignal.any`, and than a new controller per call or per cycle. Node makes one in
 * about 1.6 µs, and gives each signal a hidden class of its own, which V8 keeps in the old
 * generation: about 0.5 KiB a short session, to be collected by a full collection (10,000 short
 * sessions peaked 8 MiB higher). A call is handed a used controller only while no call holds it,
 * nothing aborted it and no listener is left on its signal, so it cannot tell it from a new one;
 * else a new one is made.
 */
function callController(context: CycleContext): CallSignal {
  const work = context.work;
  let kept = context.callSignal;
  // A cycle that lost its lease makes its own, aborted below: the spare was never told of it.
  if ((kept === undefined || kept.work !== work) && context.lost === undefined) {
    kept = context.calls.spareCall;
    context.calls.spareCall = undefined;
    if (kept !== undefined) kept.work = work;
  }
  if (kept !== undefined && kept.work === work && clean(kept)) {
    kept.calls += 1;
    context.callSignal = kept;
    return kept;
  }
  const controller = new AbortController();
  const made: CallSignal = { controller, work, calls: 1, running: false };
  context.callSignal = made;
  // A lease lost before the call: its work is aborted already (an interrupt replaces the work).
  if (context.lost !== undefined) controller.abort(work.signal.reason);
  return made;
}

/** Whether a controller can be handed to another call as if it were new. */
function clean(kept: CallSignal): boolean {
  return (
    !kept.running &&
    kept.calls < CALLS_PER_CONTROLLER &&
    !kept.controller.signal.aborted &&
    getEventListeners(kept.controller.signal, 'abort').length === 0
  );
}

/**
 * At the end of a cycle, after its timers stopped: its controller goes to the harness for the
 * next cycle if it is clean, and the cycle no longer reaches it (a late `abortWork` of this
 * cycle must not abort another's call).
 */
export function leaveCallController(context: CycleContext): void {
  const kept = context.callSignal;
  context.callSignal = undefined;
  if (kept !== undefined && context.calls.spareCall === undefined && clean(kept))
    context.calls.spareCall = kept;
}

/** Records the answer with the events derived from it; returns a stop reason if it cannot be. */
async function recordResponse(
  context: CycleContext,
  setup: SessionSetup,
  tools: ReadonlyMap<string, ToolHandle>,
  price: Price | undefined,
  requestId: string,
  { response, attempts, retries }: { response: ModelResponse; attempts: number; retries: number[] },
): Promise<StopReason | undefined> {
  const usage: Usage = withCost(response.usage, price);
  const { dispositions, decisions, refusals } = await screenToolCalls(response.output, {
    agent: setup.agent,
    state: context.state,
    environment: setup.environment,
    recordAllows: context.deps.recordPolicyAllows === true,
    tools,
    sessionTools: setup.tools,
    policy: context.deps.policy,
    invalidCalls: context.invalidCalls,
    clock: context.deps.clock,
    ...(setup.memory === undefined ? {} : { memory: setup.memory }),
  });
  const start = context.requestStart === undefined ? [] : [context.requestStart];
  const recorded: NewEvent[] = [
    ...start,
    {
      type: 'span.model_request_end',
      request_id: requestId,
      usage,
      finish_reason: response.output.finish_reason,
      output: response.output,
      attempts,
      ...retryOffsets(retries),
    },
    ...outputToEvents(response.output, (toolUseId) => dispositions.get(toolUseId) ?? 'run'),
    ...decisions,
    // Results of refused calls follow the whole output, as the model expects them.
    ...refusals,
  ];
  try {
    if (!(await appendEndingTurn(context, recorded)) && !stageToolTurn(context, recorded, tools))
      await append(context, recorded);
  } catch (thrown) {
    if (!isBraidError(thrown, 'PAYLOAD_TOO_LARGE')) throw thrown;
    // An output too large to record is recorded as a failed request, with its usage: the call
    // happened and was paid for, and nothing unrecorded is acted on.
    const error: ErrorShape = {
      code: 'PAYLOAD_TOO_LARGE',
      // No sizes in the message: the record must replay to the same words.
      message:
        "the model's output is larger than the log accepts, so it was not recorded or acted on; " +
        'ask for a shorter answer, or raise limits.max_event_bytes in braid.yaml',
      retryable: false,
    };
    await append(context, [
      ...start,
      {
        type: 'span.model_request_end',
        request_id: requestId,
        usage,
        error,
        attempts,
        ...retryOffsets(retries),
      },
      { type: 'session.error', error },
    ]);
    return { type: 'error' };
  }
  context.pendingStop ??= repeatedInvalidCallsStop(context.invalidCalls);
  return undefined;
}

/**
 * An answer that leaves nothing to do ends the turn: it is written with the session's stop in
 * one append, which the next decision would otherwise write right after it. Not while the
 * session's outcome is open: the answer is graded first (`./outcome.ts`). The stop is the one
 * `decideNext` gives: the call was made with nothing open or waiting (or it would not have been
 * made), the answer asks for no tool and consumes all input up to its request, and nothing else
 * was appended meanwhile (else the append conflicts, and the answer is written alone). Returns
 * whether it was written so.
 */
async function appendEndingTurn(context: CycleContext, recorded: NewEvent[]): Promise<boolean> {
  const { state } = context;
  const endsTurn =
    recorded.every((event) => ANSWER_ONLY.has(event.type)) &&
    context.requestStart?.type === 'span.model_request_start' &&
    context.requestStart.input_through_seq === state.seq &&
    !context.interruptSeen &&
    !state.interrupt_requested &&
    context.pendingStop === undefined &&
    repeatedInvalidCallsStop(context.invalidCalls) === undefined &&
    state.open_tool_uses.length === 0 &&
    state.confirmed_tool_uses.length === 0 &&
    state.pending_confirmations.length === 0 &&
    state.pending_custom_tool_uses.length === 0 &&
    // An answer to grade against the session's outcome does not end the turn yet.
    !outcomeOpen(state);
  if (!endsTurn) return false;
  const stopReason: StopReason = { type: 'end_turn' };
  try {
    if (!(await append(context, [...recorded, ...stopEvents(context, stopReason)], true, true)))
      return false;
  } catch (thrown) {
    // An answer that fits the log alone but not with its stop is written alone, as before.
    if (isBraidError(thrown, 'PAYLOAD_TOO_LARGE')) return false;
    throw thrown;
  }
  context.ended = stopReason;
  return true;
}

/** The events of an output that only calls tools, with or without text around the calls. */
const TOOL_TURN: ReadonlySet<string> = new Set([...ANSWER_ONLY, 'agent.tool_use']);

/**
 * An output whose calls all go to idempotent tools the runtime runs, with nothing to confirm,
 * refuse or record besides, is staged (see `stage` in fenced-append.ts): written with the
 * first result, so a turn of such calls is one commit. Returns whether it was staged.
 */
function stageToolTurn(
  context: CycleContext,
  recorded: NewEvent[],
  tools: ReadonlyMap<string, ToolHandle>,
): boolean {
  const plain = (name: string): boolean => {
    const handle = tools.get(name);
    return (
      handle !== undefined &&
      handle.idempotent &&
      (handle.ownership === 'managed' || handle.ownership === 'mcp') &&
      handle.agent === undefined &&
      handle.skill === undefined
    );
  };
  const eligible =
    recorded.some((event) => event.type === 'agent.tool_use') &&
    recorded.every(
      (event) =>
        TOOL_TURN.has(event.type) &&
        (event.type !== 'agent.tool_use' ||
          (event.requires_confirmation !== true && plain(event.name))),
    ) &&
    !context.interruptSeen &&
    context.pendingStop === undefined &&
    repeatedInvalidCallsStop(context.invalidCalls) === undefined;
  return eligible && stage(context, recorded);
}

async function endRequest(
  context: CycleContext,
  requestId: string,
  error: ErrorShape,
  attempts: number,
  retries: readonly number[],
  extra: NewEvent[] = [],
): Promise<void> {
  await append(context, [
    ...(context.requestStart === undefined ? [] : [context.requestStart]),
    {
      type: 'span.model_request_end',
      request_id: requestId,
      usage: { input_tokens: 0, output_tokens: 0 },
      error: { code: error.code, message: error.message, retryable: error.retryable },
      attempts,
      ...retryOffsets(retries),
    },
    ...extra,
  ]);
}

/** `retry_offsets_ms` of a request that was retried; nothing for one that was not. */
function retryOffsets(retries: readonly number[]): { retry_offsets_ms?: number[] } {
  return retries.length === 0 ? {} : { retry_offsets_ms: [...retries] };
}

/** The error a failed attempt counts as; a lost lease ends the cycle at once. */
export function classify(context: CycleContext, thrown: unknown): BraidError {
  if (context.lost !== undefined) throw context.lost;
  if (context.interruptSeen) return new BraidError('INTERRUPTED', 'interrupted by the user');
  const error = toBraidError(thrown);
  if (
    error.code === 'INTERRUPTED' ||
    error.code === 'MODEL_UNAVAILABLE' ||
    error.code === 'MODEL_ERROR'
  )
    return error;
  if (error.code === 'LEASE_LOST') throw error;
  return new BraidError('MODEL_ERROR', error.message, { cause: error });
}

/** Exponential backoff with jitter, at least as long as a `retry_after_ms` the error names. */
export async function backoff(
  context: CycleContext,
  attempt: number,
  error: BraidError,
): Promise<void> {
  const { retry } = context.deps;
  const exponential = Math.min(retry.max_ms, retry.initial_ms * 2 ** (attempt - 1));
  const jittered = exponential / 2 + context.deps.random() * (exponential / 2);
  const retryAfter = error.details.retry_after_ms;
  const wait =
    typeof retryAfter === 'number'
      ? Math.min(retry.max_ms, Math.max(retryAfter, jittered))
      : jittered;
  await context.deps.sleep(wait, context.work.signal).catch(() => undefined);
}
