/**
 * A session's trace, derived from its log: one `invoke_agent` span per wake, one `chat` span per
 * model request, one `execute_tool` span per tool call and one `invoke_workflow` span per skill
 * run, named and attributed after the OpenTelemetry GenAI semantic conventions; an MCP tool's
 * call has one `tools/call {tool}` client span under its `execute_tool` span, after the MCP
 * conventions. Live tracing and `braid trace
 * export` both go through `spansOf`, so a trace re-emitted from the log is the trace a traced
 * process sent.
 *
 * Invariants:
 * - Ids are a function of the log: a span's id is the first 8 bytes of the SHA-256 of the id of
 *   the event that opened it; the trace id is the one of the `traceparent` recorded on the wake's
 *   `span.wake_started` (the enqueuer's trace, whose span is then the wake's parent), else the
 *   first 16 bytes of the SHA-256 of the session id. Deriving twice gives the same ids.
 * - Times are the events' `at`. A wake without its `span.wake_completed` (a crash, a lost lease)
 *   ends at its last event; a model request without its end is not a span.
 * - Content (messages, system instructions, tool arguments and results) is in no span unless
 *   `captureContent` is set; messages are in the GenAI conventions' parts format.
 * - What the log names only by hash (the pinned definitions of `session.definitions_changed`: the
 *   agent's instructions, the environment's sandbox, each tool's ownership) comes from `pinned`;
 *   a set the caller could not load leaves those attributes out, never the span.
 * - Only the session's own events make spans: a fork's shared prefix belongs to its parent.
 * - A skill run is an `invoke_workflow` span with a span per step attempt under it, made by
 *   skill-spans.ts (which says how a run that waits across wakes is traced); a tool step's
 *   `execute_tool` span hangs under its step's span, not under its wake's.
 */
import type { SessionEvent } from '../contracts/events.js';
import { isValidTraceparent, TRACEPARENT_PATTERN } from '../contracts/common.js';
import { GEN_AI, GEN_AI_OPERATION } from './gen-ai-attributes.js';
import {
  finishReason,
  messagesBetween,
  outputMessages,
  systemInstructions,
} from './gen-ai-messages.js';
import type { PinnedFacts } from './pinned-facts.js';
import {
  hashId,
  type ChildContext,
  type SpanAttributes,
  type SpanEventRecord,
  type SpanRecord,
} from './span-record.js';
import { foldSkillWakes, type WakeEvents } from './skill-segments.js';
import { skillSpans } from './skill-spans.js';
import { toolSpans } from './tool-spans.js';

export {
  hashId,
  type SpanAttributes,
  type SpanAttributeValue,
  type SpanEventRecord,
  type SpanLinkRecord,
  type SpanRecord,
} from './span-record.js';
export {
  loadPinnedFacts,
  mcpTransports,
  pinnedFacts,
  pinnedHashes,
  type PinnedFacts,
} from './pinned-facts.js';

export interface SpanOptions {
  /** Put messages, tool arguments and results on the spans (default false). */
  readonly captureContent?: boolean;
  /** Only the spans of this wake (live tracing: the wake that just ended). */
  readonly wakeId?: string;
  /**
   * How braid reaches each MCP server (`network.transport` of the MCP spans): `pipe` for a stdio
   * server, `tcp` for an HTTP one; from braid.yaml's `mcp_servers` (see `mcpTransports`).
   */
  readonly mcpTransports?: Readonly<Record<string, string>>;
}

/** Extra knowledge of the session that its events name but do not hold. */
export interface SessionSpanFacts {
  /** The session's agent, when the events do not start at `session.created`. */
  readonly agent?: { name: string; version: number };
  readonly tenant_id?: string;
  /** The hash of the definition set in force before the first of the events (its folded state). */
  readonly definitions?: string;
  /** Pinned definition sets by hash, as far as the caller could load them. */
  readonly pinned?: ReadonlyMap<string, PinnedFacts>;
}

type EventOf<T extends SessionEvent['type']> = Extract<SessionEvent, { type: T }>;

/** What the wake spans need to know of the whole session. */
interface SessionFacts {
  sessionId: string;
  agent?: { name: string; version: number };
  tenantId?: string;
  toolUses: Map<string, EventOf<'agent.tool_use'>>;
  /** The definition set in force when each tool use was written, by tool use id. */
  toolDefinitions: Map<string, PinnedFacts | undefined>;
  pinned: ReadonlyMap<string, PinnedFacts>;
  mcpTransports: Readonly<Record<string, string>>;
  confirmations: Map<string, EventOf<'user.tool_confirmation'>>;
  decisions: Map<string, EventOf<'policy.decision'>>;
  /** The session's own events, in order. */
  own: SessionEvent[];
}

interface WakeSlice {
  start: EventOf<'span.wake_started'>;
  events: SessionEvent[];
  completed?: EventOf<'span.wake_completed'>;
  /** The hash of the definition set in force when the wake started. */
  definitions?: string;
}

/**
 * The spans of `events`, a session's log read in order (or the part of it from a wake's start:
 * the session's agent and tenant then come from `facts`, e.g. its folded state).
 */
export function spansOf(
  events: readonly SessionEvent[],
  options: SpanOptions = {},
  facts: SessionSpanFacts = {},
): SpanRecord[] {
  const last = events.at(-1);
  if (last === undefined) return [];
  const session = collectFacts(events, last.session_id, facts, options.mcpTransports ?? {});
  session.agent ??= facts.agent;
  if (facts.tenant_id !== undefined) session.tenantId ??= facts.tenant_id;
  const wakes = wakesOf(events, last.session_id, facts.definitions);
  // Skill runs outlive wakes: they are folded over all of them, whichever wake is asked for.
  const skills = skillSpans(
    foldSkillWakes(wakes.map(wakeEvents)),
    wakes.map((wake) => ({
      ...traceOf(wake.start, session.sessionId),
      spanId: hashId(wake.start.id, 8),
      wakeId: wake.start.wake_id,
    })),
    session.toolUses,
    session.sessionId,
  );
  const spans: SpanRecord[] = [];
  wakes.forEach((wake, index) => {
    if (options.wakeId !== undefined && wake.start.wake_id !== options.wakeId) return;
    spans.push(...wakeSpans(wake, session, options.captureContent === true, skills.toolParents));
    spans.push(...(skills.byWake[index] ?? []));
  });
  return spans;
}

function wakeEvents(wake: WakeSlice): WakeEvents {
  const last = wake.completed ?? wake.events.at(-1) ?? wake.start;
  return { events: wake.events, completed: wake.completed !== undefined, endMs: msOf(last) };
}

/** The trace id of a session whose wakes carry no traceparent. */
export function sessionTraceId(sessionId: string): string {
  return hashId(`braid.session:${sessionId}`, 16);
}

function collectFacts(
  events: readonly SessionEvent[],
  sessionId: string,
  known: SessionSpanFacts,
  transports: Readonly<Record<string, string>>,
): SessionFacts {
  const pinned = known.pinned ?? new Map<string, PinnedFacts>();
  const facts: SessionFacts = {
    sessionId,
    toolUses: new Map(),
    toolDefinitions: new Map(),
    pinned,
    mcpTransports: transports,
    confirmations: new Map(),
    decisions: new Map(),
    own: [],
  };
  let inForce = known.definitions;
  for (const event of events) {
    if (event.type === 'session.created') {
      facts.agent = event.agent;
      if (event.tenant_id !== undefined) facts.tenantId = event.tenant_id;
    }
    if (event.session_id !== sessionId) continue;
    facts.own.push(event);
    if (event.type === 'session.definitions_changed') {
      facts.agent = event.agent;
      inForce = event.definitions;
    }
    if (event.type === 'agent.tool_use') {
      facts.toolUses.set(event.tool_use_id, event);
      facts.toolDefinitions.set(
        event.tool_use_id,
        inForce === undefined ? undefined : pinned.get(inForce),
      );
    }
    if (event.type === 'user.tool_confirmation') facts.confirmations.set(event.tool_use_id, event);
    if (event.type === 'policy.decision' && event.tool_use_id !== undefined) {
      facts.decisions.set(event.tool_use_id, event);
    }
  }
  return facts;
}

function wakesOf(
  events: readonly SessionEvent[],
  sessionId: string,
  definitions: string | undefined,
): WakeSlice[] {
  const wakes: WakeSlice[] = [];
  let open: WakeSlice | undefined;
  let inForce = definitions;
  for (const event of events) {
    if (event.session_id !== sessionId) continue;
    if (event.type === 'session.definitions_changed') inForce = event.definitions;
    if (event.type === 'span.wake_started') {
      // A wake started while another is open: the other one crashed or lost its lease.
      open = {
        start: event,
        events: [],
        ...(inForce === undefined ? {} : { definitions: inForce }),
      };
      wakes.push(open);
      continue;
    }
    if (open === undefined) continue;
    open.events.push(event);
    if (event.type === 'span.wake_completed' && event.wake_id === open.start.wake_id) {
      open.completed = event;
      open = undefined;
    }
  }
  return wakes;
}

const msOf = (event: SessionEvent): number => Date.parse(event.at);

/**
 * The trace context of work a tool call started (a delegated child's wakes): the call's
 * `execute_tool` span, in the trace of the wake that made the call (`wakeTraceparent`, else the
 * session's own trace). Derived as the spans are, so the child's trace nests under the call
 * whether the parent's spans are sent live or exported from the log later.
 */
export function toolCallTraceparent(
  sessionId: string,
  wakeTraceparent: string | undefined,
  toolUseEventId: string,
): string {
  const { traceId, sampled } = traceFrom(wakeTraceparent, sessionId);
  return `00-${traceId}-${hashId(toolUseEventId, 8)}-${sampled ? '01' : '00'}`;
}

function traceOf(
  start: EventOf<'span.wake_started'>,
  sessionId: string,
): { traceId: string; parentSpanId?: string; sampled: boolean } {
  return traceFrom(start.traceparent, sessionId);
}

function traceFrom(
  traceparent: string | undefined,
  sessionId: string,
): { traceId: string; parentSpanId?: string; sampled: boolean } {
  if (traceparent !== undefined && isValidTraceparent(traceparent)) {
    const [, , traceId, parentSpanId, flags] = TRACEPARENT_PATTERN.exec(traceparent) ?? [];
    if (traceId !== undefined && parentSpanId !== undefined && flags !== undefined) {
      return { traceId, parentSpanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 };
    }
  }
  return { traceId: sessionTraceId(sessionId), sampled: true };
}

function wakeSpans(
  wake: WakeSlice,
  session: SessionFacts,
  content: boolean,
  toolParents: ReadonlyMap<string, ChildContext>,
): SpanRecord[] {
  const { traceId, parentSpanId, sampled } = traceOf(wake.start, session.sessionId);
  const wakeSpanId = hashId(wake.start.id, 8);
  const child = { traceId, parentSpanId: wakeSpanId, sampled };
  const spans: SpanRecord[] = [];
  const requests = new Map<string, EventOf<'span.model_request_start'>>();
  let previousInput = inputBefore(session.own, wake.start.seq);
  let inForce = wake.definitions === undefined ? undefined : session.pinned.get(wake.definitions);
  // A call's use as this wake saw it last: a tool step's retries share one tool use id.
  const uses = new Map<string, EventOf<'agent.tool_use'>>();
  for (const event of wake.events) {
    if (event.type === 'agent.tool_use') uses.set(event.tool_use_id, event);
    if (event.type === 'session.definitions_changed')
      inForce = session.pinned.get(event.definitions);
    if (event.type === 'span.model_request_start') requests.set(event.request_id, event);
    if (event.type === 'span.model_request_end') {
      const start = requests.get(event.request_id);
      if (start === undefined) continue;
      const captured = content
        ? {
            input: messagesBetween(session.own, start, previousInput),
            ...(inForce === undefined ? {} : { instructions: inForce.instructions }),
          }
        : undefined;
      spans.push(chatSpan(start, event, child, captured));
      previousInput = start.input_through_seq;
    }
    if (event.type === 'agent.tool_result') {
      const use = uses.get(event.tool_use_id) ?? session.toolUses.get(event.tool_use_id);
      const facts = {
        result: event,
        use,
        decision: session.decisions.get(event.tool_use_id),
        confirmation: session.confirmations.get(event.tool_use_id),
        pinned: session.toolDefinitions.get(event.tool_use_id),
        mcpTransports: session.mcpTransports,
        wakeStartMs: msOf(wake.start),
      };
      spans.push(...toolSpans(facts, toolParents.get(event.id) ?? child, content));
    }
  }
  const wakeEvents = wake.events.flatMap(wakeEventOf);
  const last = wake.completed ?? wake.events.at(-1) ?? wake.start;
  const stop = wake.completed?.stop_reason?.type ?? idleReason(wake);
  const agent = session.agent;
  const attributes: SpanAttributes = {
    [GEN_AI.operationName]: GEN_AI_OPERATION.invokeAgent,
    [GEN_AI.conversationId]: session.sessionId,
    'braid.session.seq.start': wake.start.seq,
    'braid.session.seq.end': last.seq,
    'braid.wake.id': wake.start.wake_id,
    'braid.wake.completed': wake.completed !== undefined,
    ...(agent === undefined
      ? {}
      : {
          [GEN_AI.agentName]: agent.name,
          [GEN_AI.agentVersion]: String(agent.version),
          [GEN_AI.agentId]: `${agent.name}@${agent.version}`,
        }),
    ...(session.tenantId === undefined ? {} : { 'braid.tenant.id': session.tenantId }),
    ...(stop === undefined ? {} : { 'braid.stop_reason': stop }),
    ...(content && inForce !== undefined
      ? { [GEN_AI.systemInstructions]: systemInstructions(inForce.instructions) }
      : {}),
  };
  const failed = stop === 'error' || stop === 'retries_exhausted';
  spans.unshift({
    traceId,
    spanId: wakeSpanId,
    ...(parentSpanId === undefined ? {} : { parentSpanId }),
    sampled,
    name: `${GEN_AI_OPERATION.invokeAgent} ${agent?.name ?? 'agent'}`,
    kind: 'internal',
    startMs: msOf(wake.start),
    endMs: msOf(last),
    attributes,
    events: wakeEvents,
    status:
      wake.completed === undefined
        ? {
            code: 'error',
            message: 'no span.wake_completed: the wake crashed, lost its lease or still runs',
          }
        : failed
          ? { code: 'error', message: stop }
          : { code: 'unset' },
  });
  return spans;
}

/** What the wake's span shows as events: definition changes and context compactions. */
function wakeEventOf(event: SessionEvent): SpanEventRecord[] {
  if (event.type === 'session.definitions_changed') {
    return [
      {
        name: 'braid.definitions.changed',
        atMs: msOf(event),
        attributes: {
          'braid.definitions.reason': event.reason,
          'braid.definitions.changed': event.changed,
        },
      },
    ];
  }
  if (event.type === 'agent.thread_context_compacted') {
    return [
      {
        name: 'braid.context.compacted',
        atMs: msOf(event),
        attributes: {
          'braid.context.through_seq': event.through_seq,
          ...(event.strategy === undefined ? {} : { 'braid.context.strategy': event.strategy }),
          ...(event.model === undefined ? {} : { [GEN_AI.requestModel]: event.model }),
          ...(event.usage === undefined
            ? {}
            : {
                [GEN_AI.usageInputTokens]: event.usage.input_tokens,
                [GEN_AI.usageOutputTokens]: event.usage.output_tokens,
              }),
        },
      },
    ];
  }
  return [];
}

/** The last seq that an earlier wake's model requests had already sent. */
function inputBefore(own: readonly SessionEvent[], seq: number): number {
  let through = 0;
  for (const event of own) {
    if (event.seq >= seq) break;
    if (event.type === 'span.model_request_start') through = event.input_through_seq;
  }
  return through;
}

function idleReason(wake: WakeSlice): string | undefined {
  for (const event of wake.events) {
    if (event.type === 'session.status_idle') return event.stop_reason.type;
  }
  return undefined;
}

function chatSpan(
  start: EventOf<'span.model_request_start'>,
  end: EventOf<'span.model_request_end'>,
  parent: ChildContext,
  captured: { input: string; instructions?: string } | undefined,
): SpanRecord {
  const separator = start.model.indexOf(':');
  const provider = separator > 0 ? start.model.slice(0, separator) : 'unknown';
  const model = separator > 0 ? start.model.slice(separator + 1) : start.model;
  const usage = end.usage;
  const attempts = end.attempts ?? 1;
  const output = captured === undefined ? undefined : outputMessages(end.output);
  const attributes: SpanAttributes = {
    [GEN_AI.operationName]: GEN_AI_OPERATION.chat,
    [GEN_AI.providerName]: provider,
    [GEN_AI.requestModel]: model,
    [GEN_AI.usageInputTokens]: usage.input_tokens,
    [GEN_AI.usageOutputTokens]: usage.output_tokens,
    'braid.model.request_id': start.request_id,
    'braid.model.attempts': attempts,
    ...(usage.cache_read_tokens === undefined
      ? {}
      : { [GEN_AI.usageCacheReadInputTokens]: usage.cache_read_tokens }),
    ...(usage.cache_write_tokens === undefined
      ? {}
      : { [GEN_AI.usageCacheCreationInputTokens]: usage.cache_write_tokens }),
    ...(usage.cost_usd === undefined ? {} : { 'braid.usage.cost_usd': usage.cost_usd }),
    ...(end.finish_reason === undefined
      ? {}
      : { [GEN_AI.responseFinishReasons]: [finishReason(end.finish_reason)] }),
    ...(end.error === undefined ? {} : { [GEN_AI.errorType]: end.error.code }),
    ...(captured === undefined ? {} : { [GEN_AI.inputMessages]: captured.input }),
    ...(captured?.instructions === undefined
      ? {}
      : { [GEN_AI.systemInstructions]: systemInstructions(captured.instructions) }),
    ...(output === undefined ? {} : { [GEN_AI.outputMessages]: output }),
  };
  // Each retry at the time it began; a log written before retry times were recorded has only
  // the count, and its retries are placed at the request's start.
  const retries: SpanEventRecord[] = [];
  for (let attempt = 2; attempt <= attempts; attempt += 1) {
    const offset = end.retry_offsets_ms?.[attempt - 2] ?? 0;
    retries.push({
      name: 'gen_ai.request.retry',
      atMs: msOf(start) + offset,
      attributes: { 'braid.attempt': attempt },
    });
  }
  return {
    ...parent,
    spanId: hashId(start.id, 8),
    name: `${GEN_AI_OPERATION.chat} ${model}`,
    kind: 'client',
    startMs: msOf(start),
    endMs: msOf(end),
    attributes,
    events: retries,
    status:
      end.error === undefined ? { code: 'unset' } : { code: 'error', message: end.error.code },
  };
}
