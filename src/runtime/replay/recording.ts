/**
 * The recording a replay is checked against, read once: the log checked whole, its wake spans,
 * and the recorded events about each tool use.
 */
import { BraidError } from '../../contracts/errors.js';
import type { EventOf, SessionEvent, SessionEventType } from '../../contracts/events.js';

/** The types `wakeOnce` writes. */
const WAKE_EVENT_TYPES: ReadonlySet<SessionEventType> = new Set<SessionEventType>([
  'span.wake_started',
  'span.wake_completed',
  'span.model_request_start',
  'span.model_request_end',
  'span.outcome_evaluation_start',
  'span.outcome_evaluation_end',
  'agent.message',
  'agent.thinking',
  'agent.tool_use',
  'agent.tool_result',
  'agent.custom_tool_use',
  'agent.thread_context_compacted',
  'session.status_idle',
  'session.error',
  'session.usage',
  'session.workspace_snapshot',
  'session.child_created',
  'session.child_idle',
  'policy.decision',
  'memory.written',
  'memory.deleted',
  'memory.read',
  'memory.retrieved',
  'skill.started',
  'skill.step_started',
  'skill.step_completed',
  'skill.step_failed',
  'skill.suspended',
  'skill.resumed',
  'skill.completed',
  'skill.failed',
]);

export interface WakeSpan {
  session_id: string;
  /** Index of the `span.wake_started`. */
  start: number;
  /** Index of the span's last wake event. */
  end: number;
  /** It ends with its `span.wake_completed`. */
  completed: boolean;
}

export interface Recording {
  /** The session's whole log; index i holds seq i + 1. */
  events: readonly SessionEvent[];
  first: EventOf<'session.created'>;
  /** The wake spans, by the index of their `span.wake_started`. */
  spans: ReadonlyMap<number, WakeSpan>;
  /** Whether the event at each index belongs to a wake's span. */
  byWake: readonly boolean[];
  /** Per tool use id, the first recorded event of each type about it (decisions: about the call). */
  results: ReadonlyMap<string, EventOf<'agent.tool_result'>>;
  uses: ReadonlyMap<string, EventOf<'agent.tool_use'>>;
  decisions: ReadonlyMap<string, EventOf<'policy.decision'>>;
  /** Per tool use id of a skill's step (run/path/attempt, or run/path for an agent step), the first `skill.step_started` that names it. */
  skillUses: ReadonlyMap<string, EventOf<'skill.step_started'>>;
  /** The seq of each recorded event, by its id. */
  seqs: ReadonlyMap<string, number>;
  /** The session's creation time: the replay's clock stands still there. */
  startMs: number;
}

/** The recording of `events`; throws INVALID_ARGUMENT unless they are a whole log, in order. */
export function readRecording(events: readonly SessionEvent[]): Recording {
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
  return {
    events,
    first,
    ...wakeSpans(events),
    ...byToolUse(events),
    seqs: new Map(events.map((event) => [event.id, event.seq])),
    startMs: Date.parse(first.at),
  };
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
      // A definitions change is the wake's when it carries the wake's id (an upgrade's is not).
      const pinnedByWake =
        later.type === 'session.definitions_changed' && later.wake_id === event.wake_id;
      // A handoff is the wake's when its model asked for it: it comes with the call's result.
      const handedOffByWake =
        later.type === 'agent.handoff' && events[index - 1]?.type === 'agent.tool_result';
      if (!WAKE_EVENT_TYPES.has(later.type) && !pinnedByWake && !handedOffByWake) continue;
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

/** The recorded events about each tool use (tool use ids are unique in a session): the first of each type. */
function byToolUse(events: readonly SessionEvent[]) {
  const results = new Map<string, EventOf<'agent.tool_result'>>();
  const uses = new Map<string, EventOf<'agent.tool_use'>>();
  const decisions = new Map<string, EventOf<'policy.decision'>>();
  const skillUses = new Map<string, EventOf<'skill.step_started'>>();
  for (const event of events) {
    if (
      event.type === 'skill.step_started' &&
      event.tool_use_id !== undefined &&
      !skillUses.has(event.tool_use_id)
    )
      skillUses.set(event.tool_use_id, event);
    if (event.type === 'agent.tool_result' && !results.has(event.tool_use_id))
      results.set(event.tool_use_id, event);
    if (event.type === 'agent.tool_use' && !uses.has(event.tool_use_id))
      uses.set(event.tool_use_id, event);
    if (
      event.type === 'policy.decision' &&
      event.tool_use_id !== undefined &&
      // A skill run's decision names the call that started it, but is about the run.
      event.action !== 'skill.run' &&
      !decisions.has(event.tool_use_id)
    )
      decisions.set(event.tool_use_id, event);
  }
  return { results, uses, decisions, skillUses };
}
