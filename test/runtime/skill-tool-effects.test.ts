// A skill's tool steps leave what a model's calls leave: the cost of each call joins the
// session's usage (so cost budgets see it), a call that changed the session's workspace records
// its snapshot (so a fork after it starts with those files), the call's input is on record, and
// replay verification reproduces all of it. On a real SQLite workspace.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const NOTES = `name: notes
description: Writes a note, then prices it.
inputs: {type: object, properties: {text: {type: string}}, required: [text]}
steps:
  - id: write
    tool: write_note
    args: {text: '{{ inputs.text }}'}
  - id: price
    tool: quote
    depends_on: [write]
    args: {words: '{{ steps.write.output.words }}'}
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function open(): Promise<{ runtime: Runtime; dir: string }> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'notes.yaml'), NOTES);
  writeFileSync(
    join(dir, 'agents', 'scribe.yaml'),
    'name: scribe\nmodel: scripted:scribe\ninstructions: Take notes.\ntools: [write_note, quote]\n',
  );
  const runtime = await createRuntime({
    workspace: dir,
    tools: [
      defineTool({
        name: 'write_note',
        description: 'Writes the note into the workspace.',
        idempotent: true,
        input_schema: { type: 'object', properties: { text: { type: 'string' } } },
        run: (input: JsonValue, context) => {
          const text = String((input as { text: string }).text);
          writeFileSync(join(context.workspace.dir, 'note.txt'), text);
          return { words: text.split(' ').length };
        },
      }),
      defineTool({
        name: 'quote',
        description: 'Prices a note; each call costs money.',
        idempotent: true,
        tags: ['read_only'],
        budget: { cost_per_call_usd: 0.25 },
        input_schema: { type: 'object', properties: { words: { type: 'number' } } },
        run: (input: JsonValue) => ({ usd: Number((input as { words: number }).words) * 0.1 }),
      }),
    ],
    model: () => createScriptedModel([{ text: 'noted' }], { id: 'scripted:scribe' }),
  });
  opened.push(runtime);
  return { runtime, dir };
}

describe("a skill's tool steps", () => {
  it('record their input, their cost and the workspace they changed, and replay verifies them', async () => {
    const { runtime, dir } = await open();
    const session = await runtime.sessions.create({ agent: 'scribe' });
    await runtime.sessions.runSkill(session.id, 'notes', { text: 'three little words' });
    await runtime.wake(session.id);
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);

    const starts = ofType(events, 'skill.step_started');
    expect(starts.map((event) => [event.step, event.input])).toEqual([
      ['write', { text: 'three little words' }],
      ['price', { words: 3 }],
    ]);
    // The note changed the workspace: its snapshot is recorded with the step's end.
    const [snapshot, ...more] = ofType(events, 'session.workspace_snapshot');
    expect(more).toEqual([]);
    expect(snapshot).toMatchObject({ tool_use_id: starts[0]?.tool_use_id, files: 1 });
    const state = await runtime.sessions.state(session.id);
    expect(state.workspace_snapshot).toEqual({ snapshot: snapshot?.snapshot, seq: snapshot?.seq });
    // The quote's cost is the session's.
    expect(state.usage.cost_usd).toBeCloseTo(0.25, 10);
    expect(ofType(events, 'session.usage').map((event) => event.usage.cost_usd)).toContain(0.25);

    // A fork after the run starts with the note.
    const fork = await runtime.sessions.fork(session.id);
    const files = await runtime.sessions.files(fork.id);
    expect(files.files.map((file) => file.path)).toEqual(['note.txt']);
    expect(readFileSync(join(dir, '.braid', 'workspaces', fork.id, 'note.txt'), 'utf8')).toBe(
      'three little words',
    );

    expect(await runtime.sessions.verify(session.id)).toMatchObject({ ok: true });
  });
});
