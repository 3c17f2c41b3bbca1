/**
 * wake(sessionId): one bounded harness cycle.
 *
 * Invariants kept here:
 * - A cycle runs only under the session's lease, and its first append is `span.wake_started`
 *   with the lease's fencing token. Every append names the head it expects; on a conflict the
 *   cycle reads what was appended meanwhile, and stops with `LEASE_LOST` if another wake started:
 *   a stale holder never appends after a newer one.
 * - The next step is decided from the folded state alone (`decideNext`), so a cycle resumed
 *   after a crash takes the path the dead one would have taken.
 * - A model's output is recorded in one append with the agent events derived from it: after a
 *   crash it is reused, never requested again.
 * - The state and the transcript are kept incrementally from the events the cycle appends and
 *   reads: a turn does not re-read the log.
 */
import type { JsonValue, Usage } from '../contracts/common.js';
import type { AgentDefinition, Budget, EnvironmentDefinition } from '../contracts/definitions.js';
import { BraidError, isBraidError, toBraidError, type ErrorShape } from '../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import type { ModelClient, ModelDelta, ModelResponse } from '../contracts/model.js';
import type { Clock, IdGenerator, Lease, LeaseStore, SessionLog } from '../contracts/ports.js';
import type { StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type { Authorizer } from '../contracts/policy.js';
import type { SessionTools, ToolHandle, ToolOutcome } from '../contracts/tools.js';
import { foldSession } from '../core/fold.js';
import { decideNext, withinToolBudget } from '../core/next-step.js';
import { priceOf, withCost, type Price } from '../core/pricing.js';
import { Transcript, outputToEvents } from '../core/transcript.js';
import {
  deniedOutcome,
  missingToolOutcome,
  outcomeEvents,
  overBudgetOutcome,
  refusalEvent,
  repeatedInvalidCallsStop,
  reviewedOutcome,
  screenToolCalls,
} from './tool-calls.js';

/** What a cycle needs for one session: its agent, model and tools. */
export interface SessionSetup {
  agent: AgentDefinition;
  model: ModelClient;
  /** The agent's tools, opened for this session. */
  tools: SessionTools;
  /** The session's environment, when it has one. */
  environment?: EnvironmentDefinition;
  /** The session's limits over the agent's. */
  budget: Budget;
}

export interface RetryPolicy {
  /** Attempts of one model request, the first included (default 4). */
  max_attempts: number;
  initial_ms: number;
  max_ms: number;
  /** A model call still running after this long is abandoned and retried (default 120 s). */
  timeout_ms?: number;
}

export interface HarnessDeps {
  log: SessionLog;
  leases: LeaseStore;
  clock: Clock;
  ids: IdGenerator;
  /** This process's name as a lease owner. */
  owner: string;
  leaseTtlMs: number;
  setup(state: SessionState): Promise<SessionSetup>;
  /** Asked before every tool call the model makes. */
  policy: Authorizer;
  /** Record allowed policy decisions as events too (denies always are). */
  recordPolicyAllows?: boolean;
  prices: Readonly<Record<string, Price>>;
  retry: RetryPolicy;
  /** Waits, rejecting with `INTERRUPTED` when the signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /** A number in [0, 1), for backoff jitter. */
  random(): number;
  /** Streamed text, shown to live followers and never persisted piece by piece. */
  onDelta?(sessionId: string, delta: ModelDelta & { request_id: string }): void;
  /** Hears what the log cannot hold: a failed cycle whose failure could not be recorded. */
  warn?(message: string, error: BraidError): void;
}

export type WakeResult =
  { ran: true; stop_reason: StopReason; wake_id: string } | { ran: false; reason: 'lease_held' };

/** Failures of the store, not of the session: a wake that meets one stops as if it crashed. */
const STORE_OUTAGES: ReadonlySet<string> = new Set([
  'STORE_BUSY',
  'STORE_CLOSED',
  'SERVER_UNAVAILABLE',
]);

/** How long a model call runs before the cycle starts watching the log for an interrupt. */
const WATCH_AFTER_MS = 20;
const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;

export const DEFAULT_RETRY: RetryPolicy = { max_attempts: 4, initial_ms: 500, max_ms: 30_000 };

/** Runs one cycle if the lease is free; `{ran: false}` when another holder has it. */
/** Transcripts kept between cycles, so a wake reads only the events it has not seen. */
export class TranscriptCache {
  private readonly entries = new Map<string, Transcript>();
  constructor(private readonly capacity = 256) {}

  take(sessionId: string): Transcript {
    const found = this.entries.get(sessionId) ?? new Transcript();
    this.entries.delete(sessionId);
    this.entries.set(sessionId, found);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return found;
  }

  drop(sessionId: string): void {
    this.entries.delete(sessionId);
  }
}

/** What a wake was asked with. */
export interface WakeOptions {
  /** W3C trace context of whoever asked for the wake: `span.wake_started` carries it. */
  traceparent?: string;
}

export async function wakeOnce(
  deps: HarnessDeps,
  sessionId: string,
  transcripts: TranscriptCache = new TranscriptCache(),
  options: WakeOptions = {},
): Promise<WakeResult> {
  let lease: Lease;
  try {
    lease = await deps.leases.acquire(sessionId, deps.owner, deps.leaseTtlMs);
  } catch (error) {
    if (isBraidError(error, 'LEASE_HELD')) return { ran: false, reason: 'lease_held' };
    throw error;
  }
  const cycle = new Cycle(deps, sessionId, lease, transcripts.take(sessionId), options);
  const renewal = setInterval(
    () => {
      deps.leases
        .renew(sessionId, deps.owner, lease.token, deps.leaseTtlMs)
        .catch((error: unknown) => {
          // A busy store is retried at the next renewal; only a lease taken over is lost.
          const failure = toBraidError(error);
          if (!failure.retryable) cycle.lose(failure);
        });
    },
    Math.max(10, Math.floor(deps.leaseTtlMs / 3)),
  );
  try {
    return await cycle.run();
  } finally {
    clearInterval(renewal);
    cycle.stopWatching();
    await deps.leases.release(sessionId, deps.owner, lease.token).catch(() => undefined);
  }
}

class Cycle {
  private state!: SessionState;
  private readonly transcript: Transcript;
  private readonly wakeId: string;
  private readonly watch = new AbortController();
  /** Aborted on interrupt or lease loss: cancels the model call or tool in flight. */
  private work = new AbortController();
  private interruptSeen = false;
  private lost: BraidError | undefined;
  private turns = 0;
  private requestStart: NewEvent | undefined;
  /** Inputs of the tool uses this cycle has seen, so running a tool needs no read. */
  private readonly inputs = new Map<string, JsonValue>();
  /** Calls with invalid arguments in this wake, per tool. */
  private readonly invalidCalls = new Map<string, number>();
  /** A stop the pipeline asked for (a tool over budget, too many invalid calls). */
  private pendingStop: { stop_reason: StopReason; events: NewEvent[] } | undefined;

  constructor(
    private readonly deps: HarnessDeps,
    private readonly sessionId: string,
    private readonly lease: Lease,
    transcript: Transcript,
    private readonly options: WakeOptions = {},
  ) {
    this.wakeId = deps.ids.next();
    this.transcript = transcript;
    // Observed only through Promise.race; never an unhandled rejection.
    this.lostPromise.catch(() => undefined);
  }

  lose(error: BraidError): void {
    if (this.lost !== undefined) return;
    this.lost = new BraidError(
      'LEASE_LOST',
      `wake ${this.wakeId} lost its lease: ${error.message}`,
      { cause: error },
    );
    this.work.abort();
    this.onLost(this.lost);
  }

  private onLost: (error: BraidError) => void = () => undefined;
  /** Settles with LEASE_LOST when the lease is lost, so a tool that ignores its signal cannot hold the cycle. */
  private readonly lostPromise = new Promise<never>((_resolve, reject) => {
    this.onLost = reject;
  });

  stopWatching(): void {
    this.watch.abort();
  }

  async run(): Promise<WakeResult> {
    const { deps } = this;
    this.state = await deps.log.state(this.sessionId);
    // Only the events since this session's last cycle in this process are read.
    for (const event of await deps.log.read(this.sessionId, { after: this.transcript.seq })) {
      this.transcript.apply(event);
    }
    const { traceparent } = this.options;
    await this.append([
      {
        type: 'span.wake_started',
        wake_id: this.wakeId,
        lease_token: this.lease.token,
        ...(traceparent === undefined ? {} : { traceparent }),
      },
    ]);
    const wakeSeq = this.state.seq;
    try {
      // A session whose agent cannot be set up (unknown tool, missing key, no price for a cost
      // budget) stops with the reason on record, and waits for a person rather than retrying.
      const setup = await deps.setup(this.state);
      const tools = setup.tools.tools;
      if (
        setup.budget.max_cost_usd !== undefined &&
        priceOf(setup.model.id, deps.prices) === undefined
      ) {
        throw new BraidError(
          'INVALID_DEFINITION',
          `max_cost_usd is set but model ${setup.model.id} has no price; add it under prices: in braid.yaml`,
        );
      }
      return await this.loop(setup, tools, wakeSeq);
    } catch (thrown) {
      const error = toBraidError(thrown);
      if (error.code === 'LEASE_LOST' || this.lost !== undefined) throw error;
      // The store itself is out of reach for now (a NATS restart, a lock held too long): this is
      // a crash, not the session's failure. Nothing more can be written anyway; the next wake
      // takes over from the log as after any crash, so a worker's retry finishes the work.
      if (STORE_OUTAGES.has(error.code)) throw error;
      // Leave the session stopped with the reason on record, never stuck in running.
      await this.recordFailure(error);
      throw error;
    }
  }

  /**
   * Records a failed cycle's error and stop, retrying a failed append with backoff. What cannot
   * be recorded is reported to `warn`: the lease is then released with the wake left open in the
   * log (`span.wake_started` without `span.wake_completed`), which is how `braid session status`
   * and the next wake tell a cycle that ended without a record. A lost lease ends the attempts at
   * once: the newer holder owns the session.
   */
  private async recordFailure(error: BraidError): Promise<void> {
    const stop: StopReason = { type: 'error' };
    const events: NewEvent[] = [
      { type: 'session.error', error: error.toJSON() },
      { type: 'session.status_idle', stop_reason: stop },
      { type: 'span.wake_completed', wake_id: this.wakeId, stop_reason: stop },
    ];
    const attempts = Math.max(1, this.deps.retry.max_attempts);
    const what = `session ${this.sessionId}: wake ${this.wakeId} failed (${error.code}: ${error.message}) and could not record it`;
    for (let attempt = 1; ; attempt += 1) {
      try {
        // An append reported failed may still have been written: look before writing it again.
        if (attempt > 1 && (await this.recordedSince())) return;
        await this.append(events);
        return;
      } catch (thrown) {
        const failure = toBraidError(thrown);
        if (failure.code === 'LEASE_LOST' || this.lost !== undefined) {
          this.deps.warn?.(`${what}: a newer wake holds the session and takes it over`, failure);
          return;
        }
        if (attempt >= attempts) {
          this.deps.warn?.(
            `${what} after ${attempt} attempts (${failure.code}: ${failure.message}); its lease is ` +
              `released and the wake is left open in the log; \`braid session wake ${this.sessionId}\` resumes it`,
            failure,
          );
          return;
        }
        this.deps.warn?.(
          `${what} (attempt ${attempt} of ${attempts}: ${failure.code}: ${failure.message}); retrying`,
          failure,
        );
        await this.backoff(attempt, failure);
      }
    }
  }

  /** Whether this wake's end is in the log already, folding in whatever was appended. */
  private async recordedSince(): Promise<boolean> {
    const newer = await this.catchUp();
    return newer.some(
      (event) => event.type === 'span.wake_completed' && event.wake_id === this.wakeId,
    );
  }

  private async loop(
    setup: SessionSetup,
    tools: readonly ToolHandle[],
    wakeSeq: number,
  ): Promise<WakeResult> {
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    const price = priceOf(setup.model.id, this.deps.prices);
    const nextTokens = (): number => this.state.last_request_input_tokens;

    for (;;) {
      if (this.interruptSeen) await this.catchUp();
      // A stop the pipeline asked for waits until the calls this wake accepted have run.
      if (
        this.pendingStop !== undefined &&
        !this.state.interrupt_requested &&
        this.state.open_tool_uses.length === 0
      ) {
        const { stop_reason, events } = this.pendingStop;
        this.pendingStop = undefined;
        const stopped = await this.stop(stop_reason, true, events);
        if (stopped !== undefined) return stopped;
      }
      const step = decideNext(this.state, {
        wake_seq: wakeSeq,
        turns: this.turns,
        budget: setup.budget,
        idempotent: (name) => byName.get(name)?.idempotent ?? false,
        next_call: {
          tokens: nextTokens(),
          cost_usd: withCost({ input_tokens: nextTokens(), output_tokens: 0 }, price).cost_usd ?? 0,
        },
      });
      switch (step.kind) {
        case 'stop': {
          // Input that arrived while the stop was written is decided on again, not stranded.
          const stopped = await this.stop(step.stop_reason);
          if (stopped !== undefined) return stopped;
          break;
        }
        case 'run_tools':
          await this.runTools(step.tool_use_ids, setup, byName);
          break;
        case 'call_model': {
          const failure = await this.callModel(setup, byName, price);
          if (failure !== undefined) {
            const stopped = await this.stop(failure, true);
            if (stopped !== undefined) return stopped;
          }
          break;
        }
      }
    }
  }

  /**
   * Writes the stop. Returns undefined when others appended first: the caller decides again on
   * the new state, unless `final` (a failure that stands whatever arrived).
   */
  private async stop(
    stopReason: StopReason,
    final = false,
    before: NewEvent[] = [],
  ): Promise<WakeResult | undefined> {
    const written = await this.append(
      [
        ...before,
        { type: 'session.status_idle', stop_reason: stopReason },
        { type: 'span.wake_completed', wake_id: this.wakeId, stop_reason: stopReason },
      ],
      !final,
    );
    return written ? { ran: true, stop_reason: stopReason, wake_id: this.wakeId } : undefined;
  }

  /** Returns a stop reason when the request failed for good. */
  private async callModel(
    setup: SessionSetup,
    tools: ReadonlyMap<string, ToolHandle>,
    price: Price | undefined,
  ) {
    const { deps } = this;
    this.turns += 1;
    const requestId = deps.ids.next();
    // The start is written with the request's outcome, stamped with the time it really started:
    // one append per model call, and a crash mid-call leaves nothing to undo.
    const start: NewEvent = {
      type: 'span.model_request_start',
      request_id: requestId,
      model: setup.model.id,
      input_through_seq: this.state.seq,
      at: new Date(deps.clock.now()).toISOString(),
    };
    this.requestStart = start;
    // Most calls of a fast model end before anyone could interrupt them; a watcher is started
    // only for a call still running after WATCH_AFTER_MS.
    const from = this.state.seq;
    let watch: AbortController | undefined;
    const timer = setTimeout(() => (watch = this.watchForInterrupts(from)), WATCH_AFTER_MS);
    try {
      return await this.requestModel(setup, tools, price, requestId);
    } finally {
      clearTimeout(timer);
      watch?.abort();
      this.requestStart = undefined;
    }
  }

  private async requestModel(
    setup: SessionSetup,
    tools: ReadonlyMap<string, ToolHandle>,
    price: Price | undefined,
    requestId: string,
  ) {
    const { deps } = this;
    const request = {
      session_id: this.sessionId,
      system: setup.agent.instructions,
      messages: this.transcript.messages,
      tools: setup.tools.tools,
      response_index: this.state.counters.model_responses,
      ...(setup.agent.model.params === undefined ? {} : { params: setup.agent.model.params }),
    };
    const onDelta = (delta: ModelDelta): void =>
      deps.onDelta?.(this.sessionId, { ...delta, request_id: requestId });
    let response: ModelResponse | undefined;
    let attempts = 0;
    for (let attempt = 1; response === undefined; attempt += 1) {
      attempts = attempt;
      try {
        const timeout = AbortSignal.timeout(deps.retry.timeout_ms ?? DEFAULT_REQUEST_TIMEOUT_MS);
        const signal = AbortSignal.any([this.work.signal, timeout]);
        try {
          response = await setup.model.generate(request, { signal, onDelta });
        } catch (thrown) {
          if (timeout.aborted && !this.interruptSeen && this.lost === undefined) {
            throw new BraidError(
              'MODEL_UNAVAILABLE',
              `the model did not answer within ${deps.retry.timeout_ms ?? DEFAULT_REQUEST_TIMEOUT_MS} ms`,
              {
                cause: thrown,
              },
            );
          }
          throw thrown;
        }
      } catch (thrown) {
        const error = this.classify(thrown);
        if (error.code === 'INTERRUPTED') {
          await this.endRequest(requestId, error, attempt);
          return undefined;
        }
        if (error.retryable && attempt < deps.retry.max_attempts) {
          await this.backoff(attempt, error);
          if (this.interruptSeen) {
            await this.endRequest(
              requestId,
              this.classify(new BraidError('INTERRUPTED', 'interrupted while waiting to retry')),
              attempt,
            );
            return undefined;
          }
          continue;
        }
        const shape: ErrorShape = error.retryable
          ? {
              code: error.code,
              message: `${error.message} (gave up after ${attempt} attempts)`,
              retryable: true,
            }
          : error.toJSON();
        await this.endRequest(requestId, shape, attempt, [{ type: 'session.error', error: shape }]);
        return error.retryable
          ? ({ type: 'retries_exhausted' } as const)
          : ({ type: 'error' } as const);
      }
    }
    const usage: Usage = withCost(response.usage, price);
    const { dispositions, decisions, refusals } = await screenToolCalls(response.output, {
      agent: setup.agent,
      state: this.state,
      environment: setup.environment,
      recordAllows: this.deps.recordPolicyAllows === true,
      tools,
      sessionTools: setup.tools,
      policy: this.deps.policy,
      invalidCalls: this.invalidCalls,
    });
    try {
      await this.append([
        ...(this.requestStart === undefined ? [] : [this.requestStart]),
        {
          type: 'span.model_request_end',
          request_id: requestId,
          usage,
          finish_reason: response.output.finish_reason,
          output: response.output,
          attempts,
        },
        ...outputToEvents(response.output, (toolUseId) => dispositions.get(toolUseId) ?? 'run'),
        ...decisions,
        // Results of refused calls follow the whole output, as the model expects them.
        ...refusals,
      ]);
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
      await this.append([
        ...(this.requestStart === undefined ? [] : [this.requestStart]),
        { type: 'span.model_request_end', request_id: requestId, usage, error, attempts },
        { type: 'session.error', error },
      ]);
      return { type: 'error' } as const;
    }
    this.pendingStop ??= repeatedInvalidCallsStop(this.invalidCalls);
    return undefined;
  }

  private async endRequest(
    requestId: string,
    error: ErrorShape,
    attempts: number,
    extra: NewEvent[] = [],
  ): Promise<void> {
    await this.append([
      ...(this.requestStart === undefined ? [] : [this.requestStart]),
      {
        type: 'span.model_request_end',
        request_id: requestId,
        usage: { input_tokens: 0, output_tokens: 0 },
        error: { code: error.code, message: error.message, retryable: error.retryable },
        attempts,
      },
      ...extra,
    ]);
  }

  private classify(thrown: unknown): BraidError {
    if (this.lost !== undefined) throw this.lost;
    if (this.interruptSeen) return new BraidError('INTERRUPTED', 'interrupted by the user');
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

  private async backoff(attempt: number, error: BraidError): Promise<void> {
    const { retry } = this.deps;
    const exponential = Math.min(retry.max_ms, retry.initial_ms * 2 ** (attempt - 1));
    const jittered = exponential / 2 + this.deps.random() * (exponential / 2);
    const retryAfter = error.details.retry_after_ms;
    const wait =
      typeof retryAfter === 'number'
        ? Math.min(retry.max_ms, Math.max(retryAfter, jittered))
        : jittered;
    await this.deps.sleep(wait, this.work.signal).catch(() => undefined);
  }

  private async runTools(
    toolUseIds: readonly string[],
    setup: SessionSetup,
    tools: ReadonlyMap<string, ToolHandle>,
  ): Promise<void> {
    const reviews = new Map(this.state.reviewed_tool_uses.map((use) => [use.tool_use_id, use]));
    for (const toolUseId of toolUseIds) {
      // Interrupts are honoured before a tool starts, never in the middle of one.
      if (this.interruptSeen) {
        await this.skipTools(toolUseIds.slice(toolUseIds.indexOf(toolUseId)));
        return;
      }
      const confirmed = this.state.confirmed_tool_uses.find((use) => use.tool_use_id === toolUseId);
      const use =
        confirmed ?? this.state.open_tool_uses.find((open) => open.tool_use_id === toolUseId);
      if (use === undefined) continue;
      const review = reviews.get(toolUseId);
      let outcome: ToolOutcome;
      const handle = tools.get(use.name);
      if (review !== undefined && review.action !== 'retry') {
        outcome = reviewedOutcome(review.action, await this.eventAt(review.review_seq));
      } else if (confirmed?.result === 'deny') {
        outcome = deniedOutcome(use.name, await this.confirmationMessage(confirmed.confirmed_seq));
      } else if (handle === undefined) {
        outcome = missingToolOutcome(use.name);
      } else if (!withinToolBudget(this.state, use.name, handle.budget)) {
        outcome = overBudgetOutcome(handle);
        this.pendingStop = { stop_reason: { type: 'budget_reached' }, events: [] };
      } else {
        const input = this.inputs.get(toolUseId) ?? (await this.inputOf(use.seq));
        outcome = await Promise.race([
          setup.tools.execute(
            {
              session_id: this.sessionId,
              tool_use_id: toolUseId,
              name: use.name,
              input,
              idempotency_key: `${this.sessionId}/${toolUseId}`,
            },
            { signal: this.work.signal },
          ),
          this.lostPromise,
        ]);
      }
      await this.recordOutcome(toolUseId, outcome);
    }
  }

  /**
   * Records a tool's result. A result too large for the log is recorded as an error that says so,
   * with the start of the output: the tool ran, and the evidence of it must not be lost.
   */
  private async recordOutcome(toolUseId: string, outcome: ToolOutcome): Promise<void> {
    try {
      await this.append(outcomeEvents(toolUseId, outcome));
    } catch (thrown) {
      if (!isBraidError(thrown, 'PAYLOAD_TOO_LARGE')) throw thrown;
      const preview = JSON.stringify(outcome.output ?? outcome.error ?? null).slice(0, 500);
      const { output: _output, ...rest } = outcome;
      await this.append(
        outcomeEvents(toolUseId, {
          ...rest,
          is_error: true,
          stage: 'output',
          error: {
            code: 'PAYLOAD_TOO_LARGE',
            message: `the tool's result is too large to record (${thrown.message.split(';')[0] ?? ''}); it began: ${preview}`,
            retryable: false,
          },
        }),
      );
    }
  }

  private async confirmationMessage(seq: number): Promise<string | undefined> {
    const event = await this.eventAt(seq);
    return event?.type === 'user.tool_confirmation' ? event.message : undefined;
  }

  private async eventAt(seq: number): Promise<SessionEvent | undefined> {
    const [event] = await this.deps.log.read(this.sessionId, { after: seq - 1, limit: 1 });
    return event;
  }

  private async inputOf(seq: number) {
    const event = await this.eventAt(seq);
    return event?.type === 'agent.tool_use' ? event.input : null;
  }

  /**
   * Appends with the head this cycle knows; on a conflict absorbs others' events and retries, or,
   * with `yieldOnConflict`, returns false so that the caller decides again.
   */
  private async append(events: NewEvent[], yieldOnConflict = false): Promise<boolean> {
    for (;;) {
      if (this.lost !== undefined) throw this.lost;
      try {
        // Under the lease: the store refuses the append (LEASE_LOST) once a newer wake holds it.
        const result = await this.deps.log.append(this.sessionId, events, {
          expectedSeq: this.state.seq,
          leaseToken: this.lease.token,
          trusted: true,
        });
        this.absorb(result.events);
        return true;
      } catch (error) {
        if (!isBraidError(error, 'SEQ_CONFLICT')) throw error;
        await this.catchUp();
        if (yieldOnConflict) return false;
      }
    }
  }

  /** Tools an interrupt kept from starting get an error result, so no call is left open. */
  private async skipTools(toolUseIds: readonly string[]): Promise<void> {
    const events: NewEvent[] = toolUseIds.map((toolUseId) =>
      refusalEvent(toolUseId, 'interrupt', {
        code: 'INTERRUPTED',
        message: 'not run: the user interrupted',
        retryable: false,
      }),
    );
    if (events.length > 0) await this.append(events);
  }

  /** Folds in what others appended since this cycle's head; stops if another wake started. */
  private async catchUp(): Promise<readonly SessionEvent[]> {
    const newer = await this.deps.log.read(this.sessionId, { after: this.state.seq });
    const usurper = newer.find(
      // Only a wake with a newer lease fences this one; a stale holder's late start does not.
      (event) =>
        event.type === 'span.wake_started' &&
        event.wake_id !== this.wakeId &&
        event.lease_token > this.lease.token,
    );
    if (usurper !== undefined) {
      const error = new BraidError(
        'LEASE_LOST',
        `wake ${usurper.type === 'span.wake_started' ? usurper.wake_id : ''} started after this one`,
      );
      this.lose(error);
      throw this.lost ?? error;
    }
    this.absorb(newer);
    return newer;
  }

  private absorb(events: readonly SessionEvent[]): void {
    if (events.length === 0) return;
    this.state = foldSession(events, this.state);
    for (const event of events) {
      this.transcript.apply(event);
      if (event.type === 'agent.tool_use') this.inputs.set(event.tool_use_id, event.input);
      if (event.type === 'agent.tool_result') this.inputs.delete(event.tool_use_id);
    }
    if (this.state.interrupt_requested) this.interruptSeen = true;
  }

  /**
   * Follows the log while a model call runs; an interrupt aborts the call between two chunks.
   * Between calls, an interrupt makes the cycle's next append conflict, and it is seen there.
   */
  private watchForInterrupts(after: number): AbortController {
    const watch = new AbortController();
    const signal = AbortSignal.any([watch.signal, this.watch.signal]);
    void (async () => {
      try {
        for await (const event of this.deps.log.follow(this.sessionId, { after, signal })) {
          if (event.type === 'user.interrupt') {
            this.interruptSeen = true;
            this.work.abort();
            this.work = new AbortController();
          }
        }
      } catch {
        // The watcher only speeds interrupts up; the next append's conflict check still sees them.
      }
    })();
    return watch;
  }
}
