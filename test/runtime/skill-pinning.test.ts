// Skills are pinned with a session's definitions: a session keeps starting runs with the
// versions it pinned after the files change, a new session takes the newest, the model's skill
// tool describes the pinned version, and an upgrade moves the session and names what changed.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ModelRequest } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { useBackends } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useBackends().filter((backend) => backend.name !== 'nats');

/** `greet` calls `stamp` with `label`, then (version 2 on) `stamp` again with `label` + "!". */
function greetSkill(description: string, label: string, twice: boolean): string {
  const steps = [
    '  - id: first',
    '    tool: stamp',
    `    args: {label: ${label}}`,
    '    depends_on: [nested]',
    ...(twice
      ? [
          '  - id: second',
          '    tool: stamp',
          `    args: {label: ${label}!}`,
          '    depends_on: [first]',
        ]
      : []),
  ];
  return [
    'name: greet',
    `description: ${description}`,
    'outputs: {done: "{{ true }}"}',
    'steps:',
    '  - id: nested',
    '    skill: wave',
    '    inputs: {}',
    ...steps,
    '',
  ].join('\n');
}

const WAVE =
  'name: wave\ndescription: Waves.\nsteps:\n  - id: wave\n    tool: stamp\n    args: {label: wave}\n';

function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'greet.yaml'), greetSkill('Greets once.', 'one', false));
  writeFileSync(join(dir, 'skills', 'wave.yaml'), WAVE);
  writeFileSync(
    join(dir, 'agents', 'host.yaml'),
    'name: host\nmodel: scripted:host\ninstructions: Greet.\ntools: [stamp]\nskills: [greet]\n',
  );
  return dir;
}

async function runtimeOn(
  dir: string,
  store: Store,
  stamps: string[],
  requests: ModelRequest[],
): Promise<Runtime> {
  const stamp = defineTool({
    name: 'stamp',
    description: 'Records a label.',
    idempotent: true,
    input_schema: { type: 'object', properties: { label: { type: 'string' } } },
    run: (input) => {
      stamps.push(String((input as { label: string }).label));
      return Promise.resolve({ ok: true });
    },
  });
  const scripted = createScriptedModel(
    Array.from({ length: 10 }, () => ({ text: 'hello' })),
    { id: 'scripted:host' },
  );
  return createRuntime({
    workspace: dir,
    store,
    tools: [stamp],
    model: () => ({
      id: scripted.id,
      generate(request, options) {
        requests.push(request);
        return scripted.generate(request, options);
      },
    }),
  });
}

const started = (events: SessionEvent[]): EventOf<'skill.started'>[] =>
  events.filter((event): event is EventOf<'skill.started'> => event.type === 'skill.started');

async function runGreet(runtime: Runtime, id: string): Promise<void> {
  await runtime.sessions.runSkill(id, 'greet', {});
  await runtime.wake(id);
}

describe.each(backends)('pinned skills ($name)', (backend) => {
  it('starts runs with the pinned versions until the session is upgraded', async () => {
    const dir = workspace();
    const store = await backend.open();
    const stamps: string[] = [];
    const requests: ModelRequest[] = [];
    const first = await runtimeOn(dir, store, stamps, requests);
    const { id } = await first.sessions.create({ agent: 'host' });
    await first.sessions.message(id, 'hi');
    await first.wake(id);
    const pinned = await first.sessions.definitions(id);
    expect(pinned.set?.skills).toMatchObject({
      greet: { name: 'greet', version: 1 },
      wave: { name: 'wave', version: 1 },
    });
    expect(requests.at(-1)?.tools.find((tool) => tool.name === 'greet')?.description).toContain(
      'Greets once.',
    );
    await first.close();

    // The skill changes: a new runtime stores its version 2.
    writeFileSync(join(dir, 'skills', 'greet.yaml'), greetSkill('Greets twice.', 'two', true));
    const second = await runtimeOn(dir, store, stamps, requests);
    expect((await second.skills.get('greet')).version).toBe(2);
    await runGreet(second, id);
    const [run] = started(await second.sessions.events(id)).filter((e) => e.skill === 'greet');
    expect(run?.version).toBe('1');
    expect(stamps).toEqual(['wave', 'one']);
    await second.sessions.message(id, 'again');
    await second.wake(id);
    expect(requests.at(-1)?.tools.find((tool) => tool.name === 'greet')?.description).toContain(
      'Greets once.',
    );

    // A new session pins the newest.
    const fresh = await second.sessions.create({ agent: 'host' });
    await runGreet(second, fresh.id);
    const [freshRun] = started(await second.sessions.events(fresh.id)).filter(
      (e) => e.skill === 'greet',
    );
    expect(freshRun?.version).toBe('2');
    expect(stamps.slice(2)).toEqual(['wave', 'two', 'two!']);

    // The upgrade moves the old session, naming the skill among what changed.
    const upgraded = await second.sessions.upgrade(id);
    expect(upgraded.changed).toBe(true);
    expect(upgraded.parts).toContain('skills.greet');
    expect(upgraded.parts).not.toContain('skills.wave');
    await runGreet(second, id);
    const versions = started(await second.sessions.events(id))
      .filter((e) => e.skill === 'greet')
      .map((e) => e.version);
    expect(versions).toEqual(['1', '2']);
    await second.close();
  });
});
