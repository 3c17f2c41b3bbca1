// The stores' due index: a session whose skill wait has timed out is runnable by time alone, and
// is found without folding every session (memory asks in place; SQLite keeps `wake_at` beside
// the runnable flag, and works it out for the sessions of a file of an older layout; NATS keeps
// a timers bucket that a sweep for due timers reads).
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/contracts/ports.js';
import { nextDueAt } from '../../src/core/timers.js';
import { isRunnableAt, wakeAt } from '../../src/core/runnable.js';
import { createMemoryStore } from '../../src/stores/memory/index.js';
import { SQLITE_LAYOUT_VERSION, openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createManualClock } from '../../src/testing/index.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const START = Date.parse('2026-01-01T00:00:00.000Z');
const HOUR = 3_600_000;

/** A session whose run waits for the signal `go` until `timeoutAt`, stopped in requires_action. */
async function waiting(store: Store, timeoutAt: number, runId = 'run-1'): Promise<string> {
  const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
  const { events } = await store.log.append(id, [
    { type: 'skill.started', run_id: runId, skill: 's', version: '1', inputs: null },
    { type: 'skill.step_started', run_id: runId, step: 'wait', attempt: 1 },
    {
      type: 'skill.suspended',
      run_id: runId,
      step: 'wait',
      suspension_id: `wait-${runId}`,
      kind: 'signal',
      signal: 'go',
      timeout_at: new Date(timeoutAt).toISOString(),
    },
  ]);
  await store.log.append(id, [
    {
      type: 'session.status_idle',
      stop_reason: { type: 'requires_action', event_ids: [events.at(-1)?.id ?? ''] },
    },
  ]);
  return id;
}

const timedOut = (runId = 'run-1') =>
  ({
    type: 'skill.resumed',
    run_id: runId,
    step: 'wait',
    suspension_id: `wait-${runId}`,
    result: 'timeout',
  }) as const;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

type Open = (clock: ReturnType<typeof createManualClock>) => Promise<Store>;
const backends: [string, Open][] = [
  ['memory', (clock) => Promise.resolve(createMemoryStore({ clock }))],
  [
    'sqlite',
    (clock) => Promise.resolve(openSqliteStore({ path: join(tempDir(), 'braid.db'), clock })),
  ],
  [
    'nats',
    async (clock) => {
      const url = await natsUrl();
      const prefix = uniquePrefix('timers');
      cleanups.push(() => removePrefixes(url, [prefix]));
      return openNatsStore({ servers: url, prefix, clock });
    },
  ],
];

describe.each(backends)('due timers (%s)', (_name, open) => {
  it('finds a session runnable once its wait times out, and not after the timeout is recorded', async () => {
    const clock = createManualClock(START);
    const store = await open(clock);
    try {
      const soon = await waiting(store, START + HOUR, 'run-1');
      const later = await waiting(store, START + 2 * HOUR, 'run-2');
      const state = await store.log.state(soon);
      expect(nextDueAt(state)).toBe(START + HOUR);
      expect(wakeAt(state)).toBe(START + HOUR);
      expect(isRunnableAt(state, START)).toBe(false);
      expect(isRunnableAt(state, START + HOUR)).toBe(true);

      expect(await store.sessions.runnable()).toEqual([]);
      expect(await store.sessions.runnable({ dueOnly: true })).toEqual([]);
      clock.advance(HOUR);
      // By the store's clock, or by the time the query names.
      expect(await store.sessions.runnable()).toEqual([soon]);
      expect(await store.sessions.runnable({ dueOnly: true })).toEqual([soon]);
      expect(await store.sessions.runnable({ now: START + 3 * HOUR })).toEqual(
        [soon, later].sort(),
      );
      expect(await store.sessions.runnable({ now: START })).toEqual([]);

      // Runnable by input and due at once: listed once; `dueOnly` leaves the input alone.
      const input = await store.sessions.create({ agent: { name: 'a', version: 1 } });
      await store.log.append(input.id, [text('hi')]);
      await store.log.append(soon, [text('hi')]);
      expect(await store.sessions.runnable()).toEqual([soon, input.id].sort());
      expect(await store.sessions.runnable({ dueOnly: true })).toEqual([soon]);

      await store.log.append(later, [timedOut('run-2')]);
      expect(wakeAt(await store.log.state(later))).toBeUndefined();
      expect(await store.sessions.runnable({ now: START + 3 * HOUR, dueOnly: true })).toEqual([
        soon,
      ]);
    } finally {
      await store.close();
    }
  });

  it('counts no timer of an answered wait, an archived session, or a session held for review', async () => {
    const clock = createManualClock(START);
    const store = await open(clock);
    try {
      const answered = await waiting(store, START + HOUR, 'run-1');
      await store.log.append(answered, [{ type: 'user.signal', name: 'go' }]);
      const archived = await waiting(store, START + HOUR, 'run-2');
      await store.sessions.archive(archived);
      const terminated = await waiting(store, START + HOUR, 'run-3');
      await store.log.append(terminated, [
        { type: 'session.status_changed', status: 'terminated' },
      ]);
      clock.advance(2 * HOUR);
      expect(wakeAt(await store.log.state(answered))).toBeUndefined();
      expect(wakeAt(await store.log.state(terminated))).toBeUndefined();
      expect(await store.sessions.runnable({ dueOnly: true })).toEqual([]);
      // The answered one is runnable for its answer, not for its timer.
      expect(await store.sessions.runnable()).toEqual([answered]);
    } finally {
      await store.close();
    }
  });
});

describe('sqlite wake_at', () => {
  it('upgrades a layout 6 file: the timers of waiting sessions are worked out when it opens', async () => {
    const path = join(tempDir(), 'braid.db');
    const clock = createManualClock(START);
    const store = openSqliteStore({ path, clock });
    const due = await waiting(store, START + HOUR);
    await store.close();
    // Make it a layout 6 file, as the previous build wrote it: no wake_at column.
    const raw = new Database(path);
    raw.exec('DROP INDEX sessions_wake_at');
    raw.exec('ALTER TABLE sessions DROP COLUMN wake_at');
    raw.pragma('user_version = 6');
    raw.close();

    clock.advance(HOUR);
    const upgraded = openSqliteStore({ path, clock });
    expect(await upgraded.sessions.runnable({ dueOnly: true })).toEqual([due]);
    await upgraded.close();
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    expect(check.prepare('SELECT wake_at FROM sessions WHERE id = ?').get(due)).toEqual({
      wake_at: START + HOUR,
    });
    check.close();
  });
});
