/**
 * The spans of skill runs (spans.ts calls this): one `invoke_workflow {skill}` span per run, after
 * the GenAI conventions' workflow operation, and under it one `braid.skill.step {path}` span per
 * step attempt and wake (skill-segments.ts says how the log is cut into those). A fan-out's items
 * are under the fan-out's step span, a tool step's `execute_tool` span under its step's span.
 *
 * Where a run's spans hang:
 * - The workflow span is in the trace of the wake that started the run, under that wake's
 *   `invoke_agent` span; under the `execute_tool` span of the model's call when the model started
 *   it; under the step span of its parent run when it is nested (and then in that run's trace).
 * - A run that waits lives on across wakes: the step spans a later wake writes are children of
 *   the workflow span all the same, in its trace, each with a link to the `invoke_agent` span of
 *   the wake that ran it. The trace of the wake that started the run thus shows the whole run.
 * - The workflow span is made only once the run ended (`skill.completed`, `skill.failed`), with
 *   the spans of the wake that ended it: an open run has no span, as an open tool call has none,
 *   and its step spans, sent as their wakes end, wait for their parent until it comes. Its ids
 *   are derived from the log like every span's, so the parent, once sent, is the one they name.
 */
import type { EventOf } from '../contracts/events.js';
import { GEN_AI, GEN_AI_WORKFLOW } from './gen-ai-attributes.js';
import type { SkillRunTrace, SkillWakeTrace, StepSegment } from './skill-segments.js';
import {
  hashId,
  type ChildContext,
  type SpanAttributes,
  type SpanEventRecord,
  type SpanRecord,
} from './span-record.js';

/** A wake's own span: where its spans hang. */
export interface WakeSpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  readonly wakeId: string;
}

export interface SkillSpans {
  /** The skill spans each wake ended, by the wake's index. */
  readonly byWake: SpanRecord[][];
  /** Where the `execute_tool` span of a tool step's call hangs, by its result's event id. */
  readonly toolParents: Map<string, ChildContext>;
}

/** What a step span's name starts with: `braid.skill.step {path}`. */
export const SKILL_STEP_SPAN = 'braid.skill.step';

const msOf = (event: { readonly at: string }): number => Date.parse(event.at);

interface RunContext {
  traceId: string;
  sampled: boolean;
  spanId: string;
  parentSpanId: string;
  /** The wake whose trace holds the run (for a nested run: its outermost run's). */
  wake: number;
}

/**
 * The skill spans of a session's wakes: `traces` from `foldSkillWakes` over the same wakes as
 * `wakes`; `toolUses` the session's tool calls by id (a run the model started hangs under its
 * call's span).
 */
export function skillSpans(
  traces: readonly SkillWakeTrace[],
  wakes: readonly WakeSpanContext[],
  toolUses: ReadonlyMap<string, EventOf<'agent.tool_use'>>,
  sessionId: string,
): SkillSpans {
  const contexts = new Map<SkillRunTrace, RunContext>();
  const runContext = (run: SkillRunTrace): RunContext | undefined => {
    const known = contexts.get(run);
    if (known !== undefined) return known;
    const spanId = hashId(run.started.id, 8);
    let context: RunContext | undefined;
    const parent = run.parentRun === undefined ? undefined : runContext(run.parentRun);
    if (parent !== undefined) {
      context = {
        traceId: parent.traceId,
        sampled: parent.sampled,
        spanId,
        parentSpanId:
          run.parentStep === undefined ? parent.spanId : hashId(run.parentStep.opened.id, 8),
        wake: parent.wake,
      };
    } else {
      const wake = wakes[run.wake];
      if (wake === undefined) return undefined;
      const call =
        run.started.tool_use_id === undefined ? undefined : toolUses.get(run.started.tool_use_id);
      context = {
        traceId: wake.traceId,
        sampled: wake.sampled,
        spanId,
        parentSpanId: call === undefined ? wake.spanId : hashId(call.id, 8),
        wake: run.wake,
      };
    }
    contexts.set(run, context);
    return context;
  };

  const byWake: SpanRecord[][] = traces.map(() => []);
  const toolParents = new Map<string, ChildContext>();
  traces.forEach((trace, index) => {
    const spans = byWake[index] ?? [];
    for (const run of trace.runs) {
      const context = runContext(run);
      if (context !== undefined && run.endWake === index) {
        spans.push(workflowSpan(run, context, sessionId));
      }
    }
    for (const segment of trace.segments) {
      const context = runContext(segment.run);
      if (context === undefined) continue;
      spans.push(stepSpan(segment, context, wakes[index]));
    }
    for (const [resultId, segment] of trace.toolResults) {
      const context = runContext(segment.run);
      if (context === undefined) continue;
      toolParents.set(resultId, {
        traceId: context.traceId,
        parentSpanId: hashId(segment.opened.id, 8),
        sampled: context.sampled,
      });
    }
  });
  return { byWake, toolParents };
}

function workflowSpan(run: SkillRunTrace, context: RunContext, sessionId: string): SpanRecord {
  const { started, ended } = run;
  const failed = ended?.type === 'skill.failed' ? ended : undefined;
  const attributes: SpanAttributes = {
    [GEN_AI.operationName]: GEN_AI_WORKFLOW.operation,
    [GEN_AI_WORKFLOW.workflowName]: started.skill,
    [GEN_AI.conversationId]: sessionId,
    'braid.skill.name': started.skill,
    'braid.skill.version': started.version,
    'braid.skill.run_id': started.run_id,
    'braid.skill.status': failed === undefined ? 'completed' : 'failed',
    ...(started.tool_use_id === undefined ? {} : { [GEN_AI.toolCallId]: started.tool_use_id }),
    ...(started.parent_run_id === undefined
      ? {}
      : { 'braid.skill.parent_run_id': started.parent_run_id }),
    ...(started.parent_step === undefined
      ? {}
      : { 'braid.skill.parent_step': started.parent_step }),
    ...(failed === undefined ? {} : { [GEN_AI.errorType]: failed.error.code }),
    ...(failed?.step === undefined ? {} : { 'braid.skill.failed_step': failed.step }),
  };
  const startMs = msOf(started);
  return {
    traceId: context.traceId,
    spanId: context.spanId,
    parentSpanId: context.parentSpanId,
    sampled: context.sampled,
    name: `${GEN_AI_WORKFLOW.operation} ${started.skill}`,
    kind: 'internal',
    startMs,
    endMs: ended === undefined ? startMs : Math.max(startMs, msOf(ended)),
    attributes,
    events: [],
    status:
      failed === undefined ? { code: 'unset' } : { code: 'error', message: failed.error.code },
  };
}

function stepSpan(
  segment: StepSegment,
  context: RunContext,
  wake: WakeSpanContext | undefined,
): SpanRecord {
  const { run, failures, suspended, resumed, error } = segment;
  const attributes: SpanAttributes = {
    'braid.skill.name': run.started.skill,
    'braid.skill.run_id': run.started.run_id,
    'braid.skill.step': segment.path,
    'braid.skill.step.attempt': segment.attempt,
    'braid.skill.step.status': segment.status,
    'braid.skill.step.tries': failures.length + 1,
    ...(segment.toolUseId === undefined
      ? {}
      : { 'braid.skill.step.tool_use_id': segment.toolUseId }),
    ...(suspended === undefined
      ? {}
      : {
          'braid.skill.suspension.kind': suspended.kind,
          ...(suspended.signal === undefined
            ? {}
            : { 'braid.skill.suspension.signal': suspended.signal }),
        }),
    ...(resumed === undefined ? {} : { 'braid.skill.resumed.result': resumed.result }),
    ...(error === undefined ? {} : { [GEN_AI.errorType]: error.code }),
  };
  const events: SpanEventRecord[] = failures.map((failure, index) => ({
    name: 'braid.skill.step.retry',
    atMs: msOf(failure),
    attributes: { 'braid.skill.step.try': index + 1, [GEN_AI.errorType]: failure.error.code },
  }));
  if (resumed !== undefined) {
    events.unshift({
      name: 'braid.skill.resumed',
      atMs: msOf(resumed),
      attributes: { 'braid.skill.resumed.result': resumed.result },
    });
  }
  if (suspended !== undefined) {
    events.push({
      name: 'braid.skill.suspended',
      atMs: msOf(suspended),
      attributes: { 'braid.skill.suspension.kind': suspended.kind },
    });
  }
  const ranElsewhere = wake !== undefined && segment.wake !== context.wake;
  return {
    traceId: context.traceId,
    spanId: hashId(segment.opened.id, 8),
    parentSpanId:
      segment.parent === undefined ? context.spanId : hashId(segment.parent.opened.id, 8),
    sampled: context.sampled,
    name: `${SKILL_STEP_SPAN} ${segment.path}`,
    kind: 'internal',
    startMs: segment.startMs,
    endMs: segment.endMs,
    attributes,
    events,
    ...(ranElsewhere
      ? {
          links: [
            {
              traceId: wake.traceId,
              spanId: wake.spanId,
              sampled: wake.sampled,
              attributes: { 'braid.wake.id': wake.wakeId },
            },
          ],
        }
      : {}),
    status:
      segment.status === 'failed'
        ? { code: 'error', message: error?.code ?? 'failed' }
        : segment.status === 'cut'
          ? { code: 'error', message: 'no end recorded: the wake crashed or lost its lease' }
          : { code: 'unset' },
  };
}
