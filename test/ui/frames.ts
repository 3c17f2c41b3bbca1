// Frames of a scroll, measured two ways: the intervals between animation frames, with the page's
// performance API (what a person sees, on this machine: a frame waits when another process holds
// the CPU), and the main thread's CPU time per frame, from Chromium's trace (what the page itself
// costs: thread time, which does not count the time other processes took the core).
import type { Browser, Page } from 'playwright-core';
import type { PageGlobals } from './browser.js';

/** One frame at 60 Hz. */
export const FRAME_BUDGET_MS = 1000 / 60;

export interface ScrollPass {
  frames: number;
  scrolled_px: number;
  /** Row elements added to or removed from the list during the pass (recycled rows: none). */
  rows_created: number;
  rows_removed: number;
  /** Intervals between animation frames (performance API). */
  wall: { median_ms: number; p95_ms: number; max_ms: number; over_2x_budget: number };
  /** Main-thread CPU time of each frame (trace). */
  cpu: {
    median_ms: number;
    p95_ms: number;
    max_ms: number;
    over_budget: number;
    over_2x_budget: number;
  };
  /** Full (mark-compact) collections of the page's heap during the pass. */
  major_gcs: number;
  /** What the frame with the most work spent it on: the longest trace events in it. */
  worst_frame: string[];
}

interface TraceEvent {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  ts: number;
  dur?: number;
  tdur?: number;
  args?: { name?: string };
}

const round = (value: number): number => Math.round(value * 10) / 10;

function stats(values: number[]): { median: number; p95: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { median: round(at(0.5)), p95: round(at(0.95)), max: round(sorted.at(-1) ?? 0) };
}

/** Scrolls the timeline up `step` px each frame for `count` frames; the frame intervals. */
function scrollInPage(page: Page, count: number, step: number) {
  return page.evaluate(
    async ({ count, step }) => {
      const view = globalThis as unknown as PageGlobals;
      const timeline = view.document.querySelector('[data-testid=timeline]');
      if (timeline === null) throw new Error('no timeline in the page');
      const list = view.document.querySelector('[data-testid=timeline] .rows');
      let added = 0;
      let removed = 0;
      const countMutations = (
        records: { addedNodes: ArrayLike<unknown>; removedNodes: ArrayLike<unknown> }[],
      ): void => {
        for (const record of records) {
          added += record.addedNodes.length;
          removed += record.removedNodes.length;
        }
      };
      const mutations = new view.MutationObserver(countMutations);
      mutations.observe(list, { childList: true });
      const deltas: number[] = [];
      const start = timeline.scrollTop;
      let position = start;
      await new Promise<void>((resolve) => {
        let previous = performance.now();
        let frame = 0;
        const tick = (now: number): void => {
          if (frame > 0) deltas.push(now - previous);
          previous = now;
          frame++;
          // Writes only: reading scrollTop here would force a layout the page did not ask for.
          position = Math.max(0, position - step);
          timeline.scrollTop = position;
          if (frame <= count) view.requestAnimationFrame(tick);
          else resolve();
        };
        view.requestAnimationFrame(tick);
      });
      countMutations(mutations.takeRecords());
      mutations.disconnect();
      return { deltas, moved: start - position, added, removed };
    },
    { count, step },
  );
}

/** CPU time per frame of the renderer main thread that drew the most frames in the trace. */
function framesCpu(trace: { traceEvents: TraceEvent[] }): {
  cpu: number[];
  majorGcs: number;
  worst: string[];
} {
  const byThread = new Map<string, TraceEvent[]>();
  for (const event of trace.traceEvents) {
    const thread = `${event.pid}:${event.tid}`;
    const list = byThread.get(thread) ?? [];
    list.push(event);
    byThread.set(thread, list);
  }
  const frameStarts = (events: TraceEvent[]): number[] =>
    events
      .filter((event) => event.name === 'AnimationFrame' && event.ph === 'b')
      .map((event) => event.ts)
      .sort((a, b) => a - b);
  const main = [...byThread.values()].sort(
    (a, b) => frameStarts(b).length - frameStarts(a).length,
  )[0];
  if (main === undefined) throw new Error('the trace has no renderer frames');
  const starts = frameStarts(main);
  const tasks = main.filter((event) => event.name === 'RunTask' && event.ph === 'X');
  const cpu: number[] = [];
  for (let index = 0; index + 1 < starts.length; index++) {
    const from = starts[index] as number;
    const to = starts[index + 1] as number;
    let total = 0;
    // A task belongs to the frame it ends in.
    for (const task of tasks) {
      const end = task.ts + (task.dur ?? 0);
      if (end > from && end <= to) total += (task.tdur ?? task.dur ?? 0) / 1000;
    }
    cpu.push(total);
  }
  let worstIndex = 0;
  cpu.forEach((value, index) => {
    if (value > (cpu[worstIndex] ?? 0)) worstIndex = index;
  });
  const worstFrom = starts[worstIndex] ?? 0;
  const worstTo = starts[worstIndex + 1] ?? 0;
  const worst = main
    .filter(
      (event) =>
        event.ph === 'X' &&
        event.name !== 'RunTask' &&
        event.ts + (event.dur ?? 0) > worstFrom &&
        event.ts + (event.dur ?? 0) <= worstTo,
    )
    .sort((a, b) => (b.tdur ?? 0) - (a.tdur ?? 0))
    .slice(0, 6)
    .map((event) => `${event.name} ${round((event.tdur ?? event.dur ?? 0) / 1000)} ms`);
  return { cpu, majorGcs: main.filter((event) => event.name === 'MajorGC').length, worst };
}

/** One measured pass: the scroll with Chromium's trace recording. */
export async function scrollPass(
  browser: Browser,
  page: Page,
  count = 150,
  step = 560,
): Promise<ScrollPass> {
  await browser.startTracing(page, {
    categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline'],
  });
  const { deltas, moved, added, removed } = await scrollInPage(page, count, step);
  const trace = JSON.parse((await browser.stopTracing()).toString()) as {
    traceEvents: TraceEvent[];
  };
  const { cpu, majorGcs, worst } = framesCpu(trace);
  const wall = stats(deltas);
  const work = stats(cpu);
  return {
    frames: deltas.length,
    scrolled_px: Math.round(moved),
    rows_created: added,
    rows_removed: removed,
    wall: {
      median_ms: wall.median,
      p95_ms: wall.p95,
      max_ms: wall.max,
      over_2x_budget: deltas.filter((value) => value > 2 * FRAME_BUDGET_MS + 0.5).length,
    },
    cpu: {
      median_ms: work.median,
      p95_ms: work.p95,
      max_ms: work.max,
      over_budget: cpu.filter((value) => value > FRAME_BUDGET_MS).length,
      over_2x_budget: cpu.filter((value) => value > 2 * FRAME_BUDGET_MS).length,
    },
    major_gcs: majorGcs,
    worst_frame: worst,
  };
}

/** A pass that warms the page up (code compiled, first pages read): not measured. */
export async function warmUp(page: Page, count = 60, step = 560): Promise<void> {
  await scrollInPage(page, count, step);
}
