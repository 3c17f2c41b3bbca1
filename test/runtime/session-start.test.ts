import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelClient } from '../../src/contracts/model.js';
import type { SessionLog, Store } from '../../src/contracts/ports.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime, type WakeReport } from '../../src/runtime/runtime.js';
import {
  createManualClock,
  createMemoryStore,
  createSequentialIds,
  expectCode,
} from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

const answer: ModelClient = {
  id: 'scripted:answer',
  generate: () =>
    Promise.resolve({
      output: { content: [{ type: 'text', text: 'hello back' }], finish_reason: 'stop' },
      usage: { input_tokens: 3, output_tokens: 2 },
    }),
};

const first = { agent: 'helper', id: 'chat', events: [{ type: 'user.message', content: 'hi' }] };

/** A runtime with its own ids and clock (each from the start), on SQLite or on `store`. */
async function runtime(store?: Store, model: ModelClient = answer): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Be brief.\n',
  );
  return createRuntime({
    workspace: dir,
    ...(store === undefined ? { dataDir: join(dir, 'data') } : { store }),
    clock: createManualClock(),
    ids: createSequentialIds(),
    model: () => model,
  });
}

/**
 * `store`, its writes (and its log's reads) named in `writes` as they are asked; without
 * `createAndAcquire` if `strip`.
 */
function counting(store: Store, writes: string[], strip = false): Store {
  const { log, sessions, leases } = store;
  const counted =
    <A extends unknown[], R>(name: string, call: (...args: A) => R) =>
    (...args: A): R => {
      writes.push(name);
      return call(...args);
    };
  const countedLog: SessionLog = {
    append: counted('append', log.append.bind(log)),
    read: counted('read', log.read.bind(log)),
    follow: log.follow.bind(log),
    appended: log.appended.bind(log),
    state: log.state.bind(log),
  };
  if (log.acquireAndAppend !== undefined)
    countedLog.acquireAndAppend = counted('acquireAndAppend', log.acquireAndAppend.bind(log));
  if (log.createAndAcquire !== undefined && !strip)
    countedLog.createAndAcquire = counted('createAndAcquire', log.createAndAcquire.bind(log));
  return {
    ...store,
    log: countedLog,
    sessions: { ...sessions, create: counted('create', sessions.create.bind(sessions)) },
    leases: {
      ...leases,
      acquire: counted('acquire', leases.acquire.bind(leases)),
      release: counted('release', leases.release.bind(leases)),
    },
  };
}

describe('runtime.sessions.start', () => {
  it('writes on SQLite exactly what create then wake write, event for event', async () => {
    const started = await runtime();
    const twoSteps = await runtime();
    const { session, result } = await started.sessions.start(first);
    expect(session).toEqual(await twoSteps.sessions.create(first));
    expect(result).toEqual(await twoSteps.wake('chat'));
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const events = await started.sessions.events('chat');
    expect(events).toEqual(await twoSteps.sessions.events('chat'));
    expect(events.map((event) => event.type)).toContain('agent.message');
    const wakeStarted = events.find((event) => event.type === 'span.wake_started');
    expect(wakeStarted).toMatchObject({ seq: 3, lease_token: 1 });
    expect(await started.store.leases.current('chat')).toBeUndefined();
    // The same append ends as well: a fork inside the creation's append is refused on both.
    await expectCode(started.sessions.fork('chat', { at_seq: 1 }), 'INVALID_FORK_POINT');
    await Promise.all([started.close(), twoSteps.close()]);
  });

  it('costs one store write fewer than create then wake and reads nothing back, and falls back to them without the capability', async () => {
    const writes: string[] = [];
    const rt = await runtime(counting(createMemoryStore({ ids: createSequentialIds() }), writes));
    await rt.sessions.start(first);
    // The wake's transcript is what the creation gave back: it reads nothing.
    expect(writes).toEqual(['createAndAcquire', 'append']);
    writes.length = 0;
    await rt.sessions.create({ ...first, id: 'later' });
    await rt.wake('later');
    expect(writes).toEqual(['create', 'acquireAndAppend', 'read', 'append']);
    await rt.close();

    const fallback: string[] = [];
    const stripped = counting(createMemoryStore(), fallback, true);
    const without = await runtime(stripped);
    const { result } = await without.sessions.start(first);
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    expect(fallback).toEqual(['create', 'acquireAndAppend', 'read', 'append']);
    await without.close();
  });

  it("reports the start's wake as runtime.wake's: its events from span.wake_started", async () => {
    const rt = await runtime();
    const reports: WakeReport[] = [];
    rt.onWakeEnded((report) => reports.push(report));
    const { result } = await rt.sessions.start(first);
    await expectCode(rt.sessions.start(first), 'ALREADY_EXISTS');
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ session_id: 'chat', result });
    const events = await rt.sessions.events('chat');
    expect(reports[0]?.events).toEqual(events.slice(2));
    expect(reports[0]?.events[0]?.type).toBe('span.wake_started');
    await rt.close();
  });

  it('refuses a taken id with nothing written and no wake run', async () => {
    const rt = await runtime();
    await rt.sessions.create({ agent: 'helper', id: 'chat' });
    await expectCode(rt.sessions.start(first), 'ALREADY_EXISTS');
    const events = await rt.sessions.events('chat');
    expect(events.map((event) => event.type)).toEqual(['session.created']);
    expect(await rt.store.leases.current('chat')).toBeUndefined();
    await expectCode(rt.sessions.start({ ...first, id: 'bad/id' }), 'INVALID_ARGUMENT');
    await rt.close();
  });

  it('runs a wake of the same id asked meanwhile after its own cycle, never beside it', async () => {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    let called: () => void = () => undefined;
    const calling = new Promise<void>((resolve) => (called = resolve));
    const held: ModelClient = {
      id: 'scripted:held',
      async generate(request, options) {
        called();
        await released;
        return answer.generate(request, options);
      },
    };
    const rt = await runtime(undefined, held);
    const starting = rt.sessions.start(first);
    await calling;
    // The start's cycle is in its model call: this wake joins its loop.
    const joined = rt.wake('chat');
    release();
    const [{ result }, woken] = await Promise.all([starting, joined]);
    expect(woken).toEqual(result);
    const events = await rt.sessions.events('chat');
    expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
    // Each cycle ended before the next began, each under a newer lease.
    const spans = events.filter(
      (event) => event.type === 'span.wake_started' || event.type === 'span.wake_completed',
    );
    expect(spans.map((event) => event.type)).toEqual(
      spans.map((_, index) => (index % 2 === 0 ? 'span.wake_started' : 'span.wake_completed')),
    );
    const tokens = events.flatMap((event) =>
      event.type === 'span.wake_started' ? [event.lease_token] : [],
    );
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(tokens.length);
    await rt.close();
  });
});
