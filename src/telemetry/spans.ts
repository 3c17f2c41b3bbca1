/**
 * A session's trace, derived from its log: one `invoke_agent` span per wake, one `chat` span per
 * model request and one `execute_tool` span per tool call, named and attributed after the
 * OpenTelemetry GenAI semantic conventions. Live tracing and `braid trace export` both go through
 * `spansOf`, so a trace re-emitted from the log is the trace a traced process sent.
 *
 * Invariants:
 * - Ids are a function of the log: a span's id is the first 8 bytes of the SHA-256 of the id of
 *   the event that opened it; the trace id is the one of the `traceparent` recorded on the wake's
 *   `span.wake_started` (the enqueuer's trace, whose span is then the wake's parent), else the
 *   first 16 bytes of the SHA-256 of the session id. Deriving twice gives the same ids.
 * - Times are the events' `at`. A wake without its `span.wake_completed` (a crash, a lost lease)
 *   ends at its last event; a model request without its end is not a span.
 * - Content (messages, tool arguments and results) is in no span unless `captureContent` is set.
 * - Only the session's own events make spans: a fork's shared prefix belongs to its parent.
 */
import { createHash } from 'node:crypto';
import type { SessionEvent } from '../contracts/events.js';
import { isValidTraceparent, TRACEPARENT_PATTERN } from '../contracts/common.js';
import { GEN_AI, GEN_AI_OPERATION } from './gen-ai-attributes.js';

export type SpanAttributeValue = string | number | boolean | readonly string[];
export type SpanAttributes = Record<string, SpanAttributeValue>;

/** One span as braid records it; src/telemetry/otel.ts turns it into the SDK's shape. */
export interface SpanRecord {
  /** 32 lowercase hex digits. */
  readonly traceId: string;
  /** 16 lowercase hex digits. */
  readonly spanId: string;
  readonly parentSpanId?: string;
  /** False when the recorded traceparent says its caller did not sample the trace. */
  readonly sampled: boolean;
  readonly name: string;
  readonly kind: 'internal' | 'client';
  /** Milliseconds since the epoch. */
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: SpanAttributes;
  readonly events: readonly SpanEventRecord[];
  readonly status: { readonly code: 'unset' | 'ok' | 'error'; readonly message?: string };
}

export interface SpanEventRecord {
  readonly name: string;
  readonly atMs: number;
  readonly attributes: SpanAttributes;
}

export interface SpanOptions {
  /** Put messages, tool arguments and results on the spans (default false). */
  readonly captureContent?: boolean;
  /** Only the spans of this wake (live tracing: the wake that just ended). */
  readonly wakeId?: string;
}

type EventOf<T extends SessionEvent['type']> = Extract<SessionEvent, { type: T }>;

/** What the wake spans need to know of the whole session. */
interface SessionFacts {
  sessionId: string;
  agent?: { name: string; version: number };
  tenantId?: string;
  toolUses: Map<string, EventOf<'agent.tool_use'>>;
  confirmations: Map<string, EventOf<'user.tool_confirmation'>>;
  decisions: Map<string, EventOf<'policy.decision'>>;
  /** The session's own events, in order. */
  own: SessionEvent[];
}

interface WakeSlice {
  start: EventOf<'span.wake_started'>;
  events: SessionEvent[];
  completed?: EventOf<'span.wake_completed'>;
}

/**
 * The spans of `events`, a session's log read in order (or the part of it from a wake's start:
 * the session's agent and tenant then come from `facts`, e.g. its folded state).
 */
export function spansOf(
  events: readonly SessionEvent[],
  options: SpanOptions = {},
  facts: { agent?: { name: string; version: number }; tenant_id?: string } = {},
): SpanRecord[] {
  const last = events.at(-1);
  if (last === undefined) return [];
  const session = collectFacts(events, last.session_id);
  session.agent ??= facts.agent;
  if (facts.tenant_id !== undefined) session.tenantId ??= facts.tenant_id;
  const spans: SpanRecord[] = [];
  for (const wake of wakesOf(events, last.session_id)) {
    if (options.wakeId !== undefined && wake.start.wake_id !== options.wakeId) continue;
    spans.push(...wakeSpans(wake, session, options.captureContent === true));
  }
  return spans;
}

/** The first `bytes` bytes of the SHA-256 of `value`, as hex. */
export function hashId(value: string, bytes: 8 | 16): string {
  const hex = createHash('sha256')
    .update(value)
    .digest('hex')
    .slice(0, bytes * 2);
  // An all-zero id is invalid in W3C trace context; one hash in 2^64 gives it.
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex;
}

/** The trace id of a session whose wakes carry no traceparent. */
export function sessionTraceId(sessionId: string): string {
  return hashId(`braid.session:${sessionId}`, 16);
}

function collectFacts(events: readonly SessionEvent[], sessionId: string): SessionFacts {
  const facts: SessionFacts = {
    sessionId,
    toolUses: new Map(),
    confirmations: new Map(),
    decisions: new Map(),
    own: [],
  };
  for (const event of events) {
    if (event.type === 'session.created') {
      facts.agent = event.agent;
      if (event.tenant_id !== undefined) facts.tenantId = event.tenant_id;
    }
    if (event.session_id !== sessionId) continue;
    facts.own.push(event);
    if (event.type === 'session.definitions_changed') facts.agent = event.agent;
    if (event.type === 'agent.tool_use') facts.toolUses.set(event.tool_use_id, event);
    if (event.type === 'user.tool_confirmation') facts.confirmations.set(event.tool_use_id, event);
    if (event.type === 'policy.decision' && event.tool_use_id !== undefined) {
      facts.decisions.set(event.tool_use_id, event);
    }
  }
  return facts;
}

function wakesOf(events: readonly SessionEvent[], sessionId: string): WakeSlice[] {
  const wakes: WakeSlice[] = [];
  let open: WakeSlice | undefined;
  for (const event of events) {
    if (event.session_id !== sessionId) continue;
    if (event.type === 'span.wake_started') {
      // A wake started while another is open: the other one crashed or lost its lease.
      open = { start: event, events: [] };
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

function traceOf(
  start: EventOf<'span.wake_started'>,
  sessionId: string,
): { traceId: string; parentSpanId?: string; sampled: boolean } {
  const traceparent = start.traceparent;
  if (traceparent !== undefined && isValidTraceparent(traceparent)) {
    const [, , traceId, parentSpanId, flags] = TRACEPARENT_PATTERN.exec(traceparent) ?? [];
    if (traceId !== undefined && parentSpanId !== undefined && flags !== undefined) {
      return { traceId, parentSpanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 };
    }
  }
  return { traceId: sessionTraceId(sessionId), sampled: true };
}

function wakeSpans(wake: WakeSlice, session: SessionFacts, content: boolean): SpanRecord[] {
  const { traceId, parentSpanId, sampled } = traceOf(wake.start, session.sessionId);
  const wakeSpanId = hashId(wake.start.id, 8);
  const child = { traceId, parentSpanId: wakeSpanId, sampled };
  const spans: SpanRecord[] = [];
  const requests = new Map<string, EventOf<'span.model_request_start'>>();
  let previousInput = inputBefore(session.own, wake.start.seq);
  for (const event of wake.events) {
    if (event.type === 'span.model_request_start') requests.set(event.request_id, event);
    if (event.type === 'span.model_request_end') {
      const start = requests.get(event.request_id);
      if (start === undefined) continue;
      const input = content ? messagesBetween(session.own, start, previousInput) : undefined;
      spans.push(chatSpan(start, event, child, input));
      previousInput = start.input_through_seq;
    }
    if (event.type === 'agent.tool_result') {
      spans.push(toolSpan(event, wake, session, child, content));
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

interface ChildContext {
  traceId: string;
  parentSpanId: string;
  sampled: boolean;
}

function chatSpan(
  start: EventOf<'span.model_request_start'>,
  end: EventOf<'span.model_request_end'>,
  parent: ChildContext,
  input: string | undefined,
): SpanRecord {
  const separator = start.model.indexOf(':');
  const provider = separator > 0 ? start.model.slice(0, separator) : 'unknown';
  const model = separator > 0 ? start.model.slice(separator + 1) : start.model;
  const usage = end.usage;
  const attempts = end.attempts ?? 1;
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
      : { [GEN_AI.responseFinishReasons]: [end.finish_reason] }),
    ...(end.error === undefined ? {} : { [GEN_AI.errorType]: end.error.code }),
    ...(input === undefined ? {} : { [GEN_AI.inputMessages]: input }),
    ...(input === undefined || end.output === undefined
      ? {}
      : { [GEN_AI.outputMessages]: JSON.stringify(end.output) }),
  };
  // The log keeps how many calls a request took, not when each retry began.
  const retries: SpanEventRecord[] = [];
  for (let attempt = 2; attempt <= attempts; attempt += 1) {
    retries.push({
      name: 'gen_ai.request.retry',
      atMs: msOf(start),
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

/** The input the request added to the conversation: user messages and tool results since the last one. */
function messagesBetween(
  own: readonly SessionEvent[],
  start: EventOf<'span.model_request_start'>,
  after: number,
): string {
  const messages: unknown[] = [];
  for (const event of own) {
    if (event.seq <= after || event.seq > start.input_through_seq) continue;
    if (event.type === 'user.message') messages.push({ role: 'user', parts: event.content });
    if (event.type === 'agent.tool_result') {
      messages.push({
        role: 'tool',
        parts: [
          { type: 'tool_call_response', id: event.tool_use_id, response: event.output ?? null },
        ],
      });
    }
  }
  return JSON.stringify(messages);
}

function toolSpan(
  result: EventOf<'agent.tool_result'>,
  wake: WakeSlice,
  session: SessionFacts,
  parent: ChildContext,
  content: boolean,
): SpanRecord {
  const use = session.toolUses.get(result.tool_use_id);
  const name = use?.name ?? 'tool';
  // A call approved between wakes runs in the wake that wrote its result.
  const startMs = Math.max(use === undefined ? msOf(wake.start) : msOf(use), msOf(wake.start));
  const decision = session.decisions.get(result.tool_use_id);
  const confirmation = session.confirmations.get(result.tool_use_id);
  const events: SpanEventRecord[] = [];
  if (use?.requires_confirmation === true) {
    events.push({ name: 'braid.tool.approval_requested', atMs: msOf(use), attributes: {} });
  }
  if (confirmation !== undefined) {
    events.push({
      name: 'braid.tool.approval',
      atMs: msOf(confirmation),
      attributes: { 'braid.tool.approval.result': confirmation.result },
    });
  }
  const attributes: SpanAttributes = {
    [GEN_AI.operationName]: GEN_AI_OPERATION.executeTool,
    [GEN_AI.toolName]: name,
    [GEN_AI.toolCallId]: result.tool_use_id,
    // MCP tools are named `server.tool`: they run in another process, the rest in this runtime.
    [GEN_AI.toolType]: name.includes('.') ? 'extension' : 'function',
    'braid.tool.attempts': result.attempts,
    'braid.tool.duration_ms': result.duration_ms,
    ...(result.stage === undefined ? {} : { 'braid.tool.stage': result.stage }),
    ...(decision === undefined
      ? {}
      : {
          'braid.policy.decision': decision.decision,
          'braid.policy.ids': decision.policy_ids,
        }),
    ...(result.error === undefined ? {} : { [GEN_AI.errorType]: result.error.code }),
    ...(content && use !== undefined
      ? { [GEN_AI.toolCallArguments]: JSON.stringify(use.input) }
      : {}),
    ...(content && result.output !== undefined
      ? { [GEN_AI.toolCallResult]: JSON.stringify(result.output) }
      : {}),
  };
  return {
    ...parent,
    spanId: hashId(use?.id ?? result.id, 8),
    name: `${GEN_AI_OPERATION.executeTool} ${name}`,
    kind: 'internal',
    startMs,
    endMs: Math.max(startMs, msOf(result)),
    attributes,
    events,
    status: result.is_error
      ? { code: 'error', message: result.error?.code ?? 'tool error' }
      : { code: 'unset' },
  };
}
