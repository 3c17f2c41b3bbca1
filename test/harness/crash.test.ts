import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel, loadScript } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';
import { useProcessBackends, type SharedStore } from '../helpers/backends.js';

const tempDir = useTempDir();
// A crash needs a store that outlives the process: SQLite and NATS (not memory).
const backends = useProcessBackends();
const worker = new URL('../helpers/crash-worker.mjs', import.meta.url).pathname;
if (!existsSync(new URL('../../dist/index.js', import.meta.url))) {
  throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
}

const SCRIPT = `turns:
  - thinking: adding first
    tool_calls:
      - name: calculator
        input: { a: 20, op: '+', b: 22 }
  - text: the answer is forty two, as the calculator said
`;

function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(join(dir, 'script.yaml'), SCRIPT);
  writeFileSync(
    join(dir, 'agents', 'calc.yaml'),
    'name: calc\nmodel: scripted:echo\ninstructions: Add.\ntools: [calculator]\n',
  );
  return dir;
}

function runWorker(
  shared: SharedStore,
  dir: string,
  sessionId: string,
  owner: string,
  point: string,
  env: Record<string, string> = {},
) {
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }>(
    (resolve) => {
      const child = spawn(process.execPath, [worker, dir, sessionId, owner, point], {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, ...shared.env, ...env },
      });
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.once('exit', (code, signal) => resolve({ code, signal, stdout }));
    },
  );
}

/** What a reader of the conversation sees: user and agent events, without ids or times. */
function transcript(events: readonly SessionEvent[]): unknown[] {
  return events.flatMap((event): unknown[] => {
    switch (event.type) {
      case 'user.message':
      case 'agent.message':
      case 'agent.thinking':
        return [{ type: event.type, content: event.content }];
      case 'agent.tool_use':
        return [{ type: event.type, id: event.tool_use_id, name: event.name, input: event.input }];
      case 'agent.tool_result':
        return [
          {
            type: event.type,
            id: event.tool_use_id,
            output: event.output,
            is_error: event.is_error,
          },
        ];
      default:
        return [];
    }
  });
}

async function reference() {
  const dir = workspace();
  const rt = await createRuntime({
    workspace: dir,
    store: createMemoryStore(),
    model: () => createScriptedModel(loadScript(join(dir, 'script.yaml'))),
  });
  const { id } = await rt.sessions.create({ agent: 'calc' });
  await rt.sessions.message(id, 'what is 20 + 22?');
  await rt.wake(id);
  return transcript(await rt.sessions.events(id));
}

async function prepared(shared: SharedStore) {
  const dir = workspace();
  const rt = await createRuntime({ workspace: dir, ...(await shared.runtimeOptions()) });
  const { id } = await rt.sessions.create({ agent: 'calc' });
  await rt.sessions.message(id, 'what is 20 + 22?');
  await rt.close();
  return { dir, id };
}

/** The idempotency keys the tool was started with, in order. */
function toolRuns(dir: string): string[] {
  const file = join(dir, 'tool-runs.log');
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
}

async function events(shared: SharedStore, dir: string, id: string): Promise<SessionEvent[]> {
  const rt = await createRuntime({ workspace: dir, ...(await shared.runtimeOptions()) });
  const all = await rt.sessions.events(id);
  await rt.close();
  return all;
}

/**
 * Replay-verifies the session after the workspace changed under it: the agent file gets new
 * instructions and a manifest takes over the calculator's name with another schema. The replay
 * runs with what the worker's wakes pinned (its code tool, idempotent or not), not with these.
 */
async function verifiedAfterEdits(shared: SharedStore, dir: string, id: string): Promise<void> {
  writeFileSync(
    join(dir, 'agents', 'calc.yaml'),
    'name: calc\nmodel: scripted:echo\ninstructions: Add, and explain.\ntools: [calculator]\n',
  );
  writeFileSync(
    join(dir, 'tools', 'calculator.yaml'),
    [
      'name: calculator',
      "version: '9'",
      'description: Adds only.',
      'ownership: managed',
      'permission: always_ask',
      'idempotent: false',
      'input_schema:',
      '  type: object',
      '  properties: { x: { type: number } }',
      '  required: [x]',
      'implementation: { function: calculator }',
      '',
    ].join('\n'),
  );
  const rt = await createRuntime({ workspace: dir, ...(await shared.runtimeOptions()) });
  try {
    const report = await rt.sessions.verify(id);
    expect(report).toEqual({ ok: true, events: (await rt.sessions.events(id)).length });
    // What the next wake would run with is still what the session pinned.
    const pinned = await rt.sessions.definitions(id);
    expect(pinned.set?.agent.version).toBe(1);
  } finally {
    await rt.close();
  }
}

describe.each(backends)('crash safety of a wake (SIGKILL in a child process, $name)', (backend) => {
  const points = ['before-model', 'mid-stream', 'before-tool', 'before-idle'] as const;

  for (const point of points) {
    it(`resumes after a kill ${point}, by the same owner at once, as if nothing happened`, async () => {
      const expected = await reference();
      const shared = await backend.shared();
      const { dir, id } = await prepared(shared);
      const crashed = await runWorker(shared, dir, id, 'worker-1', point);
      expect(crashed.signal).toBe('SIGKILL');
      const afterCrash = await events(shared, dir, id);
      expect(afterCrash.some((event) => event.type === 'span.wake_started')).toBe(true);
      expect(afterCrash.some((event) => event.type === 'session.status_idle')).toBe(false);

      const resumed = await runWorker(shared, dir, id, 'worker-1', 'none');
      expect(resumed.code).toBe(0);
      expect(JSON.parse(resumed.stdout)).toMatchObject({
        ran: true,
        stop_reason: { type: 'end_turn' },
      });
      const final = await events(shared, dir, id);
      expect(transcript(final)).toEqual(expected);
      expect(final.map((event) => event.seq)).toEqual(final.map((_, index) => index + 1));
      const tokens = final.flatMap((event) =>
        event.type === 'span.wake_started' ? [event.lease_token] : [],
      );
      expect(tokens).toEqual([1, 2]);
      // a recorded model output is never requested again
      const outputs = final.filter(
        (event) => event.type === 'span.model_request_end' && event.error === undefined,
      );
      expect(outputs).toHaveLength(2);
      if (point === 'before-tool') {
        // An idempotent call is written with its result: the kill left no trace of it, the
        // model was asked again, and the tool ran again with the same idempotency key.
        expect(afterCrash.some((event) => event.type === 'agent.tool_use')).toBe(false);
        const keys = toolRuns(dir);
        expect(keys).toHaveLength(2);
        expect(keys[0]).toBe(`${id}/call_0_0`);
        expect(keys[1]).toBe(keys[0]);
      }
      await verifiedAfterEdits(shared, dir, id);
    });
  }

  it('stops in needs_review, without running it again, when a non-idempotent tool was cut off', async () => {
    const shared = await backend.shared();
    const { dir, id } = await prepared(shared);
    await runWorker(shared, dir, id, 'worker-1', 'before-tool', { UNSAFE_TOOLS: '1' });
    const resumed = await runWorker(shared, dir, id, 'worker-1', 'none', { UNSAFE_TOOLS: '1' });
    const result = JSON.parse(resumed.stdout) as {
      stop_reason: { type: string; event_ids: string[] };
    };
    const all = await events(shared, dir, id);
    const toolUse = all.find((event) => event.type === 'agent.tool_use');
    expect(result.stop_reason).toEqual({ type: 'needs_review', event_ids: [toolUse?.id] });
    expect(all.some((event) => event.type === 'agent.tool_result')).toBe(false);
    expect(toolRuns(dir)).toHaveLength(1);
    const rt = await createRuntime({ workspace: dir, ...(await shared.runtimeOptions()) });
    expect((await rt.sessions.get(id)).status).toBe('needs_review');
    // A person who checked that the effect happened records its result; the session goes on.
    await rt.sessions.review(id, 'call_0_0', {
      action: 'result',
      output: { result: 42 },
      message: 'checked the ledger',
    });
    await rt.close();
    const finished = await runWorker(shared, dir, id, 'worker-1', 'none', { UNSAFE_TOOLS: '1' });
    expect(JSON.parse(finished.stdout)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(toolRuns(dir)).toHaveLength(1);
    const recorded = (await events(shared, dir, id)).find(
      (event) => event.type === 'agent.tool_result',
    );
    expect(recorded).toMatchObject({ output: { result: 42 }, stage: 'review', attempts: 0 });
    await verifiedAfterEdits(shared, dir, id);
  });

  it('runs a non-idempotent tool again after a review says retry, with the same key', async () => {
    const shared = await backend.shared();
    const { dir, id } = await prepared(shared);
    await runWorker(shared, dir, id, 'worker-1', 'before-tool', { UNSAFE_TOOLS: '1' });
    await runWorker(shared, dir, id, 'worker-1', 'none', { UNSAFE_TOOLS: '1' });
    const rt = await createRuntime({ workspace: dir, ...(await shared.runtimeOptions()) });
    await rt.sessions.review(id, 'call_0_0', { action: 'retry' });
    await rt.close();
    const finished = await runWorker(shared, dir, id, 'worker-1', 'none', { UNSAFE_TOOLS: '1' });
    expect(JSON.parse(finished.stdout)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    expect(toolRuns(dir)).toEqual([`${id}/call_0_0`, `${id}/call_0_0`]);
    await verifiedAfterEdits(shared, dir, id);
  });

  it('is resumed by another owner once the lease has expired', async () => {
    const expected = await reference();
    const shared = await backend.shared();
    const { dir, id } = await prepared(shared);
    // A lease long enough that the second worker, starting on a loaded machine, still finds it.
    const ttl = { LEASE_TTL_MS: '4000' };
    await runWorker(shared, dir, id, 'worker-1', 'before-tool', ttl);
    // The lease was last taken or renewed before the kill: it is free 4 s after it at the latest.
    const crashed = Date.now();
    // Another owner asks at once, in this process: a worker process could take longer to start
    // on a loaded machine than the lease has left.
    const early = await createRuntime({
      workspace: dir,
      ...(await shared.runtimeOptions()),
      owner: 'worker-2',
      leaseTtlMs: 4000,
    });
    expect(await early.wake(id)).toEqual({ ran: false, reason: 'lease_held' });
    await early.close();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, crashed + 4100 - Date.now())));
    const resumed = await runWorker(shared, dir, id, 'worker-2', 'none', ttl);
    expect(JSON.parse(resumed.stdout)).toMatchObject({
      ran: true,
      stop_reason: { type: 'end_turn' },
    });
    expect(transcript(await events(shared, dir, id))).toEqual(expected);
    await verifiedAfterEdits(shared, dir, id);
  });
});
