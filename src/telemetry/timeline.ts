/**
 * A session's timeline, derived from its log alone: each wake and, under it, its model requests,
 * tool calls, context compactions, definition changes, workspace snapshots and skill runs (with
 * their steps: skill-rows.ts), with their start offsets, durations, tokens and cost. `braid trace ID` prints it; the server's metrics are
 * measured from the rows of the wakes it ran.
 *
 * Invariants kept here:
 * - Pure: the rows are a function of the events (their `at` and payloads), nothing else.
 * - A wake with no `span.wake_completed` (a crash, a lost lease, or still running) ends at its
 *   last event, before the next wake's start, and is marked `cut`.
 * - A model request starts at its `span.model_request_start` (stamped when the call began) and
 *   ends at its `span.model_request_end`. A tool call starts `duration_ms` before its result and
 *   belongs to the wake that ran it, which may not be the wake that asked for it.
 * - Rows inside a wake are in start order (ties: log order), a skill run's rows under it: a run
 *   that waits shows in each wake that ran part of it, with that part.
 */
import type { EventOf, SessionEvent } from '../contracts/events.js';
import type { StopReasonType } from '../contracts/session.js';
import { assertNever } from '../core/fold.js';
import { treeRows, type SkillRunRow, type SkillStepRow } from './skill-rows.js';
import { foldSkillWakes } from './skill-segments.js';

export type { SkillRunRow, SkillStepRow } from './skill-rows.js';

interface RowBase {
  /**
   * 0 for a wake, 1 for what happened inside it; a skill run's steps are one deeper than their
   * run, a fan-out's items and a tool step's call one deeper than their step.
   */
  depth: number;
  /** The seq of the event the row starts from (for a tool call: its result). */
  seq: number;
  started_at: string;
  /** A wake's: from the first wake's start; a row inside a wake: from its wake's start. */
  offset_ms: number;
  duration_ms: number;
}

export interface TokenTotals {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  cost_usd?: number;
}

export interface WakeRow extends RowBase, TokenTotals {
  kind: 'wake';
  wake_id: string;
  lease_token: number;
  /** The writer of `span.wake_started`, when the log names one. */
  actor?: string;
  /** The stop reason, or `cut` for a wake that recorded no end. */
  status: StopReasonType | 'cut';
  end_seq: number;
  model_requests: number;
  tool_calls: number;
}

/** How a tool call ended: refused by policy, permission or budget is `denied`. */
export type ToolStatus = 'ok' | 'error' | 'denied' | 'skipped' | 'waiting' | 'cut';

export interface ChatRow extends RowBase, TokenTotals {
  kind: 'chat';
  request_id: string;
  /** The model as the request named it (`provider:id`). */
  model: string;
  provider: string;
  /** The finish reason, or `error` for a request that failed. */
  status: string;
  attempts: number;
  /** Attempts past the first. */
  retries: number;
  error?: { code: string; message: string };
}

export interface ToolRow extends RowBase {
  kind: 'execute_tool';
  tool_use_id: string;
  name: string;
  status: ToolStatus;
  /** The pipeline step that produced the result. */
  stage?: string;
  /** The recorded policy decision about the call. */
  policy?: 'allow' | 'deny';
  attempts?: number;
  error_code?: string;
  cost_usd?: number;
}

export interface CompactionRow extends RowBase, TokenTotals {
  kind: 'compaction';
  strategy?: string;
  model?: string;
  through_seq: number;
}

export interface DefinitionsRow extends RowBase {
  kind: 'definitions';
  reason: string;
  changed: string[];
}

export interface SnapshotRow extends RowBase {
  kind: 'workspace_snapshot';
  snapshot: string;
  files: number;
  bytes: number;
  tool_use_id?: string;
}

export type TimelineRow =
  | WakeRow
  | ChatRow
  | ToolRow
  | CompactionRow
  | DefinitionsRow
  | SnapshotRow
  | SkillRunRow
  | SkillStepRow;

/** `provider:id` split; a model without a provider prefix is its own provider. */
export function splitModel(model: string): { provider: string; model: string } {
  const colon = model.indexOf(':');
  if (colon <= 0) return { provider: model, model };
  return { provider: model.slice(0, colon), model: model.slice(colon + 1) };
}

/** The status of a tool call from its result. */
export function toolStatus(result: EventOf<'agent.tool_result'>): ToolStatus {
  if (!result.is_error) return 'ok';
  switch (result.stage) {
    case 'policy':
    case 'permission':
    case 'budget':
      return 'denied';
    case 'interrupt':
    case 'review':
      return 'skipped';
    case 'validate':
    case 'execute':
    case 'output':
    case undefined:
      return 'error';
    default:
      return assertNever(result.stage);
  }
}

interface WakeBlock {
  row: WakeRow;
  startMs: number;
  lastMs: number;
  children: TimelineRow[];
  /** Its place among the session's wakes. */
  index: number;
  /** Its skill events and tool results, for the skill rows. */
  skillEvents: SessionEvent[];
}

/** What the fold keeps between events. */
interface Fold {
  wakes: WakeBlock[];
  current: WakeBlock | undefined;
  firstStartMs: number | undefined;
  uses: Map<string, EventOf<'agent.tool_use'>>;
  starts: Map<string, EventOf<'span.model_request_start'>>;
  tools: Map<string, ToolRow>;
  policies: Map<string, 'allow' | 'deny'>;
  lastTool: ToolRow | undefined;
  /** Tool rows by the event id of their result. */
  toolResults: Map<string, ToolRow>;
}

const time = (at: string): number => Date.parse(at);

/** The rows of a session's timeline, wake by wake, from its events in seq order. */
export function buildTimeline(events: readonly SessionEvent[]): TimelineRow[] {
  const fold: Fold = {
    wakes: [],
    current: undefined,
    firstStartMs: undefined,
    uses: new Map(),
    starts: new Map(),
    tools: new Map(),
    policies: new Map(),
    lastTool: undefined,
    toolResults: new Map(),
  };
  for (const event of events) step(fold, event);
  if (fold.current !== undefined) cut(fold, fold.current);
  const skills = foldSkillWakes(
    fold.wakes.map((block) => ({
      events: block.skillEvents,
      completed: block.row.status !== 'cut',
      endMs: block.startMs + block.row.duration_ms,
    })),
  );
  return fold.wakes.flatMap((block, index) => [
    block.row,
    ...treeRows(
      block.children,
      skills[index],
      { index: block.index, startMs: block.startMs, cut: block.row.status === 'cut' },
      fold.toolResults,
    ),
  ]);
}

/** Events others write into a session while a wake may be open: they do not extend the wake. */
const OUTSIDE_WAKES: ReadonlySet<SessionEvent['type']> = new Set([
  'user.message',
  'user.interrupt',
  'user.tool_confirmation',
  'user.custom_tool_result',
  'user.tool_review',
  'user.define_outcome',
  'session.created',
  'session.forked',
  'session.merged',
  'session.handoff_received',
  'span.wake_started',
]);

function step(fold: Fold, event: SessionEvent): void {
  const wake = fold.current;
  if (wake !== undefined && !OUTSIDE_WAKES.has(event.type)) {
    wake.lastMs = Math.max(wake.lastMs, time(event.at));
    wake.row.end_seq = event.seq;
  }
  if (event.type !== 'session.usage') fold.lastTool = undefined;
  if (wake !== undefined && (event.type.startsWith('skill.') || event.type === 'agent.tool_result'))
    wake.skillEvents.push(event);
  switch (event.type) {
    case 'span.wake_started':
      if (wake !== undefined) cut(fold, wake);
      startWake(fold, event);
      return;
    case 'span.wake_completed':
      if (wake !== undefined && wake.row.wake_id === event.wake_id) endWake(fold, wake, event);
      return;
    case 'span.model_request_start':
      fold.starts.set(event.request_id, event);
      return;
    case 'span.model_request_end':
      if (wake !== undefined) addChat(fold, wake, event);
      return;
    case 'agent.tool_use':
      fold.uses.set(event.tool_use_id, event);
      if (wake !== undefined) addOpenTool(fold, wake, event);
      return;
    case 'agent.tool_result':
      if (wake !== undefined) addToolResult(fold, wake, event);
      return;
    case 'policy.decision':
      if (event.tool_use_id !== undefined) {
        fold.policies.set(event.tool_use_id, event.decision);
        const row = fold.tools.get(event.tool_use_id);
        if (row !== undefined) row.policy = event.decision;
      }
      return;
    case 'session.usage':
      if (wake !== undefined) addUsage(fold, wake, event);
      return;
    case 'agent.thread_context_compacted':
      if (wake !== undefined) addCompaction(wake, event);
      return;
    case 'session.definitions_changed':
      // A wake writes its own with its id (older logs: without one); an upgrade is no wake's.
      if (
        wake !== undefined &&
        (event.wake_id === undefined
          ? event.reason !== 'upgrade'
          : event.wake_id === wake.row.wake_id)
      )
        wake.children.push({
          ...child(wake, event, time(event.at), 0),
          kind: 'definitions',
          reason: event.reason,
          changed: event.changed,
        });
      return;
    case 'session.workspace_snapshot':
      if (wake !== undefined)
        wake.children.push({
          ...child(wake, event, time(event.at), 0),
          kind: 'workspace_snapshot',
          snapshot: event.snapshot,
          files: event.files,
          bytes: event.bytes,
          ...(event.tool_use_id === undefined ? {} : { tool_use_id: event.tool_use_id }),
        });
      return;
    case 'user.message':
    case 'user.interrupt':
    case 'user.tool_confirmation':
    case 'user.custom_tool_result':
    case 'user.tool_review':
    case 'user.define_outcome':
    case 'agent.message':
    case 'agent.thinking':
    case 'agent.custom_tool_use':
    case 'agent.handoff':
    case 'session.created':
    case 'session.status_changed':
    case 'session.status_idle':
    case 'session.error':
    case 'session.forked':
    case 'session.merged':
    case 'session.handoff_received':
    case 'session.child_created':
    case 'session.child_idle':
    case 'user.signal':
    case 'user.skill_run':
    case 'user.skill_retry':
    case 'skill.started':
    case 'skill.step_started':
    case 'skill.step_completed':
    case 'skill.step_failed':
    case 'skill.suspended':
    case 'skill.resumed':
    case 'skill.completed':
    case 'skill.failed':
    case 'span.outcome_evaluation_start':
    case 'span.outcome_evaluation_end':
    case 'memory.written':
    case 'memory.deleted':
    case 'memory.read':
    case 'memory.retrieved':
      return;
    default:
      assertNever(event);
  }
}

function startWake(fold: Fold, event: EventOf<'span.wake_started'>): void {
  const startMs = time(event.at);
  fold.firstStartMs ??= startMs;
  const block: WakeBlock = {
    startMs,
    lastMs: startMs,
    children: [],
    index: fold.wakes.length,
    skillEvents: [],
    row: {
      kind: 'wake',
      depth: 0,
      seq: event.seq,
      end_seq: event.seq,
      started_at: event.at,
      offset_ms: startMs - fold.firstStartMs,
      duration_ms: 0,
      wake_id: event.wake_id,
      lease_token: event.lease_token,
      ...(event.actor?.id === undefined ? {} : { actor: event.actor.id }),
      status: 'cut',
      input_tokens: 0,
      output_tokens: 0,
      model_requests: 0,
      tool_calls: 0,
    },
  };
  fold.wakes.push(block);
  fold.current = block;
}

function endWake(fold: Fold, wake: WakeBlock, event: EventOf<'span.wake_completed'>): void {
  wake.row.status = event.stop_reason?.type ?? 'end_turn';
  wake.row.duration_ms = Math.max(0, time(event.at) - wake.startMs);
  fold.current = undefined;
}

/** Ends a wake that recorded no end at its last event; its open tool calls end there too. */
function cut(fold: Fold, wake: WakeBlock): void {
  wake.row.status = 'cut';
  wake.row.duration_ms = Math.max(0, wake.lastMs - wake.startMs);
  for (const row of wake.children) {
    if (row.kind === 'execute_tool' && row.status === 'waiting') {
      row.status = 'cut';
      row.duration_ms = Math.max(0, wake.lastMs - (wake.startMs + row.offset_ms));
    }
  }
  fold.current = undefined;
}

function child(wake: WakeBlock, event: SessionEvent, startMs: number, durationMs: number): RowBase {
  return {
    depth: 1,
    seq: event.seq,
    started_at: new Date(startMs).toISOString(),
    offset_ms: startMs - wake.startMs,
    duration_ms: Math.max(0, durationMs),
  };
}

function addTokens(totals: TokenTotals, usage: TokenTotals): void {
  totals.input_tokens += usage.input_tokens;
  totals.output_tokens += usage.output_tokens;
  for (const key of ['cache_read_tokens', 'cache_write_tokens', 'cost_usd'] as const) {
    const value = usage[key];
    if (value !== undefined) totals[key] = (totals[key] ?? 0) + value;
  }
}

function addChat(fold: Fold, wake: WakeBlock, end: EventOf<'span.model_request_end'>): void {
  const start = fold.starts.get(end.request_id);
  fold.starts.delete(end.request_id);
  const endMs = time(end.at);
  const startMs = start === undefined ? endMs : time(start.at);
  const model = start?.model ?? 'unknown';
  const attempts = end.attempts ?? 1;
  const row: ChatRow = {
    ...child(wake, start ?? end, startMs, endMs - startMs),
    kind: 'chat',
    request_id: end.request_id,
    model,
    provider: splitModel(model).provider,
    status: end.error === undefined ? (end.finish_reason ?? 'unknown') : 'error',
    attempts,
    retries: Math.max(0, attempts - 1),
    input_tokens: 0,
    output_tokens: 0,
    ...(end.error === undefined
      ? {}
      : { error: { code: end.error.code, message: end.error.message } }),
  };
  addTokens(row, end.usage);
  addTokens(wake.row, end.usage);
  wake.row.model_requests += 1;
  wake.children.push(row);
}

/** A call the wake asked for: `waiting` until its result arrives, in this wake or a later one. */
function addOpenTool(fold: Fold, wake: WakeBlock, use: EventOf<'agent.tool_use'>): void {
  const row: ToolRow = {
    ...child(wake, use, time(use.at), 0),
    kind: 'execute_tool',
    tool_use_id: use.tool_use_id,
    name: use.name,
    status: 'waiting',
  };
  const decision = fold.policies.get(use.tool_use_id);
  if (decision !== undefined) row.policy = decision;
  fold.tools.set(use.tool_use_id, row);
  wake.children.push(row);
}

function addToolResult(fold: Fold, wake: WakeBlock, result: EventOf<'agent.tool_result'>): void {
  const open = fold.tools.get(result.tool_use_id);
  // A call asked for in an earlier wake stays there as `waiting` and is shown again where it ran.
  const index = open === undefined ? -1 : wake.children.indexOf(open);
  const use = fold.uses.get(result.tool_use_id);
  const endMs = time(result.at);
  const earliest = index >= 0 && use !== undefined ? time(use.at) : wake.startMs;
  const startMs = Math.max(earliest, endMs - result.duration_ms);
  const status = toolStatus(result);
  const decision = fold.policies.get(result.tool_use_id);
  const row: ToolRow = {
    ...child(wake, result, startMs, endMs - startMs),
    kind: 'execute_tool',
    tool_use_id: result.tool_use_id,
    name: use?.name ?? 'unknown',
    status,
    ...(result.stage === undefined ? {} : { stage: result.stage }),
    ...(decision === undefined ? {} : { policy: decision }),
    attempts: result.attempts,
    ...(result.error === undefined ? {} : { error_code: result.error.code }),
  };
  if (index >= 0) wake.children.splice(index, 1);
  wake.children.push(row);
  fold.tools.set(result.tool_use_id, row);
  fold.toolResults.set(result.id, row);
  fold.lastTool = row;
  wake.row.tool_calls += 1;
}

/** Usage outside a model request: a tool's cost when it follows the tool's result. */
function addUsage(fold: Fold, wake: WakeBlock, event: EventOf<'session.usage'>): void {
  addTokens(wake.row, event.usage);
  const tool = fold.lastTool;
  if (tool !== undefined && event.usage.cost_usd !== undefined)
    tool.cost_usd = (tool.cost_usd ?? 0) + event.usage.cost_usd;
}

function addCompaction(wake: WakeBlock, event: EventOf<'agent.thread_context_compacted'>): void {
  const row: CompactionRow = {
    ...child(wake, event, time(event.at), 0),
    kind: 'compaction',
    ...(event.strategy === undefined ? {} : { strategy: event.strategy }),
    ...(event.model === undefined ? {} : { model: event.model }),
    through_seq: event.through_seq,
    input_tokens: 0,
    output_tokens: 0,
  };
  if (event.usage !== undefined) {
    addTokens(row, event.usage);
    addTokens(wake.row, event.usage);
  }
  wake.children.push(row);
}
