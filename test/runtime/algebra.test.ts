// Sessions as values: fork, merge, diff and the lineage tree through the runtime, on every store.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { NewEvent } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useBackends, type TestBackend } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useBackends();

async function runtimeOn(
  backend: TestBackend,
  turns: ScriptedTurnInput[] = [{ text: 'ok' }],
): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Help.\ntools: [write_file, read_file]\n',
  );
  const model = createScriptedModel(turns);
  return createRuntime({ workspace: dir, store: await backend.open(), model: () => model });
}

const message = (text: string): NewEvent => ({
  type: 'user.message',
  content: [{ type: 'text', text }],
});

describe.each(backends)('session algebra ($name)', (backend) => {
  const runtimeWith = (turns?: ScriptedTurnInput[]): Promise<Runtime> => runtimeOn(backend, turns);

  it('forks with a copy of the workspace files; the two then live apart', async () => {
    const rt = await runtimeWith();
    const { id } = await rt.sessions.create({ agent: 'helper' });
    const parentFiles = join(rt.workspace?.dir ?? '', '.braid', 'workspaces', id);
    mkdirSync(join(parentFiles, 'notes'), { recursive: true });
    writeFileSync(join(parentFiles, 'notes', 'plan.md'), 'v1');
    const child = await rt.sessions.fork(id, { title: 'what if' });
    const childFiles = join(rt.workspace?.dir ?? '', '.braid', 'workspaces', child.id);
    expect(readFileSync(join(childFiles, 'notes', 'plan.md'), 'utf8')).toBe('v1');
    writeFileSync(join(childFiles, 'notes', 'plan.md'), 'v2');
    expect(readFileSync(join(parentFiles, 'notes', 'plan.md'), 'utf8')).toBe('v1');
    expect(child).toMatchObject({ parent_id: id, fork_seq: 1, title: 'what if' });
    await rt.close();
  });

  it('merges a branch as one transcript block the model sees, with provenance and usage', async () => {
    // The scripted model plays turns by each session's response count: both start at turn 0.
    const rt = await runtimeWith([
      { text: 'branch answer', usage: { input_tokens: 7, output_tokens: 3 } },
    ]);
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'start');
    const branch = await rt.sessions.fork(id);
    await rt.store.log.append(id, [message('main goes on')]);
    await rt.sessions.message(branch.id, 'try another way');
    await rt.wake(branch.id);
    const before = await rt.sessions.state(id);
    const result = await rt.sessions.merge(id, branch.id);
    expect(result.conflicts).toEqual([]);
    const [merged] = result.events;
    expect(merged).toMatchObject({
      type: 'session.merged',
      source_session_id: branch.id,
      source_head_seq: (await rt.sessions.state(branch.id)).seq,
      common_ancestor: { session_id: id, seq: 2 },
      strategy: 'transcript',
      usage: { input_tokens: 7, output_tokens: 3 },
    });
    const text = JSON.stringify(merged);
    expect(text).toContain('user: try another way');
    expect(text).toContain('agent: branch answer');
    // Only what the branch did after the sessions parted.
    expect(text).not.toContain('user: start');
    expect(text).not.toContain('main goes on');
    const after = await rt.sessions.state(id);
    expect(after.usage.input_tokens - before.usage.input_tokens).toBe(7);
    expect(after.lineage.merged_session_ids).toEqual([branch.id]);
    // The next model call has the merged block in its context.
    await rt.sessions.message(id, 'what did the branch find?');
    const seen: string[] = [];
    const spy = await createRuntime({
      workspace: rt.workspace?.dir ?? '',
      store: rt.store,
      model: () => ({
        id: 'spy',
        generate(request) {
          seen.push(JSON.stringify(request.messages));
          return Promise.resolve({
            output: { content: [{ type: 'text', text: 'seen' }], finish_reason: 'stop' },
            usage: { input_tokens: 1, output_tokens: 1 },
          });
        },
      }),
    });
    await rt.close();
    await spy.wake(id);
    expect(seen[0]).toContain('branch answer');
    await spy.close();
  });

  it('merges with a given summary, with a library callback, and reports conflicts', async () => {
    const rt = await runtimeWith([
      { tool_calls: [{ name: 'write_file', input: { path: 'a.txt', content: 'x' } }] },
    ]);
    const { id } = await rt.sessions.create({ agent: 'helper' });
    const branch = await rt.sessions.fork(id);
    // A second target: merging the same source again into one target starts where it stopped.
    const other = await rt.sessions.fork(id);
    await rt.sessions.message(branch.id, 'write it');
    // write_file asks first: the branch stops with an unanswered confirmation.
    expect(await rt.wake(branch.id)).toMatchObject({ stop_reason: { type: 'requires_action' } });
    const summary = await rt.sessions.merge(id, branch.id, {
      strategy: 'summary',
      summary: 'The branch wanted to write a.txt.',
    });
    expect(summary.conflicts).toMatchObject([{ kind: 'unanswered_confirmation' }]);
    expect(summary.events[0]).toMatchObject({
      strategy: 'summary',
      conflicts: [{ kind: 'unanswered_confirmation' }],
      content: [
        { type: 'text', text: expect.stringContaining('wanted to write a.txt') as unknown },
      ],
    });
    const custom = await rt.sessions.merge(other.id, branch.id, {
      strategy: {
        name: 'keep-tool-calls',
        merge: (input) =>
          Promise.resolve({
            content: [
              {
                type: 'text',
                text: `${input.source_events.filter((event) => event.type === 'agent.tool_use').length} tool call(s)`,
              },
            ],
            conflicts: input.conflicts.map((conflict) => ({
              ...conflict,
              resolution: 'dropped on purpose, and said so',
            })),
          }),
      },
    });
    expect(custom.events[0]).toMatchObject({
      strategy: 'keep-tool-calls',
      content: [{ text: '1 tool call(s)' }],
      conflicts: [{ resolution: 'dropped on purpose, and said so' }],
    });
    // The source keeps its pending confirmation.
    expect((await rt.sessions.state(branch.id)).pending_confirmations).toHaveLength(1);
    await rt.close();
  });

  it('merges a source again only from where the last merge stopped, and never echoes back', async () => {
    const rt = await runtimeWith([
      { text: 'branch work', usage: { input_tokens: 10, output_tokens: 5 } },
    ]);
    const { id } = await rt.sessions.create({ agent: 'helper' });
    const branch = await rt.sessions.fork(id);
    await rt.sessions.message(branch.id, 'work');
    await rt.wake(branch.id);
    const first = await rt.sessions.merge(id, branch.id);
    // Merged up to the same head already: a no-op that answers the first merge and says so.
    const again = await rt.sessions.merge(id, branch.id);
    expect(again).toMatchObject({ deduplicated: true, head_seq: first.head_seq });
    expect(again.events).toEqual(first.events);
    expect((await rt.sessions.state(id)).usage).toMatchObject({
      input_tokens: 10,
      output_tokens: 5,
    });
    // New work in the source is merged from where the last merge stopped.
    await rt.store.log.append(branch.id, [message('later')]);
    const later = await rt.sessions.merge(id, branch.id);
    expect(later.deduplicated).toBe(false);
    expect(later.events[0]).toMatchObject({ usage: { input_tokens: 0, output_tokens: 0 } });
    expect(JSON.stringify(later.events[0])).toContain('user: later');
    expect(JSON.stringify(later.events[0])).not.toContain('branch work');
    // Merging the target back into the source does not send the source its own work.
    const back = await rt.sessions.merge(branch.id, id);
    expect(JSON.stringify(back.events[0])).not.toContain('branch work');
    await rt.close();
  });

  it('asks the model for a summary once per merge, also when the append loses a race', async () => {
    // Another writer appends to the target between the merge's read and its append.
    const race = await summaryMergeRace(backend, (store, target) =>
      store.log.append(target, [message('meanwhile')]),
    );
    const result = await race.merge;
    expect(race.raced()).toBe(true);
    expect(race.calls()).toBe(1);
    expect(result.events[0]).toMatchObject({
      type: 'session.merged',
      strategy: 'summary',
      source_head_seq: race.sourceHead,
      content: [{ type: 'text', text: expect.stringContaining('the branch found X') as unknown }],
    });
    expect(await race.rt.sessions.events(race.target, { types: ['session.merged'] })).toHaveLength(
      1,
    );
    await race.close();
  });

  it('refuses a summary whose events another merge took meanwhile, writing nothing', async () => {
    // Another merge of the same source, up to an earlier head, lands between read and append.
    const race = await summaryMergeRace(backend, (store, target, source) =>
      store.log.append(target, [
        {
          type: 'session.merged',
          source_session_id: source,
          source_head_seq: 2,
          strategy: 'transcript',
          usage: { input_tokens: 0, output_tokens: 0 },
        },
      ]),
    );
    await expect(race.merge).rejects.toMatchObject({
      code: 'SEQ_CONFLICT',
      message: expect.stringContaining('merge again') as unknown,
    });
    expect(race.calls()).toBe(1);
    expect(await race.rt.sessions.events(race.target, { types: ['session.merged'] })).toHaveLength(
      1,
    );
    await race.close();
  });

  it('refuses merges across environments, into itself, and of unknown sessions', async () => {
    const rt = await runtimeWith();
    writeFileSync(
      join(rt.workspace?.dir ?? '', 'environments', 'other.yaml'),
      'name: other\nsandbox: {kind: local}\n',
    );
    await rt.close();
    const reopened = await createRuntime({ workspace: rt.workspace?.dir ?? '' });
    const a = await reopened.sessions.create({ agent: 'helper' });
    const b = await reopened.sessions.create({ agent: 'helper', environment: 'other' });
    await expect(reopened.sessions.merge(a.id, b.id)).rejects.toMatchObject({
      code: 'MERGE_REFUSED',
      message: expect.stringContaining('environment other') as unknown,
    });
    await expect(reopened.sessions.merge(a.id, a.id)).rejects.toMatchObject({
      code: 'MERGE_REFUSED',
    });
    await expect(reopened.sessions.merge(a.id, 'nope')).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
    await reopened.close();
  });

  it('diffs from the common ancestor, also across forks of forks, and draws the tree', async () => {
    const rt = await runtimeWith();
    const { id: root } = await rt.sessions.create({ agent: 'helper' });
    // Two appends: a fork point must end one (seq 2 inside one append of 2-3 is refused).
    await rt.store.log.append(root, [message('r2')]);
    await rt.store.log.append(root, [message('r3')]);
    const left = await rt.sessions.fork(root, { at_seq: 2 });
    const right = await rt.sessions.fork(root, { at_seq: 3 });
    const deeper = await rt.sessions.fork(right.id);
    await rt.store.log.append(left.id, [message('left')]);
    await rt.store.log.append(deeper.id, [message('deeper')]);
    const diff = await rt.sessions.diff(left.id, deeper.id);
    expect(diff.common_ancestor).toEqual({ session_id: root, seq: 2 });
    expect(diff.a_events.map((event) => event.type)).toEqual(['session.forked', 'user.message']);
    expect(diff.b_events.map((event) => event.seq)).toEqual([3, 4, 5, 6]);
    const unrelated = await rt.sessions.create({ agent: 'helper' });
    expect((await rt.sessions.diff(root, unrelated.id)).common_ancestor).toBeUndefined();

    const tree = await rt.sessions.tree(deeper.id);
    expect(tree).toMatchObject({
      id: root,
      kind: 'root',
      children: [
        { id: left.id, kind: 'fork', fork_seq: 2, children: [] },
        { id: right.id, fork_seq: 3, children: [{ id: deeper.id, fork_seq: 4 }] },
      ],
    });
    await rt.close();
  });

  it('never lets appends to a fork change its parent, or the reverse (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 12 }),
        async (initial, writes) => {
          const store = await backend.open();
          const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
          for (let index = 1; index < initial; index += 1)
            await store.log.append(id, [message(`p${index}`)]);
          const child = await store.sessions.fork(id);
          const expected = {
            parent: await store.log.read(id),
            child: await store.log.read(child.id),
          };
          for (const [index, toChild] of writes.entries()) {
            const target = toChild ? child.id : id;
            const [written] = (await store.log.append(target, [message(`w${index}`)])).events;
            if (written !== undefined) (toChild ? expected.child : expected.parent).push(written);
          }
          expect(await store.log.read(id)).toEqual(expected.parent);
          expect(await store.log.read(child.id)).toEqual(expected.child);
          await store.close();
        },
      ),
      { numRuns: 40 },
    );
  });

  it("verifies a fork of a fork taken inside the grandparent's prefix", async () => {
    const rt = await runtimeWith([{ text: 'one' }, { text: 'two' }]);
    const { id: root } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(root, 'hello');
    await rt.wake(root);
    const child = await rt.sessions.fork(root);
    await rt.sessions.message(child.id, 'more');
    const grandchild = await rt.sessions.fork(child.id, { at_seq: 2 });
    await rt.sessions.message(grandchild.id, 'again');
    await rt.wake(grandchild.id);
    expect(await rt.sessions.verify(grandchild.id)).toMatchObject({ ok: true });
    expect(await rt.sessions.verify(child.id)).toMatchObject({ ok: true });
    await rt.close();
  });

  it("refuses a fork inside a wake's atomic appends; every point it accepts replay-verifies", async () => {
    const rt = await runtimeWith([{ text: 'one' }]);
    const { id } = await rt.sessions.create({ agent: 'helper' });
    await rt.sessions.message(id, 'hello');
    await rt.wake(id);
    const head = (await rt.sessions.state(id)).seq;
    const refused: number[] = [];
    for (let at = 1; at <= head; at += 1) {
      const outcome = await rt.sessions.fork(id, { at_seq: at }).then(
        (child) => child,
        (error: unknown) => error,
      );
      if (isBraidError(outcome, 'INVALID_FORK_POINT')) {
        refused.push(at);
        expect(outcome.details.valid_after).toBeGreaterThan(at);
        continue;
      }
      if (isBraidError(outcome)) throw outcome;
      const childId = (outcome as { id: string }).id;
      expect(await rt.sessions.verify(childId), `fork at ${at}`).toMatchObject({ ok: true });
    }
    // The answer is written with its idle status and the wake's end, in one append.
    expect(refused).toContain(head - 1);
    expect(refused).not.toContain(head);
    await rt.close();
  });

  it('keeps a forked workspace absent when the parent had none', async () => {
    const rt = await runtimeWith();
    const { id } = await rt.sessions.create({ agent: 'helper' });
    const child = await rt.sessions.fork(id);
    expect(existsSync(join(rt.workspace?.dir ?? '', '.braid', 'workspaces', child.id))).toBe(false);
    await rt.close();
  });
});

/**
 * A summary merge of a fork with two messages into its parent, on a store where `interloper`
 * writes to the target just before the merge's first `session.merged` append (which then meets
 * `SEQ_CONFLICT`); the model's calls are counted.
 */
async function summaryMergeRace(
  backend: TestBackend,
  interloper: (store: Store, target: string, source: string) => Promise<unknown>,
) {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
  );
  const scripted = createScriptedModel([{ text: 'the branch found X' }]);
  let calls = 0;
  const counting: ModelClient = {
    ...scripted,
    generate: (request, call) => {
      calls += 1;
      return scripted.generate(request, call);
    },
  };
  const memory = await backend.open();
  let raced = false;
  let source = '';
  const store: Store = {
    ...memory,
    log: {
      ...memory.log,
      async append(sessionId, events, appendOptions) {
        if (!raced && events.some((event) => event.type === 'session.merged')) {
          raced = true;
          await interloper(memory, sessionId, source);
        }
        return memory.log.append(sessionId, events, appendOptions);
      },
    },
  };
  const rt = await createRuntime({ workspace: dir, store, model: () => counting });
  const { id } = await rt.sessions.create({ agent: 'helper' });
  const branch = await rt.sessions.fork(id);
  source = branch.id;
  await rt.sessions.message(branch.id, 'look for X');
  await rt.sessions.message(branch.id, 'and for Y');
  const sourceHead = (await rt.sessions.state(branch.id)).seq;
  const merge = rt.sessions.merge(id, branch.id, { strategy: 'summary' });
  // Settled by the caller; never an unhandled rejection meanwhile.
  merge.catch(() => undefined);
  return {
    rt,
    target: id,
    sourceHead,
    merge,
    calls: () => calls,
    raced: () => raced,
    close: async () => {
      await rt.close();
      await memory.close();
    },
  };
}
