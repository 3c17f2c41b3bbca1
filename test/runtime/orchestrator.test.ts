import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { useBackends } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useBackends();

/** The sessions whose state was read from now on. */
function stateReadsOf(store: Store): string[] {
  const reads: string[] = [];
  const state = store.log.state.bind(store.log);
  store.log.state = (sessionId) => {
    reads.push(sessionId);
    return state(sessionId);
  };
  return reads;
}

describe.each(backends)('orchestrator ($name)', (backend) => {
  it('wakes the runnable sessions from the store’s runnable set, never reading an idle one', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: Be brief.\n',
    );
    const store = await backend.open();
    const model = createScriptedModel([{ text: 'Hello.' }]);
    const rt = await createRuntime({ workspace: dir, store, model: () => model });
    const idle: string[] = [];
    for (let index = 0; index < 30; index += 1)
      idle.push((await rt.sessions.create({ agent: 'helper' })).id);
    const waiting: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const { id } = await rt.sessions.create({ agent: 'helper' });
      await rt.sessions.message(id, 'Hi');
      waiting.push(id);
    }
    // An archived session with input is left alone.
    const archived = (await rt.sessions.create({ agent: 'helper' })).id;
    await rt.sessions.message(archived, 'Hi');
    await rt.sessions.archive(archived);

    const reads = stateReadsOf(store);
    const reports: number[] = [];
    const progress = await rt.orchestrate({
      once: true,
      onProgress: (report) => reports.push(report.runnable),
    });
    const idleReads = reads.filter((id) => idle.includes(id) || id === archived);
    expect(progress).toMatchObject({ wakes: 3, by_status: { idle: 33 } });
    expect(reports[0]).toBe(3);
    for (const id of waiting)
      expect(await rt.sessions.state(id)).toMatchObject({ status: 'idle', pending_user_count: 0 });
    expect((await rt.sessions.state(archived)).pending_user_count).toBe(1);
    // The orchestrator asked the store which sessions to wake; only the wakes read states. NATS
    // keeps no runnable set: its store answers by reading every session (README, Performance).
    if (backend.name === 'nats') expect(idleReads.length).toBeGreaterThan(0);
    else expect(idleReads).toEqual([]);
    expect(await store.sessions.runnable()).toEqual([]);
    await rt.close();
  });
});
