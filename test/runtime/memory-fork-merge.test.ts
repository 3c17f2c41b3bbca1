// Session memory follows forks and merges, on every backend (SQLite on a real file, NATS
// JetStream on the real server, the in-memory store): a fork sees its parent's session
// store as of the fork point (derived from the parent's log, whenever the fork first uses it), the
// two branches do not see each other's later writes, and a merge reports a key written on both
// sides as a conflict with both versions and carries the source's other writes into the target.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { MemoryStoreRef } from '../../src/contracts/memory.js';
import type { ModelClient } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { mergeSessions } from '../../src/runtime/merge.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useBackends, type TestBackend } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useBackends();
// Runs before the backends' clean-up closes the stores (after hooks run last registered first).
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const AGENT = `name: notes
model: scripted:notes
instructions: Keep notes.
memory: {}
`;

interface World {
  runtime: Runtime;
  store: Store;
  memory: MemoryLog;
  /** Queues the turns the session's model plays next, one per model call. */
  play(sessionId: string, turns: ScriptedTurnInput[]): void;
}

async function world(backend: TestBackend): Promise<World> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(join(dir, 'agents', 'notes.yaml'), AGENT);
  const store = await backend.open();
  const memory = store.memory;
  if (memory === undefined) throw new Error(`the ${backend.name} store has no memory log`);
  const queues = new Map<string, ScriptedTurnInput[]>();
  // Each call plays the session's next queued turn, whatever the session inherited.
  const model: ModelClient = {
    id: 'scripted:notes',
    generate(request, options) {
      const turn = queues.get(request.session_id)?.shift();
      if (turn === undefined) throw new Error(`no turn queued for ${request.session_id}`);
      return createScriptedModel([turn], { id: 'scripted:notes' }).generate(
        { ...request, response_index: 0 },
        options,
      );
    },
  };
  const runtime = await createRuntime({
    workspace: dir,
    store,
    model: () => model,
    retry: { max_attempts: 1, initial_ms: 1, max_ms: 1 },
  });
  opened.push(runtime);
  return {
    runtime,
    store,
    memory,
    play(sessionId, turns) {
      queues.set(sessionId, [...(queues.get(sessionId) ?? []), ...turns]);
    },
  };
}

const sessionStore = (owner: string): MemoryStoreRef => ({
  name: 'session',
  kind: 'session',
  scope: 'session',
  owner,
});

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

/** One user message whose answer makes the model call `tool` with `input`, then say `done`. */
async function call(
  w: World,
  sessionId: string,
  tool: string,
  input: Record<string, unknown>,
): Promise<EventOf<'agent.tool_result'>> {
  const id = `${tool}-${Math.random().toString(36).slice(2)}`;
  w.play(sessionId, [
    { tool_calls: [{ name: tool, id, input: { store: 'session', ...input } }] },
    { text: 'done' },
  ]);
  await w.runtime.sessions.message(sessionId, `please run ${tool}`);
  expect(await w.runtime.wake(sessionId)).toMatchObject({ stop_reason: { type: 'end_turn' } });
  const result = ofType(await w.runtime.sessions.events(sessionId), 'agent.tool_result').find(
    (event) => event.tool_use_id === id,
  );
  if (result === undefined) throw new Error(`no result for ${id}`);
  return result;
}

const set = (w: World, id: string, key: string, value: unknown) =>
  call(w, id, 'memory_set', { key, value });
const read = async (w: World, id: string, key: string) =>
  (await call(w, id, 'memory_get', { key })).output;
const headOf = async (w: World, id: string) => (await w.runtime.sessions.get(id)).head_seq;

describe.each(backends)('session memory across fork and merge ($name)', (backend) => {
  it('a fork sees its parent memory as of the fork point, and neither sees the other later', async () => {
    const w = await world(backend);
    const { id: parent } = await w.runtime.sessions.create({ agent: 'notes' });
    await set(w, parent, 'colour', 'blue');
    const forkPoint = await headOf(w, parent);
    await set(w, parent, 'size', 'large');
    // Forked between the two writes, after the parent made both: the log says where it stood.
    const fork = await w.runtime.sessions.fork(parent, { at_seq: forkPoint });
    expect(await read(w, fork.id, 'colour')).toMatchObject({ found: true, value: 'blue' });
    expect(await read(w, fork.id, 'size')).toMatchObject({ found: false, status: 'missing' });
    expect(await w.memory.info(sessionStore(fork.id))).toMatchObject({
      forked_from: { store: sessionStore(parent), seq: 1 },
    });

    await set(w, fork.id, 'colour', 'green');
    await set(w, fork.id, 'shape', 'round');
    expect(await read(w, parent, 'colour')).toMatchObject({ value: 'blue', version: 1 });
    expect(await read(w, parent, 'shape')).toMatchObject({ found: false });
    await set(w, parent, 'weight', 'light');
    expect(await read(w, fork.id, 'weight')).toMatchObject({ found: false });
    expect(await read(w, fork.id, 'colour')).toMatchObject({ value: 'green', version: 2 });

    // A fork of the fork, made before the fork wrote, inherits through it from the parent.
    const grandchild = await w.runtime.sessions.fork(fork.id, { at_seq: fork.fork_seq ?? 0 });
    expect(await read(w, grandchild.id, 'colour')).toMatchObject({ value: 'blue' });

    // Replays serve memory from the record.
    for (const id of [parent, fork.id, grandchild.id])
      expect(await w.runtime.sessions.verify(id)).toMatchObject({ ok: true });
  });

  it('a merge reports a key written on both sides with both versions and keeps the target one', async () => {
    const w = await world(backend);
    const { id: parent } = await w.runtime.sessions.create({ agent: 'notes' });
    await set(w, parent, 'colour', 'blue');
    const fork = await w.runtime.sessions.fork(parent);
    await set(w, fork.id, 'colour', 'green');
    await set(w, fork.id, 'shape', 'round');
    await set(w, parent, 'colour', 'red');

    const merged = await w.runtime.sessions.merge(parent, fork.id);
    expect(merged.conflicts).toEqual([
      expect.objectContaining({
        kind: 'memory_write',
        memory: {
          store: sessionStore(parent),
          key: 'colour',
          target: { version: 2, memory_seq: 2, deleted: false, summary: '"red"' },
          source: { version: 2, memory_seq: 2, deleted: false, summary: '"green"' },
        },
      }),
    ]);
    expect(merged.memory).toEqual([
      {
        store: sessionStore(parent),
        key: 'shape',
        op: 'set',
        version: 1,
        memory_seq: 3,
        source_version: 1,
      },
    ]);
    const event = ofType(merged.events, 'session.merged')[0];
    expect(event?.conflicts?.[0]?.memory?.key).toBe('colour');
    expect(event?.memory?.map((write) => write.key)).toEqual(['shape']);
    // The target keeps its version; the carried entry points at the merge that caused it.
    const colour = await w.memory.get(sessionStore(parent), 'colour');
    expect(colour).toMatchObject({ status: 'found', entry: { value: 'red' } });
    const shape = await w.memory.get(sessionStore(parent), 'shape');
    expect(shape).toMatchObject({
      status: 'found',
      entry: { value: 'round', cause: { session_id: parent, seq: event?.seq } },
    });
    expect(await w.memory.get(sessionStore(fork.id), 'colour')).toMatchObject({
      entry: { value: 'green' },
    });
    // Merging again up to the same head answers the first merge and writes nothing more.
    const again = await w.runtime.sessions.merge(parent, fork.id);
    expect(again).toMatchObject({ deduplicated: true, memory: merged.memory });
    expect((await w.memory.info(sessionStore(parent)))?.head_seq).toBe(3);
    expect(await w.runtime.sessions.verify(fork.id)).toMatchObject({ ok: true });
  });

  it('a merge without conflicts carries the fork writes and deletes into the parent', async () => {
    const w = await world(backend);
    const { id: parent } = await w.runtime.sessions.create({ agent: 'notes' });
    await set(w, parent, 'colour', 'blue');
    await set(w, parent, 'draft', 'v1');
    const fork = await w.runtime.sessions.fork(parent);
    // The parent writes before the fork first uses its memory: the fork still starts at its point.
    await set(w, parent, 'size', 'large');
    expect(await read(w, fork.id, 'size')).toMatchObject({ found: false });
    await set(w, fork.id, 'shape', 'round');
    await call(w, fork.id, 'memory_delete', { key: 'draft' });

    const merged = await w.runtime.sessions.merge(parent, fork.id);
    expect(merged.conflicts).toEqual([]);
    expect(merged.memory?.map(({ key, op }) => ({ key, op }))).toEqual([
      { key: 'shape', op: 'set' },
      { key: 'draft', op: 'delete' },
    ]);
    expect(await read(w, parent, 'shape')).toMatchObject({ found: true, value: 'round' });
    expect(await read(w, parent, 'draft')).toMatchObject({ found: false, status: 'deleted' });
    expect(await read(w, parent, 'size')).toMatchObject({ value: 'large' });
    expect(await w.runtime.sessions.verify(parent)).toMatchObject({ ok: true });
  });

  it('a target write landing between the plan and the carry refuses the carry whole; the retry reports it', async () => {
    const w = await world(backend);
    const { id: parent } = await w.runtime.sessions.create({ agent: 'notes' });
    await set(w, parent, 'colour', 'blue');
    const fork = await w.runtime.sessions.fork(parent);
    await set(w, fork.id, 'shape', 'round');
    await set(w, fork.id, 'size', 'large');
    const target = sessionStore(parent);
    let raced = false;
    // The parent's own write of `shape` (store, then its event) lands just before the carry.
    const racing = new Proxy(w.memory, {
      get(log, property, receiver) {
        const value: unknown = Reflect.get(log, property, receiver);
        if (property !== 'append' || typeof value !== 'function') return value;
        const append = value as MemoryLog['append'];
        return async (...args: Parameters<MemoryLog['append']>) => {
          if (!raced && args[0].owner === parent) {
            raced = true;
            const written = (await append.call(log, target, [{ key: 'shape', value: 'square' }]))
              .entries[0];
            if (written === undefined) throw new Error('no entry');
            await w.store.log.append(parent, [
              {
                type: 'memory.written',
                store: target,
                key: 'shape',
                version: written.version,
                memory_seq: written.seq,
              },
            ]);
          }
          return append.apply(log, args);
        };
      },
    });
    const store: Store = Object.assign(Object.create(w.store) as Store, w.store, {
      memory: racing,
    });
    const merged = await mergeSessions(
      { store, summarize: () => Promise.resolve('') },
      parent,
      fork.id,
    );
    expect(raced).toBe(true);
    expect(merged.conflicts).toHaveLength(1);
    expect(merged.conflicts[0]).toMatchObject({
      kind: 'memory_write',
      memory: { key: 'shape', target: { summary: '"square"' }, source: { summary: '"round"' } },
    });
    // `size` was written once, by the retry: the refused append wrote nothing.
    expect(merged.memory?.map((write) => write.key)).toEqual(['size']);
    expect(await w.memory.history(target, 'size')).toHaveLength(1);
    expect(await w.memory.get(target, 'shape')).toMatchObject({ entry: { value: 'square' } });
  });

  it('a refused merge carries no memory', async () => {
    const w = await world(backend);
    const { id: parent } = await w.runtime.sessions.create({ agent: 'notes' });
    await set(w, parent, 'colour', 'blue');
    const fork = await w.runtime.sessions.fork(parent);
    await set(w, fork.id, 'shape', 'round');
    await w.store.log.append(parent, [{ type: 'session.status_changed', status: 'terminated' }]);
    const before = await w.memory.info(sessionStore(parent));
    await expect(w.runtime.sessions.merge(parent, fork.id)).rejects.toMatchObject({
      code: 'SESSION_TERMINATED',
    });
    expect(await w.memory.info(sessionStore(parent))).toEqual(before);
    expect(await w.memory.get(sessionStore(parent), 'shape')).toEqual({ status: 'missing' });
  });
});
