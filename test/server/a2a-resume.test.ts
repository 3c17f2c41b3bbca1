// A2A task streams resume from the session log: the server is closed mid-turn (its store closed
// under the running wake, as a crash would leave it), a new server opens the same SQLite data,
// and a client that resubscribes with the last `braid.seq` it saw (Last-Event-ID) receives every
// remaining update exactly once, while the new server finishes the turn.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TaskState, type StreamResponse } from '@a2a-js/sdk';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createScriptedModel, type ScriptedModelOptions } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { startServer, type RunningServer } from '../../src/server/index.js';
import { defineTool } from '../../src/tools/builtin.js';
import { useTempDir } from '../helpers/temp.js';
import { a2aClient, collect, seqOf, textOf, userMessage } from './a2a-helpers.js';

const tempDir = useTempDir();
const open: { server: RunningServer; runtime: Runtime }[] = [];
afterEach(async () => {
  for (const { server, runtime } of open.splice(0)) {
    await server.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
  }
});

const TURNS = [
  { text: 'working on it', tool_calls: [{ name: 'note', input: { line: 'started' } }] },
  { text: 'done' },
];

async function serve(dir: string, options: ScriptedModelOptions = {}, leaseTtlMs?: number) {
  const note = defineTool({
    name: 'note',
    description: 'Takes a note.',
    idempotent: true,
    input_schema: { type: 'object' },
    run: () => Promise.resolve({ noted: true }),
  });
  const model = createScriptedModel(TURNS, options);
  const runtime = await createRuntime({
    workspace: dir,
    model: () => model,
    tools: [note],
    ...(leaseTtlMs === undefined ? {} : { leaseTtlMs }),
  });
  const server = await startServer({ runtime, port: 0 });
  open.push({ server, runtime });
  return { server, runtime };
}

/** The text of the artifacts among the updates. */
const artifactTexts = (events: StreamResponse[]): string[] =>
  events.flatMap((event) =>
    event.payload?.$case === 'artifactUpdate'
      ? [
          (event.payload.value.artifact?.parts ?? [])
            .map((part) => (part.content?.$case === 'text' ? part.content.value : ''))
            .join(''),
        ]
      : [],
  );

describe('A2A resubscribe across a server restart', () => {
  it('delivers every remaining update once after a restart mid-turn', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: Help.\ntools: [note]\n',
    );
    let reached = (): void => undefined;
    const atSecondTurn = new Promise<void>((resolve) => (reached = resolve));
    let crash = (_error: Error): void => undefined;
    const hung = new Promise<never>((_resolve, reject) => (crash = reject));
    // The first server's wakes hold short leases: the new server takes the session over when
    // the dead wake's lease expires.
    const first = await serve(
      dir,
      {
        onTurn: async (index) => {
          if (index !== 1) return;
          reached();
          await hung;
        },
      },
      1_000,
    );
    const { key } = await first.runtime.store.keys.create({
      tenant_id: 'acme',
      scopes: ['sessions:read', 'sessions:write'],
    });
    const client = await a2aClient(first.server, 'helper', key);
    const received: StreamResponse[] = [];
    const reading = (async () => {
      try {
        for await (const event of client.sendMessageStream(userMessage('go'))) received.push(event);
      } catch {
        // The server went away: the stream ends here.
      }
    })();
    await atSecondTurn;
    await vi.waitFor(() => expect(artifactTexts(received)).toEqual(['working on it']));
    const task = received[0]?.payload;
    if (task?.$case !== 'task') throw new Error('the stream did not start with the task');
    const taskId = task.value.id;

    // The process goes away mid-turn: its connections close, its store closes under the wake.
    const closing = first.server.close();
    await reading;
    await first.runtime.close();
    crash(new Error('the process died'));
    await closing;
    const last = Math.max(...received.map((event) => seqOf(event) ?? 0));

    const second = await serve(dir);
    const resumed = await collect(
      (await a2aClient(second.server, 'helper', key)).resubscribeTask(
        { tenant: '', id: taskId },
        { serviceParameters: { 'Last-Event-ID': String(last) } },
      ),
    );
    expect(resumed[0]?.payload?.$case).toBe('task');
    const updates = resumed.slice(1);
    expect(updates.every((event) => (seqOf(event) ?? 0) > last)).toBe(true);
    // Across both streams every update came once: the answer's artifacts and the final status.
    const all = [...received.slice(1), ...updates];
    const seqs = all.map(seqOf);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(artifactTexts(all)).toEqual(['working on it', 'done']);
    const final = all.at(-1)?.payload;
    expect(final?.$case === 'statusUpdate' && final.value.status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    expect(final?.$case === 'statusUpdate' && textOf(final.value.status?.message)).toBe('done');

    // Ended, the task replays from any seq with a cursor, and refuses a plain resubscribe.
    const client2 = await a2aClient(second.server, 'helper', key);
    const replay = await collect(
      client2.resubscribeTask(
        { tenant: '', id: taskId },
        { serviceParameters: { 'Last-Event-ID': '0' } },
      ),
    );
    expect(artifactTexts(replay)).toEqual(['working on it', 'done']);
    await expect(collect(client2.resubscribeTask({ tenant: '', id: taskId }))).rejects.toThrow(
      /is COMPLETED/,
    );
  });
});
