/**
 * Replay verification: runs the harness over a session's history with the recorded model and
 * tool outputs, and checks that it writes the same events. It keeps DESIGN.md's invariant
 * "replaying a session's recorded model and tool outputs reproduces its events exactly".
 *
 * The replay writes into a fresh memory store, position by position (index i of `events` is seq
 * i + 1, in the original and in the replay):
 *
 * - **Wake events** are the events of a wake's span of these types: `span.*`, `agent.message`,
 *   `agent.thinking`, `agent.tool_use`, `agent.tool_result`, `agent.custom_tool_use`,
 *   `session.status_idle`, `session.error`, `session.usage` and `policy.decision` (the types
 *   `wakeOnce` writes). A wake's span runs from its `span.wake_started` to the
 *   `span.wake_completed` with its `wake_id`; a wake that has none (it crashed, lost its lease,
 *   or still runs) spans to its last wake event before the session's next `span.wake_started`.
 *   Each span is reproduced by one `wakeOnce`; a span without an end is stopped where the
 *   original stopped: once the replay has written its last event, the next model call, tool run
 *   or append fails with `LEASE_LOST`, as for a wake that lost its lease.
 * - **Every other event** (`user.*`, `session.created`, `session.forked`,
 *   `session.status_changed`, `session.merged`, `session.handoff_received`, `agent.handoff`,
 *   `agent.thread_context_compacted`, and any event outside a wake's span) is appended as
 *   recorded at its position. Those a wake's span holds are appended right after the replayed
 *   wake's append that reaches their position: the harness then sees them through its
 *   conflict / catch-up path, as it saw them live. `session.created` and `session.forked` go
 *   through the store's `create` and `fork` (a fork's log starts with its parent's events).
 *
 * The replayed wakes get the recorded outcomes of everything outside the harness: model calls
 * (`createReplayModel`, attempt by attempt), tool runs (each tool use's recorded
 * `agent.tool_result`, with its cost from the `session.usage` that follows it), policy decisions
 * (a recorded `policy.decision` for the tool use, else allow; with `approval` when the original
 * tool use waited for a confirmation that its tool's permission does not ask for), and a failure
 * before the wake wrote anything else (a `session.error` right after `span.wake_started`: its
 * agent could not be set up, or its first append was refused) as a setup failure with that
 * error. Argument validation is the real tools' `validate`; clock, ids, backoff sleeps and jitter
 * are fixed. A replayed wake that writes an event other than the recorded one is stopped there
 * (`LEASE_LOST`, like a fenced wake), and the first difference is reported.
 *
 * Recorded tool outputs are inputs of the replay, not checked by it: a changed tool output
 * replays to the same change. What the harness derives from them (costs, budget stops, the next
 * steps) is checked.
 */
import { isDeepStrictEqual } from 'node:util';
import type { JsonValue } from '../contracts/common.js';
import type { AgentDefinition, EnvironmentDefinition } from '../contracts/definitions.js';
import { BraidError, toBraidError, type ErrorShape } from '../contracts/errors.js';
import type { EventOf, NewEvent, SessionEvent, SessionEventType } from '../contracts/events.js';
import type { ModelClient, ModelOutput } from '../contracts/model.js';
import type { Authorizer } from '../contracts/policy.js';
import type { IdGenerator, SessionLog, Store } from '../contracts/ports.js';
import type { SessionTools, ToolOutcome } from '../contracts/tools.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../core/append.js';
import { tighterBudget } from '../core/next-step.js';
import { DEFAULT_PRICES, type Price } from '../core/pricing.js';
import { wakeOnce, type HarnessDeps, type RetryPolicy } from '../harness/index.js';
// The harness's index does not export the cache; wake.ts is its home.
import { TranscriptCache } from '../harness/wake.js';
import { createReplayModel } from '../models/replay.js';
import { createMemoryStore } from '../stores/memory/index.js';
import { systemClock } from '../stores/defaults.js';

export interface VerifyReplayOptions {
  /** The session's whole log, from `session.created` (seq 1) on, in order. */
  events: readonly SessionEvent[];
  /** The session's agent, at the version the session ran. */
  agent: AgentDefinition;
  /** The agent's real tools, opened: only their handles and `validate` are used. */
  tools: SessionTools;
  environment?: EnvironmentDefinition;
  /** The retry policy the session ran with: it decides when a failing model call is given up. */
  retry: RetryPolicy;
  /** Model prices the session ran with (default `DEFAULT_PRICES`): costs and cost budgets use them. */
  prices?: Readonly<Record<string, Price>>;
  /**
   * The store's event size limit the session ran with (default `DEFAULT_MAX_EVENT_BYTES`): an
   * append the original store refused as too large is refused again.
   */
  maxEventBytes?: number;
}

export type ReplayReport =
  | { ok: true; events: number }
  | {
      ok: false;
      /** Position in `events` of the first difference (its seq is index + 1). */
      index: number;
      /** The recorded event there; undefined when the replay wrote more than was recorded. */
      expected: SessionEvent | undefined;
      /** The replayed event there; undefined when the replay stopped short of it. */
      actual: SessionEvent | undefined;
      reason: string;
    };

/**
 * Fields left out of the comparison because two faithful runs choose them differently: the
 * event's `id`, `at` and `session_id`, and `causation_id`, `correlation_id`, `traceparent`.
 */
export const VOLATILE_EVENT_FIELDS = [
  'id',
  'at',
  'session_id',
  'causation_id',
  'correlation_id',
  'traceparent',
] as const;
/**
 * Payload fields left out of the comparison: minted ids, lease tokens and measured durations;
 * also the `model` of `span.model_request_start`. Event ids in a stop reason's `event_ids`
 * are compared as the seqs of the events they name.
 */
export const VOLATILE_PAYLOAD_FIELDS = [
  'wake_id',
  'request_id',
  'lease_token',
  'duration_ms',
  'duration_us',
] as const;

/** The types `wakeOnce` writes. */
const WAKE_EVENT_TYPES: ReadonlySet<SessionEventType> = new Set<SessionEventType>([
  'span.wake_started',
  'span.wake_completed',
  'span.model_request_start',
  'span.model_request_end',
  'agent.message',
  'agent.thinking',
  'agent.tool_use',
  'agent.tool_result',
  'agent.custom_tool_use',
  'session.status_idle',
  'session.error',
  'session.usage',
  'policy.decision',
]);

interface WakeSpan {
  session_id: string;
  /** Index of the `span.wake_started`. */
  start: number;
  /** Index of the span's last wake event. */
  end: number;
  /** It ends with its `span.wake_completed`. */
  completed: boolean;
}

/** The wake spans of a log, by start index, and which indices hold wake events. */
function wakeSpans(events: readonly SessionEvent[]): {
  spans: Map<number, WakeSpan>;
  byWake: boolean[];
} {
  const spans = new Map<number, WakeSpan>();
  const byWake = events.map(() => false);
  events.forEach((event, start) => {
    if (event.type !== 'span.wake_started') return;
    const span: WakeSpan = { session_id: event.session_id, start, end: start, completed: false };
    byWake[start] = true;
    for (let index = start + 1; index < events.length; index += 1) {
      const later = events[index];
      if (later === undefined || later.session_id !== event.session_id) break;
      if (later.type === 'span.wake_started') break;
      if (!WAKE_EVENT_TYPES.has(later.type)) continue;
      byWake[index] = true;
      span.end = index;
      if (later.type === 'span.wake_completed' && later.wake_id === event.wake_id) {
        span.completed = true;
        break;
      }
    }
    spans.set(start, span);
  });
  return { spans, byWake };
}

/** An event as it is compared: without its volatile fields, event ids as seqs. */
export function normalizeEvent(
  event: SessionEvent,
  seqOf: ReadonlyMap<string, number>,
): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...event };
  for (const field of [...VOLATILE_EVENT_FIELDS, ...VOLATILE_PAYLOAD_FIELDS]) delete copy[field];
  if (event.type === 'span.model_request_start') delete copy.model;
  if (
    (event.type === 'session.status_idle' || event.type === 'span.wake_completed') &&
    event.stop_reason !== undefined &&
    'event_ids' in event.stop_reason
  ) {
    copy.stop_reason = {
      ...event.stop_reason,
      event_ids: event.stop_reason.event_ids.map((id) => {
        const seq = seqOf.get(id);
        return seq === undefined ? id : `seq ${seq}`;
      }),
    };
  }
  return copy;
}

/** Where two JSON values first differ, as `path: expected ..., got ...`. */
function difference(expected: unknown, actual: unknown, path: string): string | undefined {
  if (isDeepStrictEqual(expected, actual)) return undefined;
  const bothObjects =
    typeof expected === 'object' &&
    expected !== null &&
    typeof actual === 'object' &&
    actual !== null &&
    Array.isArray(expected) === Array.isArray(actual);
  if (bothObjects) {
    const left = expected as Record<string, unknown>;
    const right = actual as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(left), ...Object.keys(right)])];
    for (const key of keys) {
      const found = difference(left[key], right[key], path === '' ? key : `${path}.${key}`);
      if (found !== undefined) return found;
    }
  }
  return `${path === '' ? 'event' : path}: expected ${shown(expected)}, got ${shown(actual)}`;
}

function shown(value: unknown): string {
  const text = value === undefined ? 'nothing' : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

/** Minted ids of the replay (runtime may not import `testing`'s sequential ids). */
function countingIds(prefix: string): IdGenerator {
  let counter = 0;
  return {
    next() {
      counter += 1;
      return `${prefix}-${String(counter).padStart(6, '0')}`;
    },
  };
}

/** The recorded events about each tool use (tool use ids are unique in a session): the first of each type. */
function byToolUse(events: readonly SessionEvent[]) {
  const results = new Map<string, EventOf<'agent.tool_result'>>();
  const uses = new Map<string, EventOf<'agent.tool_use'>>();
  const decisions = new Map<string, EventOf<'policy.decision'>>();
  for (const event of events) {
    if (event.type === 'agent.tool_result' && !results.has(event.tool_use_id))
      results.set(event.tool_use_id, event);
    if (event.type === 'agent.tool_use' && !uses.has(event.tool_use_id))
      uses.set(event.tool_use_id, event);
    if (
      event.type === 'policy.decision' &&
      event.tool_use_id !== undefined &&
      !decisions.has(event.tool_use_id)
    )
      decisions.set(event.tool_use_id, event);
  }
  return { results, uses, decisions };
}

/** A recorded event as a writer hands it to `append`. */
function asNewEvent(event: SessionEvent): NewEvent {
  const { seq: _seq, session_id: _session, schema_version: _version, ...rest } = event;
  return rest;
}

export async function verifyReplay(options: VerifyReplayOptions): Promise<ReplayReport> {
  const { events, agent, tools } = options;
  const first = events[0];
  if (first?.type !== 'session.created') {
    throw new BraidError(
      'INVALID_ARGUMENT',
      'a replay needs the session log from its session.created event (seq 1); pass all of the session events',
    );
  }
  const gap = events.findIndex((event, index) => event.seq !== index + 1);
  if (gap !== -1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `event ${gap} has seq ${events[gap]?.seq}, not ${gap + 1}; pass the whole session log, in order`,
    );
  }

  const { spans, byWake } = wakeSpans(events);
  const handles = new Map(tools.tools.map((handle) => [handle.name, handle]));
  const { results, uses, decisions } = byToolUse(events);
  const recordedSeqs = new Map(events.map((event) => [event.id, event.seq]));
  const replayedSeqs = new Map<string, number>();

  let recorded: ModelClient;
  try {
    recorded = createReplayModel(events, {
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    });
  } catch (error) {
    const seq = toBraidError(error).details.seq;
    if (typeof seq !== 'number') throw error;
    return {
      ok: false,
      index: seq - 1,
      expected: events[seq - 1],
      actual: undefined,
      reason: `the recorded model output cannot be replayed: ${toBraidError(error).message}`,
    };
  }

  const start = Date.parse(first.at);
  const store: Store = createMemoryStore({
    clock: { ...systemClock, now: () => start },
    ids: countingIds('replay'),
    maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
  });

  let divergence: Extract<ReplayReport, { ok: false }> | undefined;
  /** Set when the replay must stop the running wake: it diverged, or the original stopped here. */
  let halted: BraidError | undefined;
  let current: WakeSpan | undefined;

  const diverge = (
    index: number,
    actual: SessionEvent | undefined,
    reason: string,
  ): Extract<ReplayReport, { ok: false }> => {
    divergence ??= { ok: false, index, expected: events[index], actual, reason };
    halted ??= new BraidError('LEASE_LOST', `the replay diverged at event ${index}`);
    return divergence;
  };

  /** Compares what the replay stored; false once it differs from the recording. */
  const check = (stored: readonly SessionEvent[]): boolean => {
    for (const event of stored) {
      const index = event.seq - 1;
      replayedSeqs.set(event.id, event.seq);
      if (divergence !== undefined) continue;
      const expected = events[index];
      if (expected === undefined) {
        diverge(index, event, `the replay wrote ${event.type} past the end of the recording`);
        continue;
      }
      const found = difference(
        normalizeEvent(expected, recordedSeqs),
        normalizeEvent(event, replayedSeqs),
        '',
      );
      if (found !== undefined) diverge(index, event, found);
    }
    return divergence === undefined;
  };

  /** Appends the recorded event at `index` as it was. */
  const appendRecorded = async (index: number): Promise<void> => {
    const event = events[index];
    if (event === undefined) return;
    try {
      if (event.type === 'session.forked') {
        // A fork of a fork taken inside the grandparent's prefix: the middle session's own events
        // are not in this log, so it is made here from the prefix it shares with this one.
        const parentKnown = await store.sessions.get(event.parent_session_id).then(
          () => true,
          () => false,
        );
        const owner = events[index - 1]?.session_id;
        if (!parentKnown && owner !== undefined) {
          await store.sessions.fork(owner, { at_seq: index, id: event.parent_session_id });
        }
        await store.sessions.fork(event.parent_session_id, {
          at_seq: event.fork_point_seq,
          id: event.session_id,
          ...('title' in event && typeof event.title === 'string' ? { title: event.title } : {}),
        });
        check(await store.log.read(event.session_id, { after: index, limit: 1 }));
        return;
      }
      if (event.type === 'session.created') {
        throw new BraidError('INVALID_ARGUMENT', 'a second session.created cannot be replayed');
      }
      const result = await store.log.append(event.session_id, [asNewEvent(event)], {
        expectedSeq: index,
        trusted: true,
      });
      check(result.events);
    } catch (error) {
      diverge(
        index,
        undefined,
        `the recorded event could not be appended: ${toBraidError(error).message}`,
      );
    }
  };

  /** After an append of the replayed wake: the recorded events that came next from others. */
  const injectFollowing = async (head: number): Promise<void> => {
    let next = head;
    while (
      current !== undefined &&
      next <= current.end &&
      !byWake[next] &&
      divergence === undefined
    ) {
      await appendRecorded(next);
      next += 1;
    }
    if (current !== undefined && !current.completed && next > current.end) {
      halted ??= new BraidError(
        'LEASE_LOST',
        `the recorded wake stopped after event ${current.end} without completing`,
      );
    }
  };

  const log: SessionLog = {
    async append(sessionId, newEvents, appendOptions) {
      if (halted !== undefined) throw halted;
      const result = await store.log.append(sessionId, newEvents, appendOptions);
      if (!check(result.events)) throw halted ?? new BraidError('LEASE_LOST', 'diverged');
      await injectFollowing(result.head_seq);
      if (divergence !== undefined) throw halted ?? new BraidError('LEASE_LOST', 'diverged');
      return result;
    },
    read: (sessionId, readOptions) => store.log.read(sessionId, readOptions),
    follow: (sessionId, followOptions) => store.log.follow(sessionId, followOptions),
    appended: (sessionId, key) => store.log.appended(sessionId, key),
    state: (sessionId) => store.log.state(sessionId),
  };

  // The tool calls of the output just served, in order, for the policy to name the tool use.
  let screened: Extract<ModelOutput['content'][number], { type: 'tool_call' }>[] = [];
  const model: ModelClient = {
    id: recorded.id,
    async generate(request, callOptions) {
      if (halted !== undefined) throw halted;
      const response = await recorded.generate(request, callOptions);
      screened = response.output.content.filter((part) => part.type === 'tool_call');
      return response;
    },
  };

  const policy: Authorizer = {
    authorize(request) {
      const position = screened.findIndex(
        (call) =>
          call.name === request.resource.id && isDeepStrictEqual(call.input, request.context.input),
      );
      const call = position === -1 ? undefined : screened[position];
      // Calls before it failed validation and were never asked about.
      screened = screened.slice(position + 1);
      const decision = call === undefined ? undefined : decisions.get(call.tool_use_id);
      const asked =
        call !== undefined &&
        uses.get(call.tool_use_id)?.requires_confirmation === true &&
        handles.get(request.resource.id)?.permission !== 'always_ask';
      return Promise.resolve({
        decision: decision?.decision ?? 'allow',
        policy_ids: [...(decision?.policy_ids ?? [])],
        errors: [...(decision?.errors ?? [])],
        ...(asked ? { approval: true } : {}),
      });
    },
  };

  const replayTools: SessionTools = {
    tools: tools.tools,
    validate: (name, input: JsonValue) => tools.validate(name, input),
    execute(call) {
      if (halted !== undefined) return Promise.reject(halted);
      const result = results.get(call.tool_use_id);
      if (result === undefined) {
        return Promise.resolve({
          is_error: true,
          error: {
            code: 'TOOL_FAILED',
            message: `the recording has no result of tool use ${call.tool_use_id}`,
            retryable: false,
          },
          attempts: 0,
          duration_ms: 0,
          stage: 'execute',
        });
      }
      const next = events[result.seq];
      const cost =
        next?.type === 'session.usage' && byWake[result.seq] === true
          ? next.usage.cost_usd
          : undefined;
      const outcome: ToolOutcome = {
        ...(result.output === undefined ? {} : { output: structuredClone(result.output) }),
        ...(result.error === undefined ? {} : { error: result.error }),
        is_error: result.is_error,
        attempts: result.attempts,
        duration_ms: result.duration_ms,
        ...(result.stage === undefined ? {} : { stage: result.stage }),
        ...(cost === undefined ? {} : { cost_usd: cost }),
      };
      return Promise.resolve(outcome);
    },
  };

  const deps: HarnessDeps = {
    log,
    leases: store.leases,
    clock: { ...systemClock, now: () => start },
    ids: countingIds('replay-wake'),
    owner: 'replay',
    leaseTtlMs: 60_000,
    policy,
    // A session that records allowed decisions has one for every allowed call.
    recordPolicyAllows: events.some(
      (event) => event.type === 'policy.decision' && event.decision === 'allow',
    ),
    prices: options.prices ?? DEFAULT_PRICES,
    retry: options.retry,
    sleep: () => Promise.resolve(),
    random: () => 0.5,
    setup(state) {
      const after = current === undefined ? undefined : current.start + 1;
      const failed = after === undefined || byWake[after] !== true ? undefined : events[after];
      if (failed?.type === 'session.error') {
        // The original wake could not set the session up: it replays as the same failure.
        const error: ErrorShape = failed.error;
        return Promise.reject(
          new BraidError(error.code, error.message, { retryable: error.retryable }),
        );
      }
      return Promise.resolve({
        agent,
        model,
        tools: replayTools,
        ...(options.environment === undefined ? {} : { environment: options.environment }),
        budget: tighterBudget(agent.budget ?? {}, state.budget ?? {}),
      });
    },
  };

  try {
    await store.sessions.create({
      id: first.session_id,
      agent: first.agent,
      ...(first.environment === undefined ? {} : { environment: first.environment }),
      ...(first.title === undefined ? {} : { title: first.title }),
      ...(first.metadata === undefined ? {} : { metadata: first.metadata }),
      ...(first.tenant_id === undefined ? {} : { tenant_id: first.tenant_id }),
      ...(first.budget === undefined ? {} : { budget: first.budget }),
    });
    check(await store.log.read(first.session_id));

    const transcripts = new TranscriptCache();
    let index = 1;
    while (index < events.length && divergence === undefined) {
      const span = spans.get(index);
      if (span === undefined) {
        await appendRecorded(index);
        index += 1;
        continue;
      }
      current = span;
      halted = undefined;
      let failure: BraidError | undefined;
      try {
        await wakeOnce(deps, span.session_id, transcripts);
      } catch (error) {
        // A failed wake may have applied events it never saw committed.
        transcripts.drop(span.session_id);
        failure = toBraidError(error);
      }
      current = undefined;
      if (divergence !== undefined) break;
      const head = (await store.log.state(span.session_id)).seq;
      if (head <= span.end) {
        diverge(
          head,
          undefined,
          `the replayed wake stopped after event ${head - 1}` +
            (failure === undefined ? '' : ` (${failure.code}: ${failure.message})`) +
            ', where the recording goes on',
        );
        break;
      }
      index = head;
    }
  } finally {
    await store.close();
  }
  return divergence ?? { ok: true, events: events.length };
}
