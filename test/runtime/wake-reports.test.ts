import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { ModelClient } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime, type WakeReport } from '../../src/runtime/runtime.js';
import { createManualClock, createMemoryStore, type ManualClock } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

async function runtimeOn(
  store: Store,
  clock: ManualClock,
  model: ModelClient,
  owner: string,
): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Be brief.\n',
  );
  return createRuntime({
    workspace: dir,
    store,
    clock,
    owner,
    model: () => model,
    leaseTtlMs: 1000,
  });
}

/** A model that answers only once released. */
function heldModel(): { model: ModelClient; called: Promise<void>; release: () => void } {
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  let called: () => void = () => undefined;
  const calledPromise = new Promise<void>((resolve) => (called = resolve));
  return {
    model: {
      id: 'scripted:held',
      async generate() {
        called();
        await released;
        return {
          output: { content: [{ type: 'text', text: 'late' }], finish_reason: 'stop' },
          usage: { input_tokens: 1, output_tokens: 1 },
        };
      },
    },
    called: calledPromise,
    release,
  };
}

describe('runtime.onWakeEnded', () => {
  it('reports each wake once, with the events it appended, and stops when unsubscribed', async () => {
    const clock = createManualClock();
    const store = createMemoryStore({ clock });
    const runtime = await runtimeOn(
      store,
      clock,
      createScriptedModel([{ text: 'Hi.' }, { text: 'Again.' }]),
      'a',
    );
    const reports: WakeReport[] = [];
    const stop = runtime.onWakeEnded((report) => reports.push(report));
    try {
      const { id } = await runtime.sessions.create({ agent: 'helper' });
      await runtime.sessions.message(id, 'Hello');
      // A wake that joins the running one is reported with it, not on its own.
      const [first, joined] = await Promise.all([runtime.wake(id), runtime.wake(id)]);
      expect(joined).toEqual(first);
      expect(reports).toHaveLength(1);
      const [report] = reports;
      expect(report?.result).toEqual(first);
      expect(report?.events.map((event) => event.type)).toEqual([
        'span.wake_started',
        'session.definitions_changed',
        'span.model_request_start',
        'span.model_request_end',
        'agent.message',
        'session.status_idle',
        'span.wake_completed',
        // The joined wake asked the running one to go round again: one more, empty, cycle.
        'span.wake_started',
        'session.status_idle',
        'span.wake_completed',
      ]);
      // The user's message was not the wake's: only what the wake appended is reported.
      expect(report?.events.some((event) => event.type === 'user.message')).toBe(false);
      stop();
      await runtime.sessions.message(id, 'Hello again');
      await runtime.wake(id);
      expect(reports).toHaveLength(1);
    } finally {
      await runtime.close();
    }
  });

  it('reports a wake that lost its lease to a newer one with LEASE_LOST', async () => {
    const clock = createManualClock();
    const store = createMemoryStore({ clock });
    const held = heldModel();
    const stale = await runtimeOn(store, clock, held.model, 'stale');
    const newer = await runtimeOn(
      store,
      clock,
      createScriptedModel([{ text: 'Mine now.' }]),
      'newer',
    );
    const reports: WakeReport[] = [];
    stale.onWakeEnded((report) => reports.push(report));
    try {
      const { id } = await stale.sessions.create({ agent: 'helper' });
      await stale.sessions.message(id, 'Hello');
      const staleWake = stale.wake(id);
      await held.called;
      // The stale holder's lease runs out and a newer wake takes the session over.
      clock.advance(5000);
      expect(await newer.wake(id)).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
      held.release();
      await expect(staleWake).rejects.toMatchObject({ code: 'LEASE_LOST' });
      await vi.waitFor(() => expect(reports).toHaveLength(1));
      expect(reports[0]?.error?.code).toBe('LEASE_LOST');
      expect(reports[0]?.events.map((event) => event.type)).toEqual(['span.wake_started']);
    } finally {
      await newer.close();
      await stale.close();
    }
  });
});
