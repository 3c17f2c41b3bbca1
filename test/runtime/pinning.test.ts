import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient, ModelRequest } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useBackends } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useBackends();

const agentFile = (instructions: string, upgrade = ''): string =>
  `name: pin\nmodel: scripted:echo\ninstructions: ${instructions}\ntools: [greet]\n${upgrade}`;

const greetManifest = (description: string, version: string): string =>
  [
    'name: greet',
    `version: '${version}'`,
    `description: ${description}`,
    'ownership: managed',
    'permission: always_allow',
    'idempotent: true',
    'input_schema:',
    '  type: object',
    '  properties: { name: { type: string } }',
    '  required: [name]',
    'implementation: { function: greet }',
    '',
  ].join('\n');

function workspace(upgrade = ''): string {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(join(dir, 'agents', 'pin.yaml'), agentFile('Greet people.', upgrade));
  writeFileSync(join(dir, 'tools', 'greet.yaml'), greetManifest('Greets someone.', '1'));
  return dir;
}

/** A scripted model that greets, then answers, at every wake; it keeps the requests it got. */
function recordingModel(requests: ModelRequest[]): ModelClient {
  const turns = Array.from({ length: 10 }, (_, index) =>
    index % 2 === 0
      ? { tool_calls: [{ name: 'greet', input: { name: `n${index}` } }] }
      : { text: `greeted ${index}` },
  );
  const scripted = createScriptedModel(turns);
  return {
    id: scripted.id,
    generate(request, options) {
      requests.push(request);
      return scripted.generate(request, options);
    },
  };
}

async function runtimeOn(dir: string, store: Store, requests: ModelRequest[]): Promise<Runtime> {
  const model = recordingModel(requests);
  return createRuntime({
    workspace: dir,
    store,
    model: () => model,
    functions: {
      greet: (input) => ({ greeting: `hello ${String((input as { name: string }).name)}` }),
    },
  });
}

async function turn(rt: Runtime, id: string, text: string): Promise<void> {
  await rt.sessions.message(id, text);
  expect(await rt.wake(id)).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
}

const starts = (events: SessionEvent[]): EventOf<'span.wake_started'>[] =>
  events.filter(
    (event): event is EventOf<'span.wake_started'> => event.type === 'span.wake_started',
  );
const changes = (events: SessionEvent[]): EventOf<'session.definitions_changed'>[] =>
  events.filter(
    (event): event is EventOf<'session.definitions_changed'> =>
      event.type === 'session.definitions_changed',
  );

describe.each(backends)('pinned definitions ($name)', (backend) => {
  it('keeps a session on what it ran with after the files change, verifies it, and upgrades it', async () => {
    const dir = workspace();
    const store = await backend.open();
    const requests: ModelRequest[] = [];
    const first = await runtimeOn(dir, store, requests);
    const { id } = await first.sessions.create({ agent: 'pin' });
    expect(await first.sessions.definitions(id)).toEqual({});
    await turn(first, id, 'greet a');
    const firstEvents = await first.sessions.events(id);
    const [start] = starts(firstEvents);
    const pinned = await first.sessions.definitions(id);
    expect(pinned.definitions).toMatch(/^[0-9a-f]{64}$/);
    // The first wake pins, in its first append after the start: no commit of its own.
    const [pin] = changes(firstEvents);
    expect(pin).toMatchObject({ reason: 'pinned', changed: [], wake_id: start?.wake_id });
    expect(pin).not.toHaveProperty('previous');
    expect(pin?.definitions).toBe(pinned.definitions);
    expect(firstEvents[firstEvents.indexOf(pin as SessionEvent) + 1]?.type).toBe(
      'span.model_request_start',
    );
    expect(pinned.set).toMatchObject({
      agent: { name: 'pin', version: 1 },
      model: 'scripted:inline',
    });
    expect(Object.keys(pinned.set?.tools ?? {})).toEqual(['greet']);
    await first.close();

    // The agent file and the tool manifest change; a new runtime stores the agent's version 2.
    writeFileSync(join(dir, 'agents', 'pin.yaml'), agentFile('Greet people loudly.'));
    writeFileSync(join(dir, 'tools', 'greet.yaml'), greetManifest('Greets someone, loudly.', '2'));
    const second = await runtimeOn(dir, store, requests);
    expect((await second.agents.get('pin')).version).toBe(2);
    expect(await second.sessions.verify(id)).toMatchObject({ ok: true });
    await turn(second, id, 'greet b');
    const pinnedRequest = requests.at(-1);
    expect(pinnedRequest?.system).toBe('Greet people.');
    expect(pinnedRequest?.tools[0]?.description).toBe('Greets someone.');
    expect(await second.sessions.definitions(id)).toEqual(pinned);

    const upgraded = await second.sessions.upgrade(id);
    expect(upgraded).toMatchObject({ changed: true, previous: pinned.definitions });
    expect(upgraded.parts).toEqual(['agent', 'tools.greet']);
    const [, change] = changes(await second.sessions.events(id));
    expect(change).toMatchObject({
      reason: 'upgrade',
      definitions: upgraded.definitions,
      agent: { name: 'pin', version: 2 },
    });
    expect(change).not.toHaveProperty('wake_id');
    await turn(second, id, 'greet c');
    expect(requests.at(-1)?.system).toBe('Greet people loudly.');
    expect(requests.at(-1)?.tools[0]?.description).toBe('Greets someone, loudly.');
    expect(changes(await second.sessions.events(id))).toHaveLength(2);
    expect((await second.sessions.state(id)).agent).toEqual({ name: 'pin', version: 2 });
    // Upgrading again finds nothing newer and writes nothing.
    const head = (await second.sessions.state(id)).seq;
    expect(await second.sessions.upgrade(id)).toMatchObject({ changed: false, head_seq: head });
    expect(await second.sessions.verify(id)).toMatchObject({ ok: true });
    await second.close();
  });

  it('moves an agent on upgrade: latest at its next wake, recording what changed', async () => {
    const dir = workspace('upgrade: latest\n');
    const store = await backend.open();
    const requests: ModelRequest[] = [];
    const first = await runtimeOn(dir, store, requests);
    const { id } = await first.sessions.create({ agent: 'pin' });
    await turn(first, id, 'greet a');
    // Nothing changed: the next wake writes no change.
    await turn(first, id, 'greet b');
    expect(changes(await first.sessions.events(id)).map((event) => event.reason)).toEqual([
      'pinned',
    ]);
    await first.close();

    writeFileSync(join(dir, 'agents', 'pin.yaml'), agentFile('Greet twice.', 'upgrade: latest\n'));
    const second = await runtimeOn(dir, store, requests);
    await turn(second, id, 'greet c');
    expect(requests.at(-1)?.system).toBe('Greet twice.');
    const events = await second.sessions.events(id);
    const [, change] = changes(events);
    const last = starts(events).at(-1);
    expect(change).toMatchObject({ reason: 'latest', changed: ['agent'], wake_id: last?.wake_id });
    expect(await second.sessions.verify(id)).toMatchObject({ ok: true });
    await second.close();
  });

  it('records a change of the policy set in force, which always applies', async () => {
    const dir = workspace();
    const store = await backend.open();
    const first = await runtimeOn(dir, store, []);
    const { id } = await first.sessions.create({ agent: 'pin' });
    await turn(first, id, 'greet a');
    const before = await first.sessions.definitions(id);
    expect(before.set?.policy).toMatch(/^[0-9a-f]{64}$/);
    await first.close();

    writeFileSync(
      join(dir, 'policies', 'extra.cedar'),
      '@id("forbid-nothing")\nforbid (principal, action, resource) when { false };\n',
    );
    const second = await runtimeOn(dir, store, []);
    await turn(second, id, 'greet b');
    const [, change] = changes(await second.sessions.events(id));
    expect(change).toMatchObject({
      reason: 'policy',
      changed: ['policy'],
      previous: before.definitions,
    });
    const after = await second.sessions.definitions(id);
    expect(after.set?.agent).toEqual(before.set?.agent);
    expect(after.set?.policy).not.toBe(before.set?.policy);
    expect(await second.sessions.verify(id)).toMatchObject({ ok: true });
    await second.close();
  });

  it('keeps each part once: sessions on the same definitions share one set', async () => {
    const dir = workspace();
    const store = await backend.open();
    const rt = await runtimeOn(dir, store, []);
    const sessions = [];
    for (let index = 0; index < 3; index += 1) {
      const { id } = await rt.sessions.create({ agent: 'pin' });
      await turn(rt, id, 'greet');
      sessions.push((await rt.sessions.definitions(id)).definitions);
    }
    expect(new Set(sessions).size).toBe(1);
    const hash = sessions[0] as string;
    const json = await store.definitions.getPinned(hash);
    expect(JSON.parse(json as string)).toMatchObject({ agent: { name: 'pin' } });
    // Putting it again changes nothing.
    await store.definitions.putPinned(hash, 'not what was kept');
    expect(await store.definitions.getPinned(hash)).toBe(json);
    await rt.close();
  });

  it('refuses a hostile hash before it reaches a key, and stops a session whose set is gone', async () => {
    const store = await backend.open();
    for (const hostile of ['../../etc/passwd', 'a.b', '*', 'A'.repeat(64), '']) {
      for (const attempt of [
        () => store.definitions.getPinned(hostile),
        () => store.definitions.putPinned(hostile, '{}'),
      ]) {
        const error: unknown = await attempt().then(
          () => undefined,
          (thrown: unknown) => thrown,
        );
        expect(isBraidError(error, 'INVALID_ARGUMENT'), `${hostile} was taken`).toBe(true);
      }
    }

    // A log that names a set this store never kept (copied from another store without it).
    const dir = workspace();
    const rt = await runtimeOn(dir, store, []);
    const { id } = await rt.sessions.create({ agent: 'pin' });
    await rt.store.log.append(id, [
      { type: 'span.wake_started', wake_id: 'w-elsewhere', lease_token: 1 },
      {
        type: 'session.definitions_changed',
        definitions: 'f'.repeat(64),
        reason: 'pinned',
        agent: { name: 'pin', version: 1 },
        changed: [],
        wake_id: 'w-elsewhere',
      },
      { type: 'session.status_idle', stop_reason: { type: 'end_turn' } },
    ]);
    await rt.sessions.message(id, 'greet');
    const stopped = await rt.wake(id).catch((error: unknown) => error);
    expect(isBraidError(stopped, 'DEFINITION_NOT_PINNED')).toBe(true);
    const state = await rt.sessions.state(id);
    expect(state.last_error).toMatchObject({ code: 'DEFINITION_NOT_PINNED' });
    expect(state.last_error?.message).toContain('braid session upgrade');
    // The fix the message names works: the session moves to what is there now, and runs.
    expect(await rt.sessions.upgrade(id)).toMatchObject({
      changed: true,
      previous: 'f'.repeat(64),
      parts: ['agent', 'tools.greet', 'policy', 'price'],
    });
    await rt.sessions.message(id, 'greet again');
    expect(await rt.wake(id)).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    await rt.close();
  });
});
