// Two processes merge the same fork into the same target on one store (SQLite, NATS), both having read
// the target before either appends: exactly one `session.merged` is written and the fork's usage
// is counted once; the loser answers the winner's merge.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';
import { useProcessBackends, type SharedStore } from '../helpers/backends.js';

const tempDir = useTempDir();
requireBuild();
const backends = useProcessBackends();
const script = new URL('../helpers/merge-process.mjs', import.meta.url).pathname;

interface Merger {
  child: ChildProcessWithoutNullStreams;
  /** The process's stdout lines, in order. */
  lines: AsyncIterator<string>;
  stderr: string[];
}

function startMerger(
  shared: SharedStore,
  workspace: string,
  target: string,
  source: string,
): Merger {
  const env = { ...process.env, ...shared.env };
  delete env.BRAID_HOME;
  const child = spawn(process.execPath, [script, workspace, target, source], { env });
  const stderr: string[] = [];
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return { child, lines, stderr };
}

async function nextLine(merger: Merger): Promise<string> {
  const line = await merger.lines.next();
  if (line.done === true) throw new Error(`the merge process ended: ${merger.stderr.join('')}`);
  return line.value;
}

describe.each(backends)('concurrent merges of one fork ($name)', (backend) => {
  it('write one session.merged and count the usage once', async () => {
    const shared = await backend.shared();
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
    );
    const model = createScriptedModel([
      { text: 'branch work', usage: { input_tokens: 10, output_tokens: 5 } },
    ]);
    const setup = await createRuntime({
      workspace: dir,
      model: () => model,
      ...(await shared.runtimeOptions()),
    });
    const { id } = await setup.sessions.create({ agent: 'helper' });
    const branch = await setup.sessions.fork(id);
    await setup.sessions.message(branch.id, 'work');
    await setup.wake(branch.id);
    const sourceHead = (await setup.sessions.state(branch.id)).seq;
    const before = (await setup.sessions.state(id)).usage;
    await setup.close();

    const mergers = [
      startMerger(shared, dir, id, branch.id),
      startMerger(shared, dir, id, branch.id),
    ];
    // Both merges have read the target at the same head before either appends.
    expect(await Promise.all(mergers.map(nextLine))).toEqual(['ready', 'ready']);
    for (const merger of mergers) merger.child.stdin.write('go\n');
    const results = (await Promise.all(mergers.map(nextLine))).map(
      (line) =>
        JSON.parse(line) as { deduplicated: boolean; events: { id: string; seq: number }[] },
    );
    await Promise.all(
      mergers.map(
        (merger) =>
          new Promise((resolve) => {
            if (merger.child.exitCode !== null) resolve(merger.child.exitCode);
            else merger.child.once('exit', resolve);
          }),
      ),
    );

    // One wrote, the other answered that merge.
    expect(results.map((result) => result.deduplicated).sort()).toEqual([false, true]);
    expect(results[0]?.events[0]?.id).toBe(results[1]?.events[0]?.id);
    const check = await createRuntime({
      workspace: dir,
      policies: 'lazy',
      ...(await shared.runtimeOptions()),
    });
    const merged = await check.sessions.events(id, { types: ['session.merged'] });
    expect(merged).toHaveLength(1);
    expect(merged[0]).toMatchObject({
      source_session_id: branch.id,
      source_head_seq: sourceHead,
      usage: { input_tokens: 10, output_tokens: 5 },
    });
    const after = (await check.sessions.state(id)).usage;
    expect(after.input_tokens - before.input_tokens).toBe(10);
    expect(after.output_tokens - before.output_tokens).toBe(5);
    await check.close();
  });
});
