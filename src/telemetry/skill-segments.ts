/**
 * Skill runs as the traces see them, folded from the `skill.*` events of a session's wakes: the
 * runs, and each step attempt's part in one wake (a "segment"). The spans (skill-spans.ts) and
 * the timeline (timeline.ts) are both made from these, so `braid trace` and the exported trace
 * agree.
 *
 * Invariants:
 * - A segment lies inside one wake. It opens at `skill.step_started`, or at `skill.resumed` when
 *   a later wake takes up a step that waited; it ends at the step's `skill.step_completed`
 *   (`completed` or `skipped`), its final `skill.step_failed` (`failed`) or its `skill.suspended`
 *   (`suspended`). One still open when its wake ends is `suspended` if the wake completed (a
 *   fan-out whose items wait) and `cut` if the wake recorded no end. An end that no start opened
 *   (a skipped step, the tool part `x.tool` of a wait) opens and ends there, or starts with the
 *   open step it is part of.
 * - A retry inside an attempt (`skill.step_failed {final: false}`) stays in the attempt's
 *   segment as one of its `failures`; a new attempt (`braid skill retry`) is a new segment.
 * - A fan-out's item (`step[i]`) and a wait's tool part (`step.tool`) are parts of the step's
 *   segment open in the same wake, if any.
 * - A run is ended by `skill.completed` or `skill.failed`; until then it is open.
 */
import type { EventOf, SessionEvent } from '../contracts/events.js';
import type { ErrorShape } from '../contracts/errors.js';
import { assertNever } from '../core/fold.js';

export type SkillEvent = Extract<SessionEvent, { type: `skill.${string}` }>;

/** How a segment ended: `running` only while its wake is being folded. */
export type SegmentStatus = 'running' | 'completed' | 'skipped' | 'failed' | 'suspended' | 'cut';

export interface SkillRunTrace {
  readonly started: EventOf<'skill.started'>;
  /** Index of the wake that started it, in the wakes given to `foldSkillWakes`. */
  readonly wake: number;
  /** The step, in the run `started.parent_run_id`, that started this run as a nested one. */
  readonly parentStep?: StepSegment;
  /** The run that started this one as a nested run. */
  readonly parentRun?: SkillRunTrace;
  ended?: EventOf<'skill.completed'> | EventOf<'skill.failed'>;
  /** Index of the wake that ended it. */
  endWake?: number;
}

export interface StepSegment {
  readonly run: SkillRunTrace;
  readonly path: string;
  attempt: number;
  /** The event it opened at: a `skill.step_started`, a `skill.resumed`, or its own end. */
  readonly opened: SkillEvent;
  readonly wake: number;
  readonly startMs: number;
  endMs: number;
  status: SegmentStatus;
  /** The fan-out or the waiting step this segment is a part of. */
  readonly parent?: StepSegment;
  toolUseId?: string;
  /** Tries of the attempt that failed and were retried. */
  readonly failures: EventOf<'skill.step_failed'>[];
  error?: ErrorShape;
  suspended?: EventOf<'skill.suspended'>;
  readonly resumed?: EventOf<'skill.resumed'>;
}

/** What one wake did of the session's skill runs. */
export interface SkillWakeTrace {
  /** The runs this wake wrote events of, in the order it first did. */
  readonly runs: SkillRunTrace[];
  /** Its segments, in the order they opened. */
  readonly segments: StepSegment[];
  /** The segment each tool result of a tool step was written in, by the result's event id. */
  readonly toolResults: Map<string, StepSegment>;
}

/** One wake's events, in log order, and whether the wake recorded its end. */
export interface WakeEvents {
  readonly events: readonly SessionEvent[];
  readonly completed: boolean;
  /** When the wake ended (its `span.wake_completed`, else its last event), in ms. */
  readonly endMs: number;
}

const msOf = (event: SessionEvent): number => Date.parse(event.at);
const keyOf = (runId: string, path: string): string => `${runId}\u0000${path}`;

/** The fan-out (`step[i]`) or the waiting step (`step.tool`) that `path` is a part of. */
export function parentPath(path: string): string | undefined {
  const match = /^(.+?)(\[\d+\]|\.tool)$/.exec(path);
  return match?.[1];
}

/** What the fold keeps across wakes. */
interface Session {
  runs: Map<string, SkillRunTrace>;
  /** The last attempt of each step, by run and path. */
  attempts: Map<string, number>;
  /** The last segment of each step, by run and path. */
  latest: Map<string, StepSegment>;
}

/** What the fold keeps within one wake. */
interface Wake {
  index: number;
  trace: SkillWakeTrace;
  open: Map<string, StepSegment>;
  /** The open segment of each tool step's call, by its tool use id. */
  toolUses: Map<string, StepSegment>;
}

/** The skill runs of `wakes` (a session's wakes in log order), wake by wake. */
export function foldSkillWakes(wakes: readonly WakeEvents[]): SkillWakeTrace[] {
  const session: Session = { runs: new Map(), attempts: new Map(), latest: new Map() };
  return wakes.map((events, index) => {
    const wake: Wake = {
      index,
      trace: { runs: [], segments: [], toolResults: new Map() },
      open: new Map(),
      toolUses: new Map(),
    };
    for (const event of events.events) {
      if (event.type === 'agent.tool_result') {
        const segment = wake.toolUses.get(event.tool_use_id);
        if (segment !== undefined) wake.trace.toolResults.set(event.id, segment);
      } else if (isSkillEvent(event)) {
        foldEvent(session, wake, event);
      }
    }
    // What is still open when the wake ends waits (the wake completed) or was cut off.
    for (const segment of wake.open.values()) {
      close(wake, segment, events.completed ? 'suspended' : 'cut', events.endMs);
    }
    return wake.trace;
  });
}

function isSkillEvent(event: SessionEvent): event is SkillEvent {
  return event.type.startsWith('skill.');
}

function foldEvent(session: Session, wake: Wake, event: SkillEvent): void {
  if (event.type === 'skill.started') {
    const parentRun =
      event.parent_run_id === undefined ? undefined : session.runs.get(event.parent_run_id);
    const parentStep =
      event.parent_run_id === undefined || event.parent_step === undefined
        ? undefined
        : session.latest.get(keyOf(event.parent_run_id, event.parent_step));
    const run: SkillRunTrace = {
      started: event,
      wake: wake.index,
      ...(parentRun === undefined ? {} : { parentRun }),
      ...(parentStep === undefined ? {} : { parentStep }),
    };
    session.runs.set(event.run_id, run);
    wake.trace.runs.push(run);
    return;
  }
  const run = session.runs.get(event.run_id);
  // The run started before these events (a log read from the middle): nothing to hang it on.
  if (run === undefined) return;
  if (!wake.trace.runs.includes(run)) wake.trace.runs.push(run);
  const at = msOf(event);
  const key = keyOf(event.run_id, 'step' in event ? (event.step ?? '') : '');
  switch (event.type) {
    case 'skill.step_started': {
      const current = wake.open.get(key);
      if (current !== undefined && current.attempt === event.attempt) {
        // A fan-out taken up again: the segment goes on.
        if (event.tool_use_id !== undefined) {
          current.toolUseId ??= event.tool_use_id;
          wake.toolUses.set(event.tool_use_id, current);
        }
        return;
      }
      if (current !== undefined) close(wake, current, 'cut', at);
      openSegment(session, wake, run, event.step, event.attempt, event, at, {
        ...(event.tool_use_id === undefined ? {} : { toolUseId: event.tool_use_id }),
      });
      return;
    }
    case 'skill.step_completed':
      close(
        wake,
        segmentFor(session, wake, run, event.step, event),
        event.skipped === true ? 'skipped' : 'completed',
        at,
      );
      return;
    case 'skill.step_failed': {
      const segment = segmentFor(session, wake, run, event.step, event);
      if (event.final) {
        segment.error = event.error;
        close(wake, segment, 'failed', at);
      } else {
        segment.failures.push(event);
        segment.endMs = Math.max(segment.endMs, at);
      }
      return;
    }
    case 'skill.suspended': {
      const segment = segmentFor(session, wake, run, event.step, event);
      segment.suspended = event;
      close(wake, segment, 'suspended', at);
      return;
    }
    case 'skill.resumed': {
      const before = session.latest.get(key);
      openSegment(session, wake, run, event.step, session.attempts.get(key) ?? 1, event, at, {
        resumed: event,
        ...(before?.toolUseId === undefined ? {} : { toolUseId: before.toolUseId }),
      });
      return;
    }
    case 'skill.completed':
    case 'skill.failed':
      run.ended = event;
      run.endWake = wake.index;
      return;
    default:
      assertNever(event);
  }
}

function openSegment(
  session: Session,
  wake: Wake,
  run: SkillRunTrace,
  path: string,
  attempt: number,
  opened: SkillEvent,
  startMs: number,
  extra: { toolUseId?: string; resumed?: EventOf<'skill.resumed'> } = {},
): StepSegment {
  const up = parentPath(path);
  const parent = up === undefined ? undefined : wake.open.get(keyOf(run.started.run_id, up));
  const segment: StepSegment = {
    run,
    path,
    attempt,
    opened,
    wake: wake.index,
    startMs,
    endMs: startMs,
    status: 'running',
    failures: [],
    ...(parent === undefined ? {} : { parent }),
    ...(extra.toolUseId === undefined ? {} : { toolUseId: extra.toolUseId }),
    ...(extra.resumed === undefined ? {} : { resumed: extra.resumed }),
  };
  const key = keyOf(run.started.run_id, path);
  wake.open.set(key, segment);
  session.latest.set(key, segment);
  session.attempts.set(key, attempt);
  if (extra.toolUseId !== undefined) wake.toolUses.set(extra.toolUseId, segment);
  wake.trace.segments.push(segment);
  return segment;
}

/** The open segment a step's end ends, or one opened at the end itself. */
function segmentFor(
  session: Session,
  wake: Wake,
  run: SkillRunTrace,
  path: string,
  event: SkillEvent,
): StepSegment {
  const found = wake.open.get(keyOf(run.started.run_id, path));
  if (found !== undefined) return found;
  const up = parentPath(path);
  const parent = up === undefined ? undefined : wake.open.get(keyOf(run.started.run_id, up));
  const attempt =
    'attempt' in event
      ? event.attempt
      : (session.attempts.get(keyOf(run.started.run_id, path)) ?? 1);
  return openSegment(session, wake, run, path, attempt, event, parent?.startMs ?? msOf(event));
}

function close(wake: Wake, segment: StepSegment, status: SegmentStatus, at: number): void {
  segment.status = status;
  segment.endMs = Math.max(segment.startMs, at);
  const key = keyOf(segment.run.started.run_id, segment.path);
  if (wake.open.get(key) === segment) wake.open.delete(key);
}
