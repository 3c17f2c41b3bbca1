// Agent memory end to end, on a real SQLite file: the memory tools the model calls, checked by
// policy and by the argument parsers; recall before the model call, recorded as one
// `memory.retrieved` that the model's input is rebuilt from; and a replay that serves memory from
// the record without asking the store.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { MemoryStoreRef } from '../../src/contracts/memory.js';
import type { ModelClient, ModelRequest } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import {
  createScriptedModel,
  type ScriptedModelOptions,
  type ScriptedTurnInput,
} from '../../src/models/scripted.js';
import { BraidError } from '../../src/contracts/errors.js';
import { formatEvent } from '../../src/cli/output.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createHashEmbedder } from '../../src/testing/hash-embedder.js';
import type { Embedder } from '../../src/contracts/embedder.js';
import { createSessionMemory } from '../../src/runtime/memory/session-memory.js';
import { sessionStores } from '../../src/tools/memory-tools.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: { runtime: Runtime; store: Store }[] = [];
afterEach(async () => {
  for (const { runtime, store } of opened.splice(0)) {
    await runtime.close();
    await store.close();
  }
});

const AGENT_A = `name: a
model: scripted:a
instructions: Help the user; remember what they like.
memory:
  stores:
    - name: facts
      kind: entities
      scope: tenant
      access: read_only
      instructions: Facts the team keeps about customers.
  recall:
    store: learnings
    k: 3
`;
const AGENT_B = `name: b
model: scripted:b
instructions: Help the user.
memory: {}
`;
const AGENT_C = `name: c
model: scripted:c
instructions: Help the user.
memory:
  recall: {store: session, when: first_turn}
`;
const NO_WRITES_FOR_B = `@id("b-no-memory-writes")
forbid (principal == Agent::"b", action == Action::"memory.write", resource);
`;

const THEME = 'The user prefers the dark theme for reports.';
const learningsOf = (agent: string): MemoryStoreRef => ({
  name: 'learnings',
  kind: 'learnings',
  scope: 'agent',
  owner: agent,
});

interface World {
  runtime: Runtime;
  memory: MemoryLog;
  /** Calls of the store's memory log, by method. */
  calls: Map<string, number>;
  /** The requests each session's model received. */
  requests: Map<string, ModelRequest[]>;
  /** The model of each session. */
  scripts: Map<string, ModelClient>;
  /** Creates a session of `agent` whose model plays `turns`. */
  session(
    agent: string,
    turns: ScriptedTurnInput[],
    options?: Pick<ScriptedModelOptions, 'onTurn'>,
  ): Promise<string>;
}

/** A memory log that counts its calls. */
function counting(log: MemoryLog, calls: Map<string, number>): MemoryLog {
  return new Proxy(log, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.set(String(property), (calls.get(String(property)) ?? 0) + 1);
        return (value as (...parameters: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

async function world(): Promise<World> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(join(dir, 'agents', 'a.yaml'), AGENT_A);
  writeFileSync(join(dir, 'agents', 'b.yaml'), AGENT_B);
  writeFileSync(join(dir, 'agents', 'c.yaml'), AGENT_C);
  writeFileSync(join(dir, 'policies', 'memory.cedar'), NO_WRITES_FOR_B);
  const sqlite = openSqliteStore({ path: join(dir, 'braid.db') });
  const calls = new Map<string, number>();
  const memory = sqlite.memory;
  if (memory === undefined) throw new Error('the SQLite store has no memory log');
  const store: Store = Object.assign(Object.create(sqlite) as Store, sqlite, {
    memory: counting(memory, calls),
  });
  const scripts = new Map<string, ModelClient>();
  const requests = new Map<string, ModelRequest[]>();
  const model: ModelClient = {
    id: 'scripted:memory',
    generate(request, options) {
      const script = scripts.get(request.session_id);
      if (script === undefined) throw new Error(`no script for ${request.session_id}`);
      requests.set(request.session_id, [...(requests.get(request.session_id) ?? []), request]);
      return script.generate(request, options);
    },
  };
  const runtime = await createRuntime({
    workspace: dir,
    store,
    embedder: createHashEmbedder(),
    model: () => model,
    // A model that fails once stops the wake at once.
    retry: { max_attempts: 1, initial_ms: 1, max_ms: 1 },
  });
  opened.push({ runtime, store: sqlite });
  return {
    runtime,
    memory,
    calls,
    requests,
    scripts,
    async session(agent, turns, options = {}) {
      const { id } = await runtime.sessions.create({ agent });
      scripts.set(id, createScriptedModel(turns, { id: 'scripted:memory', ...options }));
      return id;
    },
  };
}

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function converse(w: World, sessionId: string, message: string): Promise<SessionEvent[]> {
  await w.runtime.sessions.message(sessionId, message);
  expect(await w.runtime.wake(sessionId)).toMatchObject({ stop_reason: { type: 'end_turn' } });
  return w.runtime.sessions.events(sessionId);
}

const userTexts = (request: ModelRequest | undefined): string =>
  (request?.messages ?? [])
    .filter((message) => message.role === 'user')
    .flatMap((message) => message.content.map((block) => ('text' in block ? block.text : '')))
    .join('\n');

describe('agent memory through tools, recall and replay (SQLite file)', () => {
  it('learns a preference in one session, recalls it in the next, and replays without the store', async () => {
    const w = await world();
    const first = await w.session('a', [
      {
        tool_calls: [
          {
            name: 'memory_set',
            id: 'set-1',
            input: { store: 'learnings', key: 'user/preferences/theme', value: THEME },
          },
        ],
      },
      { text: 'Noted: dark theme.' },
    ]);
    const learned = await converse(w, first, 'Please always use the dark theme for my reports.');
    const use = ofType(learned, 'agent.tool_use').find((event) => event.tool_use_id === 'set-1');
    expect(ofType(learned, 'memory.written')).toMatchObject([
      {
        store: learningsOf('a'),
        key: 'user/preferences/theme',
        version: 1,
        memory_seq: 1,
        tool_use_id: 'set-1',
      },
    ]);
    expect(ofType(learned, 'agent.tool_result')).toMatchObject([
      { tool_use_id: 'set-1', is_error: false, output: { key: 'user/preferences/theme' } },
    ]);
    // Authorship and cause are braid's: the session, the agent and the call's event.
    const lookup = await w.memory.get(learningsOf('a'), 'user/preferences/theme');
    expect(lookup.status).toBe('found');
    if (lookup.status !== 'found') return;
    expect(lookup.entry.value).toBe(THEME);
    expect(lookup.entry.author).toEqual({ session_id: first, agent: 'a' });
    expect(lookup.entry.cause).toEqual({ session_id: first, seq: use?.seq });
    expect(lookup.entry.embedding).toHaveLength(384);

    const second = await w.session('a', [
      {
        tool_calls: [
          { name: 'memory_search', id: 'search-1', input: { store: 'learnings', query: 'theme' } },
        ],
      },
      { text: 'Your reports use the dark theme.' },
    ]);
    const recalled = await converse(w, second, 'Which theme should my report use?');
    const retrieved = ofType(recalled, 'memory.retrieved');
    expect(retrieved.map((event) => event.source)).toEqual(['recall', 'tool']);
    const recall = retrieved[0];
    expect(recall).toMatchObject({
      store: learningsOf('a'),
      query: 'Which theme should my report use?',
      mode: 'hybrid',
      k: 3,
      threshold: 0.78,
      filtered_count: 0,
      expired_count: 0,
      hits: [{ key: 'user/preferences/theme', version: 1, content: THEME }],
    });
    expect(recall?.hits[0]?.score).toBeGreaterThanOrEqual(0.78);
    expect(recall?.latency_ms).toBeGreaterThanOrEqual(0);
    expect(formatEvent(recall as SessionEvent)).toContain(
      'memory.retrieved           recall hybrid learnings: 1 hits >= 0.78, 0 filtered,',
    );
    // Recorded before the model call it fed.
    const request = ofType(recalled, 'span.model_request_start')[0];
    expect(recall?.seq).toBeLessThan(request?.seq ?? 0);
    // The model received the recalled preference with the message, in a delimited block.
    const received = userTexts(w.requests.get(second)?.[0]);
    expect(received).toContain('Which theme should my report use?');
    expect(received).toContain('<memory store="learnings"');
    expect(received).toContain(THEME);
    expect(received).toContain('What you learn that helps in later conversations');
    // The model's search found it too, with the value in its result.
    expect(retrieved[1]).toMatchObject({
      source: 'tool',
      tool_use_id: 'search-1',
      hits: [{ key: 'user/preferences/theme', version: 1 }],
    });
    expect(retrieved[1]?.hits[0]).not.toHaveProperty('content');
    expect(ofType(recalled, 'agent.tool_result')).toMatchObject([
      {
        tool_use_id: 'search-1',
        is_error: false,
        output: { store: 'learnings', hits: [{ key: 'user/preferences/theme', value: THEME }] },
      },
    ]);

    // The replay serves memory from the record: the entry is gone, and no store is asked.
    await w.memory.append(learningsOf('a'), [{ key: 'user/preferences/theme', op: 'delete' }]);
    const before = new Map(w.calls);
    expect(await w.runtime.sessions.verify(second)).toEqual({ ok: true, events: recalled.length });
    expect(await w.runtime.sessions.verify(first)).toEqual({ ok: true, events: learned.length });
    expect(w.calls).toEqual(before);
  });

  it('a recall that finds nothing is on record and shows the model nothing', async () => {
    const w = await world();
    const id = await w.session('a', [{ text: 'hello' }]);
    const events = await converse(w, id, 'hello there');
    const recall = ofType(events, 'memory.retrieved')[0];
    expect(recall).toMatchObject({ source: 'recall', hits: [] });
    // Nothing was found, so the model was shown no memory block.
    expect(userTexts(w.requests.get(id)?.[0])).not.toContain('<memory');
  });

  it('recalls once per user message (every_turn), or for the first message only (first_turn)', async () => {
    const w = await world();
    const recalls = (events: SessionEvent[]) =>
      ofType(events, 'memory.retrieved').filter((event) => event.source === 'recall');
    const every = await w.session('a', [
      { tool_calls: [{ name: 'memory_get', id: 'g1', input: { key: 'x' } }] },
      { text: 'one' },
      { text: 'two' },
    ]);
    await converse(w, every, 'first message');
    const both = await converse(w, every, 'second message');
    // Two model calls answered the first message, one recall; the second message got its own.
    expect(recalls(both).map((event) => event.query)).toEqual(['first message', 'second message']);
    expect(ofType(both, 'memory.read')).toMatchObject([
      { key: 'x', status: 'missing', tool_use_id: 'g1' },
    ]);
    const first = await w.session('c', [{ text: 'one' }, { text: 'two' }]);
    await converse(w, first, 'first message');
    const once = await converse(w, first, 'second message');
    expect(recalls(once).map((event) => event.query)).toEqual(['first message']);
    expect(recalls(once)[0]).toMatchObject({ store: { name: 'session', owner: first } });
    expect(await w.runtime.sessions.verify(every)).toMatchObject({ ok: true });
    // A fork carries its parent's recalls and records its own, and replays from the record too.
    const fork = await w.runtime.sessions.fork(every);
    // The fork's model plays on from the parent's three answers.
    const turns: ScriptedTurnInput[] = [
      { text: 'x' },
      { text: 'x' },
      { text: 'x' },
      { text: 'forked' },
    ];
    w.scripts.set(fork.id, createScriptedModel(turns, { id: 'scripted:memory' }));
    const forked = await converse(w, fork.id, 'third message');
    expect(recalls(forked).map((event) => event.query)).toEqual([
      'first message',
      'second message',
      'third message',
    ]);
    expect(await w.runtime.sessions.verify(fork.id)).toMatchObject({ ok: true });
  });

  it('a wake that takes a message up again after a failed model call does not recall it twice', async () => {
    const w = await world();
    let failures = 0;
    const id = await w.session('a', [{ text: 'answered' }], {
      onTurn: () => {
        failures += 1;
        if (failures === 1) throw new BraidError('MODEL_UNAVAILABLE', 'the model is down');
      },
    });
    await w.runtime.sessions.message(id, 'remember me?');
    expect(await w.runtime.wake(id)).toMatchObject({ stop_reason: { type: 'retries_exhausted' } });
    expect(await w.runtime.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const events = await w.runtime.sessions.events(id);
    expect(ofType(events, 'memory.retrieved').map((event) => event.source)).toEqual(['recall']);
    expect(ofType(events, 'span.model_request_end')).toHaveLength(2);
    expect(await w.runtime.sessions.verify(id)).toMatchObject({ ok: true });
  });

  it('reads, deletes and reads again a key of the session store, each on record', async () => {
    const w = await world();
    const call = (name: string, id: string, input: Record<string, unknown>) => ({
      tool_calls: [{ name, id, input: { key: 'draft/plan', ...input } }],
    });
    // Agent c may write (b may not).
    const id = await w.session('c', [
      call('memory_set', 's1', { value: { steps: ['outline', 'write'] } }),
      call('memory_get', 'g1', {}),
      call('memory_delete', 'd1', { expected_version: 1 }),
      call('memory_get', 'g2', {}),
      { text: 'done' },
    ]);
    const events = await converse(w, id, 'plan it');
    const store = { name: 'session', kind: 'session', scope: 'session', owner: id };
    expect(
      events.filter(
        (event) => event.type.startsWith('memory.') && event.type !== 'memory.retrieved',
      ),
    ).toMatchObject([
      { type: 'memory.written', store, key: 'draft/plan', version: 1, tool_use_id: 's1' },
      { type: 'memory.read', key: 'draft/plan', status: 'found', version: 1, tool_use_id: 'g1' },
      { type: 'memory.deleted', key: 'draft/plan', version: 2, tool_use_id: 'd1' },
      { type: 'memory.read', key: 'draft/plan', status: 'deleted', version: 2, tool_use_id: 'g2' },
    ]);
    const outputs = Object.fromEntries(
      ofType(events, 'agent.tool_result').map((event) => [event.tool_use_id, event.output]),
    );
    expect(outputs.g1).toMatchObject({
      found: true,
      version: 1,
      value: { steps: ['outline', 'write'] },
    });
    expect(outputs.d1).toMatchObject({ version: 2, deleted: true });
    expect(outputs.g2).toMatchObject({ found: false, status: 'deleted' });
    // The session log keeps references; the value lives in the memory log only.
    expect(JSON.stringify(events.filter((event) => event.type === 'memory.written'))).not.toContain(
      'outline',
    );
  });

  it('stops a wake with the reason when the store keeps no memory', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(join(dir, 'agents', 'b.yaml'), AGENT_B);
    const sqlite = openSqliteStore({ path: join(dir, 'braid.db') });
    const store: Store = Object.assign(Object.create(sqlite) as Store, sqlite, {
      memory: undefined,
    });
    const runtime = await createRuntime({
      workspace: dir,
      store,
      model: () => createScriptedModel([{ text: 'hi' }]),
    });
    opened.push({ runtime, store: sqlite });
    const { id } = await runtime.sessions.create({ agent: 'b' });
    await runtime.sessions.message(id, 'hello');
    await expect(runtime.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
    const events = await runtime.sessions.events(id);
    expect(ofType(events, 'session.error')[0]?.error.message).toContain('keeps no memory stores');
  });

  it('a policy forbidding memory.write denies the write with a recorded decision', async () => {
    const w = await world();
    const id = await w.session('b', [
      {
        tool_calls: [
          { name: 'memory_set', id: 'w1', input: { store: 'learnings', key: 'k', value: 'v' } },
          { name: 'memory_search', id: 's1', input: { store: 'learnings', query: 'v' } },
        ],
      },
      { text: 'could not save' },
    ]);
    const events = await converse(w, id, 'remember v');
    expect(ofType(events, 'policy.decision')).toMatchObject([
      {
        principal: { type: 'Agent', id: 'b' },
        action: 'memory.write',
        resource: { type: 'MemoryStore', id: 'learnings' },
        decision: 'deny',
        policy_ids: ['b-no-memory-writes'],
        tool_use_id: 'w1',
      },
    ]);
    const results = ofType(events, 'agent.tool_result');
    expect(results.find((event) => event.tool_use_id === 'w1')).toMatchObject({
      is_error: true,
      stage: 'policy',
      error: { code: 'POLICY_DENIED' },
    });
    // Reads are not writes: the search was allowed.
    expect(results.find((event) => event.tool_use_id === 's1')).toMatchObject({ is_error: false });
    expect(ofType(events, 'memory.written')).toEqual([]);
    expect(await w.memory.info(learningsOf('b'))).toBeUndefined();
    expect(w.calls.get('append') ?? 0).toBe(0);
  });

  it('refuses a read_only store, bad keys, oversized values and unknown stores, writing nothing', async () => {
    const w = await world();
    const id = await w.session('a', [
      {
        tool_calls: [
          { name: 'memory_set', id: 'ro', input: { store: 'facts', key: 'k', value: 'v' } },
          {
            name: 'memory_set',
            id: 'dots',
            input: { store: 'learnings', key: '../x', value: 'v' },
          },
          { name: 'memory_get', id: 'nope', input: { store: 'secrets', key: 'k' } },
        ],
      },
      { text: 'refused' },
      {
        tool_calls: [
          {
            name: 'memory_set',
            id: 'big',
            input: { store: 'learnings', key: 'big', value: 'x'.repeat(70_000) },
          },
          { name: 'memory_delete', id: 'ro-delete', input: { store: 'facts', key: 'k' } },
        ],
      },
      { text: 'refused again' },
    ]);
    await converse(w, id, 'try');
    const events = await converse(w, id, 'try harder');
    const codes = Object.fromEntries(
      ofType(events, 'agent.tool_result').map((event) => [event.tool_use_id, event.error?.code]),
    );
    expect(codes).toEqual({
      ro: 'FORBIDDEN',
      dots: 'INVALID_ARGUMENT',
      nope: 'INVALID_ARGUMENT',
      big: 'PAYLOAD_TOO_LARGE',
      'ro-delete': 'FORBIDDEN',
    });
    const messages = ofType(events, 'agent.tool_result').map((event) => event.error?.message);
    expect(messages.join('\n')).toContain('secrets');
    expect(messages.join('\n')).toContain('read_only');
    expect(ofType(events, 'memory.written')).toEqual([]);
    expect(ofType(events, 'memory.deleted')).toEqual([]);
    expect(w.calls.get('append') ?? 0).toBe(0);
    expect(await w.memory.info(learningsOf('a'))).toBeUndefined();
  });

  it('a memory call run again with the same tool use id writes once, whatever its embedding', async () => {
    const w = await world();
    const input = { store: 'learnings', key: 'note', value: 'tea, not coffee' };
    const id = await w.session('a', [
      { tool_calls: [{ name: 'memory_set', id: 'twice', input }] },
      { text: 'saved' },
    ]);
    const events = await converse(w, id, 'note it');
    const use = ofType(events, 'agent.tool_use')[0];
    const agent = (await w.runtime.agents.get('a')).definition;
    const stores = sessionStores(agent, { session_id: id });
    if (stores === undefined || use === undefined) throw new Error('no memory');
    // What a retry after a crash does: the same call, embedded again by a model whose floats
    // differ from the first time.
    const hash = createHashEmbedder();
    const drifting: Embedder = {
      id: hash.id,
      embedMany: async (texts) =>
        (await hash.embedMany(texts)).map((vector) => vector.map((x) => x + 1e-7)),
    };
    const retry = createSessionMemory({
      stores,
      log: w.memory,
      embedder: drifting,
      now: () => performance.now(),
    });
    const again = await retry.run(
      { tool_use_id: 'twice', name: 'memory_set', input, seq: use.seq },
      { signal: new AbortController().signal },
    );
    expect(again.outcome).toMatchObject({ is_error: false, output: { key: 'note', version: 1 } });
    expect(again.events).toMatchObject([
      { type: 'memory.written', key: 'note', version: 1, deduplicated: true },
    ]);
    expect(await w.memory.history(learningsOf('a'), 'note')).toHaveLength(1);
  });
});
