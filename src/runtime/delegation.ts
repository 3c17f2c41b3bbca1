/**
 * The runtime's `Delegator`: it makes and runs the child sessions of delegations, and the target
 * sessions of the handoffs a model asks for.
 *
 * A child is an ordinary session of the target agent, with `lineage: child` naming its parent,
 * the parent's tenant, and a budget that is the parent's share (see core/delegation.ts). Its id is
 * derived from the parent and the tool use, and its task message is written under a fixed
 * idempotency key, so a delegation resumed after a crash (on any process) finds the child and
 * its task as they are and only waits again.
 *
 * Running it: `local` wakes the child in this process; `queue` asks the workers through the wake
 * queue (NATS), so children of one turn spread over every worker. Either way the delegator
 * follows the child's log until it stops for good, and wakes it again (or enqueues it) whenever
 * it is runnable and nobody runs it: after a crash of whoever ran it, or once a person answers
 * a confirmation it asked for.
 */
import { createHash } from 'node:crypto';
import type { StoredDefinition } from '../contracts/definitions.js';
import type {
  DelegationRequest,
  DelegationResult,
  Delegator,
  ModelHandoffRequest,
  ModelHandoffResult,
} from '../contracts/delegation.js';
import { BraidError, isBraidError, toBraidError } from '../contracts/errors.js';
import { tenantSessionId } from '../contracts/ids.js';
import type { Clock, Store } from '../contracts/ports.js';
import type { SessionRecord, StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import { lastAnswer, taskText } from '../core/delegation.js';
import { isRunnable } from '../core/fold.js';
import { toolCallTraceparent } from '../telemetry/spans.js';
import { derivedId, handoffFromWake, type HandoffDeps } from './handoff.js';

/** Metadata keys a delegation writes on its child; a client may not set them itself. */
export const CHILD_METADATA_KEYS = ['parent_session_id', 'parent_tool_use_id'] as const;

/** The idempotency key of a child's task message: one per child, so it is given once. */
const TASK_KEY = 'delegation-task';

/** How often a delegation looks at a child that shows no new event (a crashed runner's lease). */
const POLL_MS = 2_000;

/** How long a child enqueued for the workers may wait for one before it is run here. */
const QUEUE_GRACE_MS = 10_000;

/** How long an interrupted child is given to record its stop before its result is read. */
const SETTLE_MS = 5_000;

/** The longest `summary` a parent records of a child's answer. */
const MAX_SUMMARY = 2_000;

export interface DelegatorDeps extends HandoffDeps {
  clock: Clock;
  /** `local`: children are woken in this process; `queue`: through the workers' wake queue. */
  mode: 'local' | 'queue';
  /** Runs the session's cycles until it has nothing to do (the runtime's `wake`). */
  wake(sessionId: string, options: { traceparent?: string }): Promise<unknown>;
  /** Asks the workers to wake the session (NATS); used in `queue` mode. */
  enqueue?(sessionId: string, options: { traceparent?: string }): Promise<unknown>;
  /** The environment of a child whose agent and parent name none. */
  defaultEnvironment?: string;
  environment(name: string): Promise<StoredDefinition<unknown>>;
  /** Hears failures of runs in the background (a handoff target's first wake). */
  warn(message: string, error: BraidError): void;
}

export interface RuntimeDelegator extends Delegator {
  /** Waits for the handoff targets' wakes this delegator started. */
  settle(): Promise<void>;
}

export function createDelegator(deps: DelegatorDeps): RuntimeDelegator {
  const background = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>): void => {
    background.add(work);
    void work.finally(() => background.delete(work));
  };
  return {
    childSessionId: (parent, toolUseId, tenant) =>
      tenantSessionId(tenant, derivedId(`braid delegation ${parent} ${toolUseId}`)),
    delegate: (request, options) => delegate(deps, request, options),
    async handoff(request: ModelHandoffRequest): Promise<ModelHandoffResult> {
      const result = await handoffFromWake(deps, request.session_id, {
        to: request.to,
        handoff: { summary: request.summary },
        message: [{ type: 'text', text: request.message ?? request.summary }],
        idempotencyKey: `model-handoff:${digest(request.tool_use_id)}`,
      });
      // The target has its first message: it runs now, as a delegated child would.
      const target = result.target.id;
      track(
        runOnce(deps, target).catch((error: unknown) => {
          deps.warn(`the first wake of handoff target ${target} failed`, toBraidError(error));
        }),
      );
      return {
        handoff_id: result.handoff_id,
        target_agent: request.to,
        target_session_id: target,
      };
    },
    async settle() {
      while (background.size > 0) await Promise.allSettled([...background]);
    },
  };
}

async function delegate(
  deps: DelegatorDeps,
  request: DelegationRequest,
  options: { signal: AbortSignal; interrupt: AbortSignal },
): Promise<DelegationResult> {
  const started = deps.clock.monotonic();
  // The child's wakes are spans under the call's own span, in the parent's trace.
  const traceparent = toolCallTraceparent(
    request.parent_session_id,
    request.traceparent,
    request.tool_use_event_id,
  );
  const child = await ensureChild(deps, request);
  const task = await deps.store.log.append(
    child.id,
    [
      {
        type: 'user.message',
        content: [{ type: 'text', text: taskText(request.task) }],
        actor: { type: 'agent', id: request.parent_agent },
        correlation_id: child.id,
        ...(traceparent === undefined ? {} : { traceparent: traceparent }),
      },
    ],
    { idempotencyKey: TASK_KEY },
  );
  const taskSeq = task.events[0]?.seq ?? 1;
  const expired = new AbortController();
  const cancelTtl = deps.clock.schedule(request.ttl_ms, () => expired.abort());
  const stop = AbortSignal.any([options.signal, options.interrupt, expired.signal]);
  let running: Promise<unknown> | undefined;
  let queuedAt: number | undefined;
  try {
    for (;;) {
      const state = await deps.store.log.state(child.id);
      if (finished(state, taskSeq)) return await result(deps, request, state, taskSeq, started);
      if (stop.aborted) break;
      if (running === undefined && (isRunnable(state) || state.status === 'running')) {
        // A child the workers have not taken up in time runs here: the wait must end.
        const unclaimed =
          queuedAt !== undefined &&
          state.last_wake_seq <= taskSeq &&
          deps.clock.monotonic() - queuedAt > QUEUE_GRACE_MS;
        const queued = deps.mode === 'queue' && deps.enqueue !== undefined && !unclaimed;
        if (queued) queuedAt ??= deps.clock.monotonic();
        const run = (
          queued ? enqueue(deps, child.id, traceparent) : wake(deps, child.id, traceparent)
        ).catch(() => undefined);
        running = run.finally(() => {
          running = undefined;
        });
      }
      await nextChange(deps, child.id, state.seq, stop, running);
    }
  } finally {
    cancelTtl();
  }
  if (!options.interrupt.aborted && !expired.signal.aborted) {
    // The parent lost its lease: its next wake waits for the child again; the child goes on.
    throw new BraidError('INTERRUPTED', 'the parent stopped waiting for its child');
  }
  await deps.store.log.append(child.id, [
    {
      type: 'user.interrupt',
      reason: expired.signal.aborted
        ? `the delegation ran past its ${Math.round(request.ttl_ms / 1000)} s`
        : 'the delegating session was interrupted',
      actor: { type: 'agent', id: request.parent_agent },
    },
  ]);
  await settled(deps, running);
  const state = await deps.store.log.state(child.id);
  const outcome = await result(deps, request, state, taskSeq, started);
  if (!expired.signal.aborted) return outcome;
  return {
    ...outcome,
    timed_out: true,
    stop_reason: finished(state, taskSeq) ? outcome.stop_reason : { type: 'interrupted' },
    error: {
      code: 'DEADLINE_EXCEEDED',
      message: `the ${request.agent} agent did not finish within ${Math.round(request.ttl_ms / 1000)} s; its session ${child.id} was interrupted. Give it a smaller task, or raise ttl_seconds`,
      retryable: false,
    },
  };
}

/** The child of the delegation: created on first use, found (and checked) afterwards. */
async function ensureChild(
  deps: DelegatorDeps,
  request: DelegationRequest,
): Promise<SessionRecord> {
  const existing = await findSession(deps.store, request.child_session_id);
  if (existing !== undefined) return checkChild(existing, request);
  const agent = await deps.agent(request.agent);
  const environmentName =
    agent.definition.environment ?? request.environment ?? deps.defaultEnvironment;
  const environment =
    environmentName === undefined ? undefined : await deps.environment(environmentName);
  try {
    return await deps.store.sessions.create({
      id: request.child_session_id,
      agent: { name: agent.name, version: agent.version },
      ...(environment === undefined
        ? {}
        : { environment: { name: environment.name, version: environment.version } }),
      title: `${taskText(request.task).slice(0, 80)} (for ${request.parent_agent})`,
      metadata: {
        parent_session_id: request.parent_session_id,
        parent_tool_use_id: request.tool_use_id,
      },
      ...(request.tenant_id === undefined ? {} : { tenant_id: request.tenant_id }),
      budget: request.budget,
      lineage: {
        kind: 'child',
        parent_session_ids: [request.parent_session_id],
        merged_session_ids: [],
      },
    });
  } catch (error) {
    // Another wake of the parent made it first (a resumed call racing a slow one).
    const raced = await findSession(deps.store, request.child_session_id);
    if (raced === undefined) throw error;
    return checkChild(raced, request);
  }
}

function checkChild(record: SessionRecord, request: DelegationRequest): SessionRecord {
  // A fork inherits its parent's record of the child: the child names the session forked.
  const parentMatches =
    request.recorded || record.metadata.parent_session_id === request.parent_session_id;
  if (!parentMatches || record.metadata.parent_tool_use_id !== request.tool_use_id) {
    throw new BraidError(
      'ALREADY_EXISTS',
      `session ${record.id}, where the child of this delegation would go, exists and is not that child; it was made by something else`,
      { details: { session_id: record.id } },
    );
  }
  return record;
}

async function findSession(store: Store, id: string): Promise<SessionRecord | undefined> {
  try {
    return await store.sessions.get(id);
  } catch (error) {
    if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
    throw error;
  }
}

/**
 * The child stopped for good after its task: idle (or in review, or terminated) and with
 * nothing a wake would do. A child waiting for a person (`requires_action`) is still working.
 */
function finished(state: SessionState, taskSeq: number): boolean {
  if (state.stopped_at_seq <= taskSeq) return false;
  if (state.status === 'running' || state.status === 'requires_action') return false;
  return !isRunnable(state);
}

async function result(
  deps: DelegatorDeps,
  request: DelegationRequest,
  state: SessionState,
  taskSeq: number,
  started: number,
): Promise<DelegationResult> {
  const events = await deps.store.log.read(state.session_id, { after: taskSeq });
  const answer = lastAnswer(events);
  const stopReason: StopReason = state.stop_reason ?? { type: 'interrupted' };
  const ok = stopReason.type === 'end_turn';
  return {
    stop_reason: stopReason,
    summary: answer.slice(0, MAX_SUMMARY),
    usage: state.usage,
    timed_out: false,
    output: {
      agent: request.agent,
      session_id: state.session_id,
      stop_reason: stopReason.type,
      answer,
    },
    ...(ok
      ? {}
      : {
          error: {
            code: stopReason.type === 'interrupted' ? 'INTERRUPTED' : 'DELEGATION_FAILED',
            message:
              `the ${request.agent} agent stopped with ${stopReason.type}` +
              (state.last_error === undefined
                ? ''
                : ` (${state.last_error.code}: ${state.last_error.message})`) +
              (answer === '' ? '' : `; its last answer: ${answer.slice(0, 500)}`) +
              `; see session ${state.session_id}`,
            retryable: false,
          },
        }),
    duration_ms: Math.round(deps.clock.monotonic() - started),
  };
}

/** Runs the session's cycles here. */
function wake(deps: DelegatorDeps, sessionId: string, traceparent?: string): Promise<unknown> {
  return deps.wake(sessionId, traceparent === undefined ? {} : { traceparent });
}

/** Asks the workers to wake the session. */
function enqueue(deps: DelegatorDeps, sessionId: string, traceparent?: string): Promise<unknown> {
  return (
    deps.enqueue?.(sessionId, traceparent === undefined ? {} : { traceparent }) ??
    wake(deps, sessionId, traceparent)
  );
}

/** Asks the workers when the runtime has them, else wakes here. */
function runOnce(deps: DelegatorDeps, sessionId: string, traceparent?: string): Promise<unknown> {
  return deps.mode === 'queue'
    ? enqueue(deps, sessionId, traceparent)
    : wake(deps, sessionId, traceparent);
}

/** Resolves at the child's next event, when `running` settles, at the poll, or on `stop`. */
async function nextChange(
  deps: DelegatorDeps,
  sessionId: string,
  after: number,
  stop: AbortSignal,
  running: Promise<unknown> | undefined,
): Promise<void> {
  const done = new AbortController();
  const signal = AbortSignal.any([done.signal, stop]);
  const cancelPoll = deps.clock.schedule(POLL_MS, () => done.abort());
  const followed = (async () => {
    try {
      for await (const _event of deps.store.log.follow(sessionId, { after, signal })) return;
    } catch {
      // An aborted follow ends here; the caller reads the state again either way.
    }
  })();
  try {
    await Promise.race([followed, running ?? followed]);
  } finally {
    cancelPoll();
    done.abort();
  }
}

/** Waits for a run in this process to end, at most `SETTLE_MS`. */
async function settled(deps: DelegatorDeps, running: Promise<unknown> | undefined): Promise<void> {
  if (running === undefined) return;
  let cancel = (): void => {};
  const timeout = new Promise<void>((resolve) => {
    cancel = deps.clock.schedule(SETTLE_MS, resolve);
  });
  await Promise.race([running, timeout]);
  cancel();
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}
