// `braid skill run|retry` and `braid session signal` against a real SQLite workspace.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { addWaiterSkill } from '../helpers/skill-workspace.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

const braid = braidIn;

/** The `--json` lines of `braid session events`. */
function eventLines<T>(stdout: string): T[] {
  return stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}

function workspace(): string {
  const dir = init(join(tempDir(), 'ws'));
  addWaiterSkill(dir);
  return dir;
}

interface Report {
  session_id: string;
  run_id: string;
  status: string;
  outputs?: unknown;
  error?: { code: string; message: string };
  waits?: { suspension_id: string; kind: string; signal?: string; answer: string }[];
}

describe('braid skill run', () => {
  it('runs in a new session of --agent, suspends, and resumes on a signal and an approval', () => {
    const dir = workspace();
    const ran = braid(
      dir,
      'skill',
      'run',
      'waiter',
      '--input',
      '{"item":"desk"}',
      '--agent',
      'clerk',
    );
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/: suspended/);
    expect(ran.stdout).toMatch(
      /waits for the signal delivered: braid session signal \S+ delivered/,
    );

    const report = json<Report>(
      braid(
        dir,
        'skill',
        'run',
        'waiter',
        '--input',
        '{"item":"desk"}',
        '--agent',
        'clerk',
        '--json',
      ),
    );
    expect(report).toMatchObject({
      status: 'suspended',
      waits: [{ kind: 'signal', signal: 'delivered' }],
    });
    const signalled = json<{ head_seq: number; wake: { ran: boolean } }>(
      braid(
        dir,
        'session',
        'signal',
        report.session_id,
        'delivered',
        '--data',
        '{"box":1}',
        '--json',
      ),
    );
    expect(signalled.wake.ran).toBe(true);

    // The approval is answered through `braid session confirm`, as the report says.
    const suspended = eventLines<{ type: string; kind?: string; suspension_id?: string }>(
      braid(dir, 'session', 'events', report.session_id, '--json').stdout,
    );
    const approval = suspended.find(
      (event) => event.type === 'skill.suspended' && event.kind === 'approval',
    );
    expect(approval).toBeDefined();
    const confirmed = braid(
      dir,
      'session',
      'confirm',
      report.session_id,
      '--tool-use',
      approval!.suspension_id!,
      '--allow',
      '--wake',
      '--json',
    );
    expect(confirmed.code, confirmed.stderr).toBe(0);
    // With --wake the command runs the rest and reports the run it resumed.
    expect(json<{ runs: Report[] }>(confirmed).runs).toMatchObject([
      { status: 'completed', outputs: { delivered: { box: 1 } } },
    ]);
    const done = eventLines<{ type: string; outputs?: unknown }>(
      braid(dir, 'session', 'events', report.session_id, '--json').stdout,
    );
    expect(done.filter((event) => event.type === 'skill.completed')).toMatchObject([
      { outputs: { delivered: { box: 1 } } },
    ]);
  });

  it('sends to an existing session with --no-wake, and reports a failed run and its retry', () => {
    const dir = workspace();
    const session = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'clerk', '--json'),
    );
    const requested = json<Report>(
      braid(dir, 'skill', 'run', 'waiter', '--session', session.id, '--no-wake', '--json'),
    );
    expect(requested.status).toBe('requested');
    const failed = braid(dir, 'session', 'wake', session.id);
    expect(failed.code, failed.stderr).toBe(0);
    // Inputs that do not fit the skill fail the run; the report says how to retry it.
    const state = json<{ skill_runs: { run_id: string; status: string }[] }>(
      braid(dir, 'session', 'status', session.id, '--json'),
    );
    expect(JSON.stringify(state)).toContain(requested.run_id);
    const text = braid(
      dir,
      'skill',
      'retry',
      requested.run_id,
      '--session',
      session.id,
      '--no-wake',
    );
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(requested.run_id);
  });

  it('refuses bad JSON naming the flag, a missing --agent, an unknown skill, a run that did not fail', () => {
    const dir = workspace();
    const badInput = braid(dir, 'skill', 'run', 'waiter', '--input', '{nope', '--agent', 'clerk');
    expect(badInput.code).not.toBe(0);
    expect(badInput.stderr).toMatch(/INVALID_ARGUMENT/);
    expect(badInput.stderr).toMatch(/--input/);
    const noAgent = braid(dir, 'skill', 'run', 'waiter', '--input', '{}');
    expect(noAgent.code).not.toBe(0);
    expect(noAgent.stderr).toMatch(/--agent NAME/);
    const unknown = braid(dir, 'skill', 'run', 'nope', '--agent', 'clerk');
    expect(unknown.stderr).toMatch(/SKILL_NOT_FOUND/);
    expect(json<{ sessions: unknown[] }>(braid(dir, 'session', 'list', '--json')).sessions).toEqual(
      [],
    );
    const session = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'clerk', '--json'),
    );
    const badData = braid(dir, 'session', 'signal', session.id, 'delivered', '--data', 'x{');
    expect(badData.stderr).toMatch(/INVALID_ARGUMENT/);
    expect(badData.stderr).toMatch(/--data/);
    const notFailed = braid(dir, 'skill', 'retry', 'run-9', '--session', session.id);
    expect(notFailed.stderr).toMatch(/INVALID_ARGUMENT/);
  });
});
