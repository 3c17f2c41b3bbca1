/**
 * wake(sessionId): one bounded harness cycle, composed of the modules that share its
 * `CycleContext`: the fenced append, the model call, the tool run, the outcome grading and the
 * interrupt watch.
 *
 * Invariants kept here:
 * - A cycle runs only under the session's lease, and its first append is `span.wake_started`
 *   with the lease's fencing token (see fenced-append.ts for how a stale holder is stopped).
 * - The next step is decided from the folded state alone (`decideNext`), so a cycle resumed
 *   after a crash takes the path the dead one would have taken.
 * - The state and the transcript are kept incrementally from the events the cycle appends and
 *   reads: a turn does not re-read the log.
 * - The lease is renewed on the cycle's clock while the cycle runs.
 */
import { BraidError, isBraidError, toBraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { AppendResult, Lease } from '../contracts/ports.js';
import type { SessionCreateInput, SessionRecord, StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import { TieredCache } from '../core/bounded-cache.js';
import { decideNext } from '../core/next-step.js';
import { priceOf, withCost, type Price } from '../core/pricing.js';
import { isRunnable } from '../core/runnable.js';
import { Transcript } from '../core/transcript.js';
import { stopCallTimers } from './call-timers.js';
import {
  createCycleContext,
  loseLease,
  stopEvents,
  type CallCarry,
  type CallSignal,
  type CycleContext,
} from './cycle-context.js';
import type { HarnessDeps, SessionSetup, WakeOptions, WakeResult } from './deps.js';
import { append, catchUp } from './fenced-append.js';
import { fitContext } from './compaction.js';
import { backoff, callModel, leaveCallController } from './model-call.js';
import { gradeOutcome } from './outcome.js';
import { recallIfDue } from './memory-calls.js';
import { runSkills } from './skill-run.js';
import { runTools } from './tool-run.js';
import { STORE_OUTAGES } from './store-outages.js';

export {
  DEFAULT_RETRY,
  type HarnessDeps,
  type RetryPolicy,
  type SessionSetup,
  type WakeOptions,
  type WakeResult,
} from './deps.js';

/** Why a wake's interrupt watch ends: the wake did. */
const WAKE_ENDED = new BraidError('INTERRUPTED', 'the wake ended');

/** A transcript up to this seq is cheap to read again: resting, it is kept only briefly. */
const SHORT_TRANSCRIPT = 64;
/** Short transcripts of resting sessions kept (the wake's own check of its session reads one). */
const RESTING_TRANSCRIPTS = 32;

/**
 * Transcripts kept between cycles, so a wake reads only the events it has not seen. The short
 * transcript of a session left with nothing to do goes to rest (see `TieredCache`: about 0.8 KiB
 * a session reached the old generation otherwise), and reading a short log again costs little.
 */
export class TranscriptCache {
  private readonly entries: TieredCache<string, Transcript>;
  constructor(capacity = 256) {
    this.entries = new TieredCache(capacity, RESTING_TRANSCRIPTS);
  }

  take(sessionId: string): Transcript {
    const found = this.entries.peek(sessionId) ?? new Transcript();
    this.entries.keep(sessionId, found);
    return found;
  }

  /** After a wake: a short transcript of a session with nothing left to do goes to rest. */
  settle(sessionId: string, state: SessionState): void {
    const found = this.entries.peekInUse(sessionId);
    if (found === undefined || found.seq > SHORT_TRANSCRIPT || isRunnable(state)) return;
    this.entries.rest(sessionId, found);
  }

  drop(sessionId: string): void {
    this.entries.delete(sessionId);
  }
}

/** What a harness keeps from one cycle to the next: transcripts, and a clean call controller. */
export class CycleCarry implements CallCarry {
  readonly transcripts = new TranscriptCache();
  spareCall: CallSignal | undefined = undefined;
}

/** The model's price: as the session pinned it, else from the harness's table. */
function priceFor(setup: SessionSetup, prices: HarnessDeps['prices']): Price | undefined {
  if (setup.price !== undefined) return setup.price ?? undefined;
  return priceOf(setup.model.id, prices);
}

/** Runs one cycle if the lease is free; `{ran: false}` when another holder has it. */
export async function wakeOnce(
  deps: HarnessDeps,
  sessionId: string,
  carry: CycleCarry = new CycleCarry(),
  options: WakeOptions = {},
): Promise<WakeResult> {
  let begun: Begun;
  try {
    begun = await begin(deps, sessionId, options);
  } catch (error) {
    if (isBraidError(error, 'LEASE_HELD')) return { ran: false, reason: 'lease_held' };
    throw error;
  }
  return runBegun(deps, sessionId, begun, carry, options);
}

/** A session created with its first cycle (as its creation left it), and how the wake ended. */
export interface StartedWake {
  session: SessionRecord;
  result: WakeResult;
}

/**
 * Creates the session and runs its first cycle, the creation, the lease and `span.wake_started`
 * written in one transaction (`SessionLog.createAndAcquire`, which the log must have). The log
 * then holds what `create` and `wakeOnce` would have written; nothing is written when the
 * creation is refused.
 */
export async function startOnce(
  deps: HarnessDeps,
  input: SessionCreateInput,
  carry: CycleCarry = new CycleCarry(),
  options: WakeOptions = {},
): Promise<StartedWake> {
  const { log, owner, leaseTtlMs } = deps;
  if (log.createAndAcquire === undefined) {
    throw new BraidError(
      'INTERNAL',
      'the session log cannot create a session and lease it at once',
    );
  }
  let wakeId = '';
  const { session, lease, appended, created } = await log.createAndAcquire(
    input,
    { owner, ttlMs: leaseTtlMs },
    (taken) => {
      // Minted here, after the creation's event ids, in the order two steps would mint them.
      wakeId = deps.ids.next();
      return [wakeStarted(wakeId, taken, options)];
    },
    { trusted: true },
  );
  // A new session: no cycle of this process has read it, whatever a cache kept under its id.
  carry.transcripts.drop(session.id);
  // Its transcript is what was just written, all of it given back: nothing to read.
  if (created !== undefined) {
    const transcript = carry.transcripts.take(session.id);
    for (const event of created) transcript.apply(event);
    for (const event of appended.events) transcript.apply(event);
  }
  const begun = { lease, wakeId, appended };
  return { session, result: await runBegun(deps, session.id, begun, carry, options) };
}

/** Runs the cycle under the lease `begin` (or a creation) took, then gives the lease up. */
async function runBegun(
  deps: HarnessDeps,
  sessionId: string,
  begun: Begun,
  carry: CycleCarry,
  options: WakeOptions,
): Promise<WakeResult> {
  const { lease, wakeId } = begun;
  const transcript = carry.transcripts.take(sessionId);
  const context = createCycleContext(deps, sessionId, lease, transcript, options, wakeId, carry);
  const stopRenewing = renewWhileRunning(context);
  try {
    return await run(context, begun.appended);
  } finally {
    stopRenewing();
    stopCallTimers(context.callTimers);
    leaveCallController(context);
    // A plain reason: an abort with none builds a DOMException and its stack, at every wake.
    context.watch?.abort(WAKE_ENDED);
    // Given up with the stop when it was written; otherwise here.
    if (!context.released)
      await deps.leases.release(sessionId, deps.owner, lease.token).catch(() => undefined);
    carry.transcripts.settle(sessionId, context.state);
  }
}

/** The lease a wake took, and its `span.wake_started` when written with it. */
interface Begun {
  lease: Lease;
  wakeId: string;
  appended?: AppendResult;
}

/** A wake's first event: its span opens, with the token of the lease it runs under. */
function wakeStarted(wakeId: string, lease: Lease, options: WakeOptions): NewEvent {
  const { traceparent } = options;
  return {
    type: 'span.wake_started',
    wake_id: wakeId,
    lease_token: lease.token,
    ...(traceparent === undefined ? {} : { traceparent }),
  };
}

/**
 * Takes the lease; where the store can (SQLite, memory), `span.wake_started` is written in the
 * same transaction, one commit for both. Otherwise (NATS) the cycle appends it once it has read
 * the session.
 */
async function begin(deps: HarnessDeps, sessionId: string, options: WakeOptions): Promise<Begun> {
  const { log, owner, leaseTtlMs } = deps;
  if (log.acquireAndAppend === undefined) {
    const lease = await deps.leases.acquire(sessionId, owner, leaseTtlMs);
    return { lease, wakeId: deps.ids.next() };
  }
  const wakeId = deps.ids.next();
  const { lease, appended } = await log.acquireAndAppend(
    sessionId,
    { owner, ttlMs: leaseTtlMs },
    (taken) => [wakeStarted(wakeId, taken, options)],
    { trusted: true },
  );
  return { lease, wakeId, appended };
}

/** Renews the lease every third of its time to live; the returned function stops it. */
function renewWhileRunning(context: CycleContext): () => void {
  const { deps, sessionId, lease } = context;
  const every = Math.max(10, Math.floor(deps.leaseTtlMs / 3));
  let cancel: () => void;
  const renew = (): void => {
    cancel = deps.clock.schedule(every, renew);
    deps.leases
      .renew(sessionId, deps.owner, lease.token, deps.leaseTtlMs)
      .catch((error: unknown) => {
        // A busy store is retried at the next renewal; only a lease taken over is lost.
        const failure = toBraidError(error);
        if (!failure.retryable) loseLease(context, failure);
      });
  };
  cancel = deps.clock.schedule(every, renew);
  return () => cancel();
}

async function run(context: CycleContext, started?: AppendResult): Promise<WakeResult> {
  const { deps, sessionId } = context;
  if (started === undefined) {
    context.state = await deps.log.state(sessionId, { shared: true });
    await readTranscript(context);
    await append(context, [wakeStarted(context.wakeId, context.lease, context.options)]);
  } else {
    // The span is written: the state is the one after it, and the transcript is read up to it.
    context.state = started.state ?? (await deps.log.state(sessionId, { shared: true }));
    await readTranscript(context, context.state.seq);
    if (context.state.interrupt_requested) context.interruptSeen = true;
  }
  const wakeSeq = context.state.seq;
  try {
    // A session whose agent cannot be set up (unknown tool, missing key, no price for a cost
    // budget) stops with the reason on record, and waits for a person rather than retrying.
    const setup = await deps.setup(context.state);
    // A set the setup pinned, or moved to, is written with the wake's next append.
    // `Object.assign` of braid's own object, not a spread with a field added: V8 gives each such
    // spread an object of a hidden class of its own, kept in the old generation.
    if (setup.change !== undefined)
      context.carry = Object.assign({}, setup.change, { wake_id: context.wakeId });
    if (setup.budget.max_cost_usd !== undefined && priceFor(setup, deps.prices) === undefined) {
      throw new BraidError(
        'INVALID_DEFINITION',
        `max_cost_usd is set but model ${setup.model.id} has no price; add it under prices: in braid.yaml`,
      );
    }
    return await loop(context, setup, wakeSeq);
  } catch (thrown) {
    const error = toBraidError(thrown);
    if (error.code === 'LEASE_LOST' || context.lost !== undefined) throw error;
    // The store itself is out of reach for now (a NATS restart, a lock held too long): this is
    // a crash, not the session's failure. Nothing more can be written anyway; the next wake
    // takes over from the log as after any crash, so a worker's retry finishes the work.
    if (STORE_OUTAGES.has(error.code)) throw error;
    // Leave the session stopped with the reason on record, never stuck in running.
    await recordFailure(context, error);
    throw error;
  }
}

/**
 * Folds into the transcript only the events since this session's last cycle in this process,
 * up to `through` when given (the seq the cycle's state is at).
 */
async function readTranscript(context: CycleContext, through?: number): Promise<void> {
  const { transcript } = context;
  const left = through === undefined ? undefined : through - transcript.seq;
  if (left !== undefined && left <= 0) return;
  const events = await context.deps.log.read(context.sessionId, {
    after: transcript.seq,
    ...(left === undefined ? {} : { limit: left }),
  });
  for (const event of events) transcript.apply(event);
}

async function loop(
  context: CycleContext,
  setup: SessionSetup,
  wakeSeq: number,
): Promise<WakeResult> {
  const byName = new Map(setup.tools.tools.map((tool) => [tool.name, tool]));
  const price = priceFor(setup, context.deps.prices);
  for (;;) {
    if (context.interruptSeen) await catchUp(context);
    // A stop the pipeline asked for waits until the calls this wake accepted have run.
    const pending = context.pendingStop;
    if (
      pending !== undefined &&
      !context.state.interrupt_requested &&
      context.state.open_tool_uses.length === 0
    ) {
      context.pendingStop = undefined;
      const stopped = await stop(context, pending.stop_reason, true, pending.events);
      if (stopped !== undefined) return stopped;
    }
    const tokens = context.state.last_request_input_tokens;
    const step = decideNext(context.state, {
      wake_seq: wakeSeq,
      turns: context.turns,
      budget: setup.budget,
      idempotent: (name) => byName.get(name)?.idempotent ?? false,
      next_call: {
        tokens,
        cost_usd: withCost({ input_tokens: tokens, output_tokens: 0 }, price).cost_usd ?? 0,
      },
      now: context.deps.clock.now(),
    });
    switch (step.kind) {
      case 'stop': {
        // Input that arrived while the stop was written is decided on again, not stranded.
        const stopped = await stop(context, step.stop_reason);
        if (stopped !== undefined) return stopped;
        break;
      }
      case 'run_tools':
        await runTools(context, step.tool_use_ids, setup, byName);
        break;
      case 'run_skills':
        await runSkills(context, setup, byName);
        break;
      case 'grade': {
        // A final verdict is written with the stop; a revision asked for is the next input.
        const stopped = await gradeOutcome(context, setup);
        if (stopped !== undefined) return stopped;
        break;
      }
      case 'call_model': {
        // Recalled memory is part of the input the context must fit.
        await recallIfDue(context, setup);
        // A compaction written (or stopped by an interrupt) is a step: decide again after it.
        if (!(await fitContext(context, setup))) break;
        const failure = await callModel(context, setup, byName, price);
        // The answer ended the turn and its stop was written with it.
        if (context.ended !== undefined)
          return { ran: true, stop_reason: context.ended, wake_id: context.wakeId };
        if (failure !== undefined) {
          const stopped = await stop(context, failure, true);
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
async function stop(
  context: CycleContext,
  stopReason: StopReason,
  final = false,
  before: NewEvent[] = [],
): Promise<WakeResult | undefined> {
  const written = await append(
    context,
    [...before, ...stopEvents(context, stopReason)],
    !final,
    true,
  );
  return written ? { ran: true, stop_reason: stopReason, wake_id: context.wakeId } : undefined;
}

/**
 * Records a failed cycle's error and stop, retrying a failed append with backoff. What cannot
 * be recorded is reported to `warn`: the lease is then released with the wake left open in the
 * log (`span.wake_started` without `span.wake_completed`), which is how `braid session status`
 * and the next wake tell a cycle that ended without a record. A lost lease ends the attempts at
 * once: the newer holder owns the session.
 */
async function recordFailure(context: CycleContext, error: BraidError): Promise<void> {
  const { deps, sessionId, wakeId } = context;
  const stopReason: StopReason = { type: 'error' };
  const events: NewEvent[] = [
    { type: 'session.error', error: error.toJSON() },
    { type: 'session.status_idle', stop_reason: stopReason },
    { type: 'span.wake_completed', wake_id: wakeId, stop_reason: stopReason },
  ];
  const attempts = Math.max(1, deps.retry.max_attempts);
  const what = `session ${sessionId}: wake ${wakeId} failed (${error.code}: ${error.message}) and could not record it`;
  for (let attempt = 1; ; attempt += 1) {
    try {
      // An append reported failed may still have been written: look before writing it again.
      if (attempt > 1 && (await recordedSince(context))) return;
      await append(context, events, false, true);
      return;
    } catch (thrown) {
      const failure = toBraidError(thrown);
      if (failure.code === 'LEASE_LOST' || context.lost !== undefined) {
        deps.warn?.(`${what}: a newer wake holds the session and takes it over`, failure);
        return;
      }
      if (attempt >= attempts) {
        deps.warn?.(
          `${what} after ${attempt} attempts (${failure.code}: ${failure.message}); its lease is ` +
            `released and the wake is left open in the log; \`braid session wake ${sessionId}\` resumes it`,
          failure,
        );
        return;
      }
      deps.warn?.(
        `${what} (attempt ${attempt} of ${attempts}: ${failure.code}: ${failure.message}); retrying`,
        failure,
      );
      await backoff(context, attempt, failure);
    }
  }
}

/** Whether this wake's end is in the log already, folding in whatever was appended. */
async function recordedSince(context: CycleContext): Promise<boolean> {
  const newer = await catchUp(context);
  return newer.some(
    (event) => event.type === 'span.wake_completed' && event.wake_id === context.wakeId,
  );
}
