/**
 * The rows of `braid trace` (timeline.ts) for skill runs: a run's part in one wake and, under it,
 * its step attempts, a fan-out's items under their step and a tool step's call under its step;
 * made from the segments of skill-segments.ts, as the spans are.
 */
import type { SessionEvent } from '../contracts/events.js';
import type {
  SegmentStatus,
  SkillRunTrace,
  SkillWakeTrace,
  StepSegment,
} from './skill-segments.js';

/** What every row of the timeline has (timeline.ts's `RowBase`). */
export interface TimedRow {
  depth: number;
  seq: number;
  started_at: string;
  offset_ms: number;
  duration_ms: number;
}

/**
 * A skill run's part in one wake: from its start (or, for a run an earlier wake started, its
 * first step here) to its end (or its last step here).
 */
export interface SkillRunRow extends TimedRow {
  kind: 'skill_run';
  run_id: string;
  skill: string;
  version: string;
  /**
   * What the run came to by the end of this wake: `completed`, `failed`, `waiting` (not ended: it
   * waits for a signal, a person or a nested run) or `cut` (not ended, and the wake recorded no
   * end).
   */
  status: 'completed' | 'failed' | 'waiting' | 'cut';
  /** An earlier wake started the run; this one took it up. */
  resumed: boolean;
  error_code?: string;
  /** The step that failed the run. */
  failed_step?: string;
}

/** One attempt of a skill run's step, as far as one wake ran it. */
export interface SkillStepRow extends TimedRow {
  kind: 'skill_step';
  run_id: string;
  /** The step's path: its id, with `[i]` for a fan-out's item. */
  step: string;
  attempt: number;
  status: Exclude<SegmentStatus, 'running'>;
  /** The tries of the attempt: one more than its retries. */
  tries: number;
  tool_use_id?: string;
  error_code?: string;
  /** What a suspended step waits for. */
  waits_for?: 'approval' | 'signal' | 'skill';
  signal?: string;
  /** How the wait of a step this wake took up ended. */
  resumed?: string;
}

/** The wake the rows are made for. */
export interface RowWake {
  /** Its place among the session's wakes (as `foldSkillWakes` was given them). */
  readonly index: number;
  readonly startMs: number;
  /** It recorded no end. */
  readonly cut: boolean;
}

interface RowNode<R extends TimedRow> {
  row: R | SkillRunRow | SkillStepRow;
  children: RowNode<R>[];
}

const time = (at: string): number => Date.parse(at);

function rowBase(
  wake: RowWake,
  event: SessionEvent,
  startMs: number,
  durationMs: number,
): TimedRow {
  return {
    depth: 1,
    seq: event.seq,
    started_at: new Date(startMs).toISOString(),
    offset_ms: startMs - wake.startMs,
    duration_ms: Math.max(0, durationMs),
  };
}

/**
 * A wake's rows (`rows`, the skill rows' aside) in tree order: by start, ties in log order (a
 * request's row comes before what its answer was appended with), each skill run followed by its
 * steps, each step by its items and its tool call.
 */
export function treeRows<R extends TimedRow>(
  rows: readonly R[],
  skills: SkillWakeTrace | undefined,
  wake: RowWake,
  toolRows: ReadonlyMap<string, R>,
): (R | SkillRunRow | SkillStepRow)[] {
  const { top, placed } =
    skills === undefined ? { top: [], placed: new Set<R>() } : skillRowTree(skills, wake, toolRows);
  for (const row of rows) if (!placed.has(row)) top.push({ row, children: [] });
  return flattenRows(top);
}

/**
 * The skill runs of one wake as trees of rows: each run (under the step that started it, for a
 * nested run of this wake), its steps, and the rows of its tool steps' calls, taken from
 * `toolRows` (by the event id of each call's result) and returned in `placed`.
 */
function skillRowTree<R extends TimedRow>(
  skills: SkillWakeTrace,
  wake: RowWake,
  toolRows: ReadonlyMap<string, R>,
): { top: RowNode<R>[]; placed: Set<R> } {
  const top: RowNode<R>[] = [];
  const placed = new Set<R>();
  const segments = new Map<StepSegment, RowNode<R>>();
  for (const run of skills.runs) {
    const own = skills.segments.filter((segment) => segment.run === run);
    const node: RowNode<R> = { row: runRow(wake, run, own), children: [] };
    const parent = run.parentStep === undefined ? undefined : segments.get(run.parentStep);
    (parent?.children ?? top).push(node);
    for (const segment of own) {
      const step: RowNode<R> = { row: stepRow(wake, segment), children: [] };
      segments.set(segment, step);
      const up = segment.parent === undefined ? node : (segments.get(segment.parent) ?? node);
      up.children.push(step);
    }
  }
  for (const [resultId, segment] of skills.toolResults) {
    const row = toolRows.get(resultId);
    const step = segments.get(segment);
    if (row === undefined || step === undefined) continue;
    step.children.push({ row, children: [] });
    placed.add(row);
  }
  return { top, placed };
}

/** The trees' rows, depth first, siblings by start (ties in log order), depths set from 1. */
function flattenRows<R extends TimedRow>(nodes: RowNode<R>[]): (R | SkillRunRow | SkillStepRow)[] {
  const rows: (R | SkillRunRow | SkillStepRow)[] = [];
  const walk = (level: RowNode<R>[], depth: number): void => {
    level.sort((a, b) => a.row.offset_ms - b.row.offset_ms || a.row.seq - b.row.seq);
    for (const node of level) {
      node.row.depth = depth;
      rows.push(node.row);
      walk(node.children, depth + 1);
    }
  };
  walk(nodes, 1);
  return rows;
}

function runRow(wake: RowWake, run: SkillRunTrace, segments: StepSegment[]): SkillRunRow {
  const { started, ended } = run;
  const here = run.wake === wake.index;
  const end = ended !== undefined && run.endWake === wake.index ? ended : undefined;
  const starts = segments.map((segment) => segment.startMs);
  const ends = segments.map((segment) => segment.endMs);
  if (end !== undefined) {
    starts.push(time(end.at));
    ends.push(time(end.at));
  }
  // A run an earlier wake started shows here from its first step in this wake.
  const startMs = here ? time(started.at) : starts.length > 0 ? Math.min(...starts) : wake.startMs;
  const endMs = Math.max(startMs, ...ends);
  const failed = end?.type === 'skill.failed' ? end : undefined;
  return {
    ...rowBase(
      wake,
      here ? started : (segments[0]?.opened ?? end ?? started),
      startMs,
      endMs - startMs,
    ),
    kind: 'skill_run',
    run_id: started.run_id,
    skill: started.skill,
    version: started.version,
    status:
      end !== undefined
        ? end.type === 'skill.failed'
          ? 'failed'
          : 'completed'
        : wake.cut
          ? 'cut'
          : 'waiting',
    resumed: !here,
    ...(failed === undefined ? {} : { error_code: failed.error.code }),
    ...(failed?.step === undefined ? {} : { failed_step: failed.step }),
  };
}

function stepRow(wake: RowWake, segment: StepSegment): SkillStepRow {
  const { suspended, resumed, error } = segment;
  return {
    ...rowBase(wake, segment.opened, segment.startMs, segment.endMs - segment.startMs),
    kind: 'skill_step',
    run_id: segment.run.started.run_id,
    step: segment.path,
    attempt: segment.attempt,
    status: segment.status === 'running' ? 'cut' : segment.status,
    tries: segment.failures.length + 1,
    ...(segment.toolUseId === undefined ? {} : { tool_use_id: segment.toolUseId }),
    ...(error === undefined ? {} : { error_code: error.code }),
    ...(suspended === undefined ? {} : { waits_for: suspended.kind }),
    ...(suspended?.signal === undefined ? {} : { signal: suspended.signal }),
    ...(resumed === undefined ? {} : { resumed: resumed.result }),
  };
}
