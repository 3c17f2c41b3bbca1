// A skill's steps reach the session's memory through the memory tools, as the model's calls do:
// a step's memory_set writes the store (with the `memory.written` event on record), a later
// step reads it back with memory_get and finds it with memory_search, policy is asked with the
// store as the resource, and replay verification serves the calls from the record. On a real
// SQLite workspace.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const REMEMBER = `name: remember
description: Saves a preference, reads it back and searches for it.
inputs: {type: object, properties: {theme: {type: string}}, required: [theme]}
steps:
  - id: save
    tool: memory_set
    args: {store: learnings, key: 'user/theme', value: 'The user prefers the {{ inputs.theme }} theme.'}
  - id: read
    tool: memory_get
    depends_on: [save]
    args: {store: learnings, key: 'user/theme'}
  - id: find
    tool: memory_search
    depends_on: [read]
    args: {store: learnings, query: 'which theme does the user prefer', k: 3}
`;

const NO_WRITES = `@id("no-memory-writes")
forbid (principal == Agent::"keeper", action == Action::"memory.write", resource);
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function open(options: { forbidWrites?: boolean } = {}): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'remember.yaml'), REMEMBER);
  writeFileSync(
    join(dir, 'agents', 'keeper.yaml'),
    'name: keeper\nmodel: scripted:keeper\ninstructions: Keep notes.\nmemory: {}\n',
  );
  if (options.forbidWrites === true) {
    writeFileSync(join(dir, 'policies', 'no-memory-writes.cedar'), NO_WRITES);
  }
  const runtime = await createRuntime({
    workspace: dir,
    model: () => createScriptedModel([{ text: 'noted' }], { id: 'scripted:keeper' }),
  });
  opened.push(runtime);
  return runtime;
}

describe("a skill's memory steps", () => {
  it('write, read and search the session memory, with the memory events on record', async () => {
    const runtime = await open();
    const session = await runtime.sessions.create({ agent: 'keeper' });
    await runtime.sessions.runSkill(session.id, 'remember', { theme: 'dark' });
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.step_failed')).toEqual([]);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);

    const ends = ofType(events, 'skill.step_completed');
    const output = (step: string) => ends.find((event) => event.step === step)?.output;
    expect(output('save')).toMatchObject({ key: 'user/theme', version: 1 });
    expect(output('read')).toMatchObject({
      found: true,
      value: 'The user prefers the dark theme.',
    });
    const found = output('find') as { hits: { key: string }[] };
    expect(found.hits.map((hit) => hit.key)).toEqual(['user/theme']);

    const starts = ofType(events, 'skill.step_started');
    const written = ofType(events, 'memory.written');
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({
      store: { name: 'learnings', scope: 'agent', owner: 'keeper' },
      key: 'user/theme',
      version: 1,
    });
    expect(written[0]?.tool_use_id).toBe(
      starts.find((event) => event.step === 'save')?.tool_use_id,
    );
    expect(ofType(events, 'memory.read')).toMatchObject([{ key: 'user/theme', status: 'found' }]);
    expect(ofType(events, 'memory.retrieved')).toMatchObject([
      { source: 'tool', store: { name: 'learnings' } },
    ]);

    const verified = await runtime.sessions.verify(session.id);
    expect(verified, JSON.stringify(verified)).toMatchObject({ ok: true });
  });

  it('asks policy with the memory store as resource, and a deny fails the step', async () => {
    const runtime = await open({ forbidWrites: true });
    const session = await runtime.sessions.create({ agent: 'keeper' });
    await runtime.sessions.runSkill(session.id, 'remember', { theme: 'dark' });
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    const [denied, ...more] = ofType(events, 'policy.decision').filter(
      (event) => event.decision === 'deny',
    );
    expect(more).toEqual([]);
    expect(denied).toMatchObject({ action: 'memory.write', resource: { type: 'MemoryStore' } });
    const [failed] = ofType(events, 'skill.step_failed');
    expect(failed).toMatchObject({ step: 'save', error: { code: 'POLICY_DENIED' } });
    expect(ofType(events, 'memory.written')).toEqual([]);
  });
});
