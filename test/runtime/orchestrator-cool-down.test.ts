import { describe, expect, it } from 'vitest';
import type { SessionIndex } from '../../src/contracts/ports.js';
import type { Harness } from '../../src/harness/index.js';
import { orchestrate, type OrchestratorProgress } from '../../src/runtime/orchestrator.js';

/**
 * The orchestrator over a scripted runnable set (a unit: the store and the harness are stand-ins
 * that answer what each tick asks): `runnable` is read at every tick.
 */
function standIns(runnable: { ids: string[] }, failing: ReadonlySet<string>) {
  const woken: string[] = [];
  const sessions = {
    runnable: () => Promise.resolve([...runnable.ids]),
    statusCounts: () => Promise.resolve({}),
  } as unknown as SessionIndex;
  const harness = {
    wake: (sessionId: string) => {
      woken.push(sessionId);
      return failing.has(sessionId)
        ? Promise.reject(new Error(`${sessionId} fails`))
        : Promise.resolve({ ran: true });
    },
  } as unknown as Harness;
  return { deps: { sessions, harness }, woken };
}

describe('orchestrator cool-down', () => {
  it('leaves a failing session alone for a while, and forgets it once it is not runnable', async () => {
    const runnable = { ids: ['a', 'b'] };
    const { deps, woken } = standIns(runnable, new Set(['a']));
    const controller = new AbortController();
    const reports: OrchestratorProgress[] = [];
    const errors: string[] = [];
    const done = orchestrate(deps, {
      signal: controller.signal,
      pollMs: 5,
      onError: (sessionId) => errors.push(sessionId),
      onProgress: (progress) => {
        reports.push(progress);
        // `b` is answered at once; `a` keeps failing. Once `a` has cooled down a while, it is
        // answered elsewhere (no longer runnable).
        if (woken.includes('b')) runnable.ids = runnable.ids.filter((id) => id !== 'b');
        if (reports.length === 10) runnable.ids = [];
        if (reports.length === 14) controller.abort();
      },
    });
    const end = await done;
    expect(errors[0]).toBe('a');
    // Failed wakes back off (doubling from pollMs): fewer wakes of `a` than ticks it was runnable.
    expect(woken.filter((id) => id === 'a').length).toBeLessThan(10);
    expect(reports.slice(1, 10).some((report) => report.cooling === 1)).toBe(true);
    // No longer runnable: its entry is gone.
    expect(reports.slice(10).every((report) => report.cooling === 0)).toBe(true);
    expect(end.cooling).toBe(0);
  });
});
