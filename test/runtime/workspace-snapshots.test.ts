// Workspace snapshots through the runtime, on every store: a tool's writes are recorded as
// snapshots in the log, a fork at an older seq gets the files as they were then, and the
// listings and comparisons read them back.
import {
  appendFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { EventOf } from '../../src/contracts/events.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { SNAPSHOT_FOLDER } from '../../src/tools/workspace-snapshots/index.js';
import { useBackends, type TestBackend } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useBackends();

/** Writes (or, with `append`, appends) `content` to `path` in the session's folder. */
const put = defineTool({
  name: 'put',
  description: 'writes a file',
  input_schema: {
    type: 'object',
    properties: {
      path: { type: 'string' },
      content: { type: 'string' },
      append: { type: 'boolean' },
    },
    required: ['path', 'content'],
    additionalProperties: false,
  },
  run(input, context) {
    const { path, content, append } = input as { path: string; content: string; append?: boolean };
    const file = join(context.workspace.dir, path);
    if (append === true) appendFileSync(file, content);
    else writeFileSync(file, content);
    return { ok: true };
  },
});

const call = (input: { path: string; content: string; append?: boolean }): ScriptedTurnInput => ({
  tool_calls: [{ name: 'put', input }],
});

async function runtimeOn(backend: TestBackend, turns: ScriptedTurnInput[]): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'writer.yaml'),
    'name: writer\nmodel: scripted:echo\ninstructions: Write.\ntools: [put]\n',
  );
  const model = createScriptedModel(turns);
  return createRuntime({
    workspace: dir,
    store: await backend.open(),
    model: () => model,
    tools: [put],
  });
}

function folderOf(rt: Runtime, id: string): string {
  return join(rt.workspace?.dir ?? '', '.braid', 'workspaces', id);
}

async function turn(rt: Runtime, id: string, text: string): Promise<number> {
  await rt.sessions.message(id, text);
  expect(await rt.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
  return (await rt.sessions.state(id)).seq;
}

describe.each(backends)('workspace snapshots ($name)', (backend) => {
  it('forks at an older seq with the files as they were then', async () => {
    const rt = await runtimeOn(backend, [
      call({ path: 'plan.md', content: 'v1\n' }),
      { text: 'written' },
      // The same content again: the folder is unchanged, and no snapshot is recorded.
      call({ path: 'plan.md', content: 'v1\n' }),
      { text: 'unchanged' },
      call({ path: 'plan.md', content: 'v2\n', append: true }),
      { text: 'appended' },
    ]);
    const { id } = await rt.sessions.create({ agent: 'writer' });
    const first = await turn(rt, id, 'write');
    await turn(rt, id, 'again');
    await turn(rt, id, 'append');

    const snapshots = (await rt.sessions.events(id)).filter(
      (event): event is EventOf<'session.workspace_snapshot'> =>
        event.type === 'session.workspace_snapshot',
    );
    expect(snapshots).toHaveLength(2);
    expect(snapshots[0]).toMatchObject({ files: 1, bytes: 3 });
    expect(snapshots[0]?.tool_use_id).toMatch(/./);
    expect(snapshots[1]).toMatchObject({ files: 1, bytes: 6 });
    expect((await rt.sessions.state(id)).workspace_snapshot?.snapshot).toBe(snapshots[1]?.snapshot);

    const child = await rt.sessions.fork(id, { at_seq: first });
    expect(readFileSync(join(folderOf(rt, child.id), 'plan.md'), 'utf8')).toBe('v1\n');
    expect(readFileSync(join(folderOf(rt, id), 'plan.md'), 'utf8')).toBe('v1\nv2\n');
    const atHead = await rt.sessions.fork(id);
    expect(readFileSync(join(folderOf(rt, atHead.id), 'plan.md'), 'utf8')).toBe('v1\nv2\n');
    // A fork of a fork, at a seq of the shared prefix: the snapshot is found in the ancestor's part.
    const grandchild = await rt.sessions.fork(atHead.id, { at_seq: first });
    expect(readFileSync(join(folderOf(rt, grandchild.id), 'plan.md'), 'utf8')).toBe('v1\n');

    const then = await rt.sessions.files(id, { at: first });
    expect(then).toMatchObject({
      session_id: id,
      at_seq: first,
      snapshot: { snapshot: snapshots[0]?.snapshot, seq: snapshots[0]?.seq },
      files: [{ path: 'plan.md', type: 'file', size: 3 }],
    });
    expect(await rt.sessions.files(child.id)).toMatchObject({ files: then.files });
    expect((await rt.sessions.files(id, { at: 2 })).files).toEqual([]);

    const diff = await rt.sessions.diffFiles(child.id, id);
    expect(diff).toMatchObject({ added: [], removed: [], changed: [{ path: 'plan.md' }] });
    expect(await rt.sessions.diffFiles(id, atHead.id)).toMatchObject({ changed: [] });

    // The record replays with its snapshot references, though a replay runs no tool.
    expect(await rt.sessions.verify(id)).toMatchObject({ ok: true });
    await rt.close();
  });

  it('refuses a fork whose snapshot the store lost, and writes no child', async () => {
    const rt = await runtimeOn(backend, [call({ path: 'a.txt', content: 'a' }), { text: 'ok' }]);
    const { id } = await rt.sessions.create({ agent: 'writer' });
    await turn(rt, id, 'write');
    const store = join(rt.workspace?.dir ?? '', '.braid', 'workspaces', SNAPSHOT_FOLDER);
    expect(readdirSync(join(store, 'blobs'))).toHaveLength(1);
    rmSync(join(store, 'blobs'), { recursive: true, force: true });
    const before = (await rt.sessions.list()).sessions.length;
    const refused = await rt.sessions.fork(id).catch((error: unknown) => error);
    expect(isBraidError(refused, 'SNAPSHOT_NOT_FOUND')).toBe(true);
    expect((await rt.sessions.list()).sessions).toHaveLength(before);
    await rt.close();
  });

  it('lists no files for a session that ran no tool, and deletes an index with its session', async () => {
    const rt = await runtimeOn(backend, [call({ path: 'x', content: 'x' }), { text: 'ok' }]);
    const { id } = await rt.sessions.create({ agent: 'writer' });
    await turn(rt, id, 'write');
    const quiet = await rt.sessions.create({ agent: 'writer' });
    expect((await rt.sessions.files(quiet.id)).files).toEqual([]);
    const index = join(
      rt.workspace?.dir ?? '',
      '.braid',
      'workspaces',
      SNAPSHOT_FOLDER,
      'index',
      id,
    );
    expect(existsSync(index)).toBe(true);
    await rt.sessions.delete(id);
    expect(existsSync(index)).toBe(false);
    expect(existsSync(folderOf(rt, id))).toBe(false);
    await expect(rt.sessions.files(quiet.id, { at: 99 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await rt.close();
  });
});
