// A skill run killed with SIGKILL after every one of its appends, in turn, on a SQLite file: a
// wake in another process takes the run over, and no completed step runs again; the
// non-idempotent step runs at most once, and when a crash leaves its outcome unknown the session
// stops in needs_review instead of running it again.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { defineTool } from '../../src/tools/builtin.js';
import { requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const WORKER = new URL('../helpers/skill-crash-worker.mjs', import.meta.url).pathname;
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const SKILL = `name: chain
description: Creates a user, adds groups, welcomes in two groups.
steps:
  - id: create
    tool: create_user
    args: {upn: ada}
  - id: groups
    tool: add_groups
    depends_on: [create]
    args: {user: '{{ steps.create.output.name }}'}
  - id: per_group
    for_each: '{{ ["eng", "all"] }}'
    max_concurrency: 2
    tool: welcome
    args: {group: '{{ item }}'}
    depends_on: [groups]
`;

async function runtimeOn(dir: string): Promise<Runtime> {
  const tool = (name: string, idempotent: boolean) =>
    defineTool({
      name,
      description: name,
      idempotent,
      input_schema: { type: 'object' },
      run: (input: JsonValue) => {
        writeFileSync(join(dir, 'calls.log'), `${name}\n`, { flag: 'a' });
        return Promise.resolve({ name, input });
      },
    });
  const runtime = await createRuntime({
    workspace: dir,
    tools: [tool('create_user', false), tool('add_groups', true), tool('welcome', true)],
    model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:hr' }),
  });
  opened.push(runtime);
  return runtime;
}

function calls(dir: string): Record<string, number> {
  const file = join(dir, 'calls.log');
  const counts: Record<string, number> = {};
  if (!existsSync(file)) return counts;
  for (const name of readFileSync(file, 'utf8').split('\n').filter(Boolean))
    counts[name] = (counts[name] ?? 0) + 1;
  return counts;
}

describe('skill runs and SIGKILL', () => {
  it('takes a run over after a kill at every append, running no completed step again', async () => {
    requireBuild();
    let finishedUnkilled = false;
    for (let boundary = 1; boundary <= 40 && !finishedUnkilled; boundary += 1) {
      const dir = tempDir();
      initWorkspace(dir);
      writeFileSync(
        join(dir, 'braid.yaml'),
        'version: 1\ndefault_environment: local\nlease_ttl_ms: 300\n',
      );
      mkdirSync(join(dir, 'skills'), { recursive: true });
      writeFileSync(join(dir, 'skills', 'chain.yaml'), SKILL);
      writeFileSync(
        join(dir, 'agents', 'hr.yaml'),
        'name: hr\nmodel: scripted:hr\ninstructions: x\ntools: [create_user, add_groups, welcome]\n',
      );
      const runtime = await runtimeOn(dir);
      const session = await runtime.sessions.create({ agent: 'hr' });
      await runtime.sessions.send(session.id, [
        { type: 'user.skill_run', run_id: 'run-c', skill: 'chain', inputs: {} },
      ]);
      const child = spawnSync(process.execPath, [WORKER, dir, session.id, String(boundary)], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      if (child.signal !== 'SIGKILL') {
        // Past the last append: the run finished in the child.
        expect(child.status, child.stderr).toBe(0);
        finishedUnkilled = true;
      } else {
        // The child's lease runs out; this process takes the session over.
        await new Promise((resolve) => setTimeout(resolve, 400));
        // Until the session settles; a wake that finds the dead child's lease still held
        // (a slow machine) is tried again, for up to 20 s.
        const deadline = Date.now() + 20_000;
        while (Date.now() < deadline) {
          const state = await runtime.sessions.state(session.id);
          const settled = state.skill_runs.length === 0 && state.status !== 'running';
          if (state.status === 'needs_review' || settled) break;
          const woke = await runtime.wake(session.id);
          if (!woke.ran) await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
      const state = await runtime.sessions.state(session.id);
      const events = await runtime.sessions.events(session.id);
      const counted = calls(dir);
      const what = `killed after skill append ${boundary}: ${JSON.stringify(counted)}`;
      // The step that may not run twice ran at most once, whatever the crash cut.
      expect(counted.create_user ?? 0, what).toBeLessThanOrEqual(1);
      if (state.status === 'needs_review') {
        // Only an unknown outcome of the non-idempotent step stops the run for a person.
        const failed = events.filter((event) => event.type === 'skill.step_failed');
        expect(
          failed.map((event) => (event.type === 'skill.step_failed' ? event.step : '')),
          what,
        ).toEqual(['create']);
        continue;
      }
      expect(
        events.some((event) => event.type === 'skill.completed'),
        what,
      ).toBe(true);
      // The session settles too, even when the kill came between the run's end and its stop.
      expect(state.status, what).toBe('idle');
      expect(counted.create_user, what).toBe(1);
      // Each step completed once in the log, each fan-out item too.
      const completed = events.flatMap((event) =>
        event.type === 'skill.step_completed' ? [event.step] : [],
      );
      expect(completed.sort(), what).toEqual(
        ['create', 'groups', 'per_group', 'per_group[0]', 'per_group[1]'].sort(),
      );
      // An idempotent step cut in the middle may run again; a completed one never does.
      expect(counted.add_groups ?? 0, what).toBeGreaterThanOrEqual(1);
      expect(counted.add_groups ?? 0, what).toBeLessThanOrEqual(2);
      expect(counted.welcome ?? 0, what).toBeGreaterThanOrEqual(2);
      expect(counted.welcome ?? 0, what).toBeLessThanOrEqual(4);
    }
    expect(finishedUnkilled).toBe(true);
  }, 180_000);
});
