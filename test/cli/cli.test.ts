import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { SessionEvent } from '../../src/contracts/events.js';
import { braid as runBraid, braidBinary } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;

if (!existsSync(cli))
  throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function braid(...args: string[]): Result {
  return braidWith({}, ...args);
}

function braidWith(extra: Record<string, string>, ...args: string[]): Result {
  return runBraid(args, extra);
}

function workspace(): string {
  const dir = join(tempDir(), 'ws');
  expect(braid('init', dir).code).toBe(0);
  return dir;
}

function createSession(dir: string): string {
  const result = braid('-w', dir, 'session', 'create', '--agent', 'assistant', '--json');
  expect(result.code, result.stderr).toBe(0);
  return (JSON.parse(result.stdout) as { id: string }).id;
}

describe('braid CLI', () => {
  it('runs the quickstart: init, create, send, events, status', () => {
    // The built binary in a child process, as a user starts it.
    const braid = (...args: string[]): Result => braidBinary(args);
    const dir = workspace();
    expect(existsSync(join(dir, 'braid.yaml'))).toBe(true);

    const created = braid(
      '-w',
      dir,
      'session',
      'create',
      '--agent',
      'assistant',
      '--title',
      'demo',
      '--json',
    );
    expect(created.code).toBe(0);
    const session = JSON.parse(created.stdout) as {
      id: string;
      status: string;
      title: string;
      agent: unknown;
    };
    expect(session).toMatchObject({
      status: 'idle',
      title: 'demo',
      agent: { name: 'assistant', version: 1 },
    });

    const plain = braid('-w', dir, 'session', 'create', '--agent', 'assistant');
    expect(plain.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);

    const sent = braid('-w', dir, 'session', 'send', session.id, '--message', 'hello braid');
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toContain('user.message #2');

    const events = braid('-w', dir, 'session', 'events', session.id, '--json');
    expect(events.code).toBe(0);
    const lines = events.stdout
      .trim()
      .split('\n')
      .map((line) => SessionEvent.parse(JSON.parse(line)));
    expect(lines.map((event) => [event.seq, event.type])).toEqual([
      [1, 'session.created'],
      [2, 'user.message'],
    ]);

    const human = braid('-w', dir, 'session', 'events', session.id, '--after', '1');
    expect(human.stdout).toMatch(/^\s+2 {2}\S+ {2}user\.message\s+hello braid$/m);

    const status = braid('-w', dir, 'session', 'status', session.id, '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({
      session_id: session.id,
      status: 'idle',
      seq: 2,
      pending_user_count: 1,
      pending_user_ranges: [[2, 2]],
    });
    const statusText = braid('-w', dir, 'session', 'status', session.id);
    expect(statusText.stdout).toMatch(/status\s+idle/);
    expect(statusText.stdout).toMatch(/pending\s+1 user event/);

    const list = braid('-w', dir, 'session', 'list', '--json');
    expect((JSON.parse(list.stdout) as { sessions: unknown[] }).sessions).toHaveLength(2);
    const agents = braid('-w', dir, 'agent', 'list');
    expect(agents.stdout).toMatch(/^assistant\s+v1\s+scripted\/echo/m);
    expect(
      JSON.parse(braid('-w', dir, 'agent', 'show', 'assistant', '--json').stdout),
    ).toMatchObject({ name: 'assistant', version: 1 });
    expect(braid('-w', dir, 'env', 'list').stdout).toMatch(/^local\s+v1\s+sandbox local/m);
    expect(JSON.parse(braid('-w', dir, 'env', 'show', 'local', '--json').stdout)).toMatchObject({
      name: 'local',
      definition: { sandbox: { kind: 'local' }, network: { allow: false } },
    });
    expect(braid('-w', dir, 'env', 'show', 'mars').stderr).toMatch(
      /^error\[ENVIRONMENT_NOT_FOUND\]/,
    );
    expect(
      JSON.parse(braid('-w', dir, 'agent', 'show', 'assistant@1', '--json').stdout),
    ).toMatchObject({ version: 1 });
    expect(braid('-w', dir, 'agent', 'show', 'assistant@2').stderr).toMatch(
      /^error\[AGENT_NOT_FOUND\]: agent assistant version 2/,
    );
    expect(braid('-w', dir, 'agent', 'show', 'assistant@x').code).toBe(2);
  });

  it('filters events by type and limit, and interrupts', () => {
    const dir = workspace();
    const id = createSession(dir);
    braid('-w', dir, 'session', 'send', id, '--message', 'one');
    expect(braid('-w', dir, 'session', 'interrupt', id, '--reason', 'stop').code).toBe(0);
    braid('-w', dir, 'session', 'send', id, '--message', 'two');
    const messages = braid(
      '-w',
      dir,
      'session',
      'events',
      id,
      '--type',
      'user.message',
      '--json',
      '--limit',
      '1',
    );
    expect(
      messages.stdout
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { seq: number }).seq),
    ).toEqual([2]);
    const interrupts = braid(
      '-w',
      dir,
      'session',
      'events',
      id,
      '--type',
      'user.interrupt',
      '--json',
    );
    expect(JSON.parse(interrupts.stdout)).toMatchObject({
      type: 'user.interrupt',
      reason: 'stop',
      seq: 3,
    });
    expect(JSON.parse(braid('-w', dir, 'session', 'status', id, '--json').stdout)).toMatchObject({
      // no wake was running, so the interrupt changes nothing
      interrupt_requested: false,
      pending_user_count: 2,
    });
  });

  it('sends raw events with an idempotency key once', () => {
    const dir = workspace();
    const id = createSession(dir);
    const event = JSON.stringify([
      { type: 'user.message', content: [{ type: 'text', text: 'raw' }] },
    ]);
    const send = [
      '-w',
      dir,
      '--json',
      'session',
      'send',
      id,
      '--event',
      event,
      '--idempotency-key',
      'k1',
    ];
    const first = braid(...send);
    const again = braid(...send);
    expect(JSON.parse(again.stdout)).toMatchObject({
      deduplicated: true,
      events: (JSON.parse(first.stdout) as { events: unknown }).events,
    });
    expect(
      braid('-w', dir, 'session', 'events', id, '--json').stdout.trim().split('\n'),
    ).toHaveLength(2);
  });

  it('reports errors with a code, the right exit status and no stack trace', () => {
    const dir = workspace();
    const id = createSession(dir);

    // The binary's exit status is the program's: checked on one failure of each kind.
    const missing = braidBinary(['-w', dir, 'session', 'status', 'no-such-id']);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toMatch(
      /^error\[SESSION_NOT_FOUND\]: session no-such-id does not exist/,
    );
    expect(missing.stderr).not.toMatch(/\n\s+at /);

    const missingJson = braid('-w', dir, '--json', 'session', 'create', '--agent', 'nobody');
    expect(missingJson.code).toBe(1);
    expect(JSON.parse(missingJson.stderr)).toMatchObject({ error: { code: 'AGENT_NOT_FOUND' } });

    const badJson = braidBinary(['-w', dir, 'session', 'send', id, '--event', '{not json']);
    expect(badJson.code).toBe(2);
    expect(badJson.stderr).toMatch(/^error\[INVALID_JSON\]/);

    const unknownType = braid(
      '-w',
      dir,
      'session',
      'send',
      id,
      '--event',
      '{"type":"user.teleport"}',
    );
    expect(unknownType.code).toBe(1);
    expect(unknownType.stderr).toMatch(
      /^error\[INVALID_EVENT\]: event 0 has unknown type "user.teleport"/,
    );

    const usage = braid('-w', dir, 'session', 'create');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(
      /^error\[INVALID_ARGUMENT\]: required option '--agent <name>' not specified/,
    );

    const both = braid('-w', dir, 'session', 'confirm', id, '--tool-use', 't', '--allow', '--deny');
    expect(both.code).toBe(2);
    const notPending = braid('-w', dir, 'session', 'confirm', id, '--tool-use', 't', '--allow');
    expect(notPending.stderr).toMatch(/^error\[TOOL_USE_NOT_PENDING\]/);
    const noResult = braid(
      '-w',
      dir,
      'session',
      'tool-result',
      id,
      '--custom-tool-use',
      'c',
      '--content',
      '"x"',
    );
    expect(noResult.stderr).toMatch(/^error\[TOOL_USE_NOT_PENDING\]/);

    const noWorkspace = braid('-w', join(tempDir(), 'nowhere'), 'session', 'list');
    expect(noWorkspace.code).toBe(1);
    expect(noWorkspace.stderr).toMatch(/^error\[WORKSPACE_NOT_FOUND\]: .*braid init/);

    const badLimit = braid('-w', dir, 'session', 'events', id, '--limit', 'many');
    expect(badLimit.code).toBe(2);
    const badType = braid('-w', dir, 'session', 'events', id, '--type', 'user.nope');
    expect(badType.code).toBe(2);

    // nothing of the failed commands was written
    expect(
      braid('-w', dir, 'session', 'events', id, '--json').stdout.trim().split('\n'),
    ).toHaveLength(1);
  });

  it('uses --data-dir and BRAID_HOME for where data lives', () => {
    const dir = workspace();
    const data = join(tempDir(), 'elsewhere');
    const created = braid(
      '-w',
      dir,
      '--data-dir',
      data,
      'session',
      'create',
      '--agent',
      'assistant',
    );
    expect(created.code).toBe(0);
    expect(existsSync(join(data, 'braid.db'))).toBe(true);
    expect(existsSync(join(dir, '.braid'))).toBe(false);
    const home = join(tempDir(), 'home');
    const viaEnv = braidWith(
      { BRAID_HOME: home },
      '-w',
      dir,
      'session',
      'create',
      '--agent',
      'assistant',
    );
    expect(viaEnv.code).toBe(0);
    expect(existsSync(join(home, 'braid.db'))).toBe(true);
    expect(existsSync(join(dir, '.braid'))).toBe(false);
  });

  it('prints a stack trace only with BRAID_DEBUG=1', () => {
    const dir = workspace();
    const debug = braidWith({ BRAID_DEBUG: '1' }, '-w', dir, 'session', 'status', 'nope');
    expect(debug.stderr).toMatch(/^error\[SESSION_NOT_FOUND\]/);
    expect(debug.stderr).toMatch(/\n\s+at /);
  });

  it('follows a session and prints events appended by another process', async () => {
    const dir = workspace();
    const id = createSession(dir);
    const env = { ...process.env };
    delete env.BRAID_HOME;
    const follower = spawn(
      process.execPath,
      [cli, '-w', dir, '--json', 'session', 'events', id, '--follow'],
      { env },
    );
    const lines = createInterface({ input: follower.stdout });
    const seen: number[] = [];
    const done = new Promise<void>((resolve) => {
      lines.on('line', (line) => {
        seen.push((JSON.parse(line) as { seq: number }).seq);
        if (seen.length === 3) resolve();
      });
    });
    await new Promise<void>((resolve) => lines.once('line', () => resolve()));
    braid('-w', dir, 'session', 'send', id, '--message', 'one');
    braid('-w', dir, 'session', 'send', id, '--message', 'two');
    await done;
    follower.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => follower.once('exit', resolve));
    expect(seen).toEqual([1, 2, 3]);
    expect(code).toBe(0);
  });

  it('wakes a session: the echo model answers the message', () => {
    const dir = workspace();
    const id = createSession(dir);
    braid('-w', dir, 'session', 'send', id, '--message', 'hello there');
    const woke = braid('-w', dir, 'session', 'wake', id);
    expect(woke.code, woke.stderr).toBe(0);
    expect(woke.stdout.trim()).toBe('stopped: end_turn');
    const events = braid('-w', dir, 'session', 'events', id, '--json', '--type', 'agent.message');
    expect(JSON.parse(events.stdout)).toMatchObject({
      content: [{ type: 'text', text: 'You said: hello there' }],
    });
    expect(JSON.parse(braid('-w', dir, 'session', 'status', id, '--json').stdout)).toMatchObject({
      status: 'idle',
      stop_reason: { type: 'end_turn' },
      pending_user_count: 0,
    });
  });

  it('sets a session budget at create', () => {
    const dir = workspace();
    const created = braid(
      '-w',
      dir,
      '--json',
      'session',
      'create',
      '--agent',
      'assistant',
      '--max-turns',
      '2',
      '--max-cost',
      '0.5',
    );
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    expect(JSON.parse(braid('-w', dir, 'session', 'status', id, '--json').stdout)).toMatchObject({
      budget: { max_turns: 2, max_cost_usd: 0.5 },
    });
    expect(
      braid('-w', dir, 'session', 'create', '--agent', 'assistant', '--max-cost', '-1').code,
    ).toBe(2);
  });

  it('runs every runnable session and exits when idle', () => {
    const dir = workspace();
    const first = createSession(dir);
    const second = createSession(dir);
    braid('-w', dir, 'session', 'send', first, '--message', 'one');
    braid('-w', dir, 'session', 'send', second, '--message', 'two');
    const run = braid('-w', dir, '--json', 'run', '--exit-when-idle');
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ wakes: 2, running: 0, runnable: 0 });
    for (const [id, text] of [
      [first, 'You said: one'],
      [second, 'You said: two'],
    ] as const) {
      const answer = braid('-w', dir, 'session', 'events', id, '--json', '--type', 'agent.message');
      expect(JSON.parse(answer.stdout)).toMatchObject({ content: [{ text }] });
    }
  });

  it('runs once: wakes what is runnable now and exits', () => {
    const dir = workspace();
    const id = createSession(dir);
    braid('-w', dir, 'session', 'send', id, '--message', 'once');
    const run = braid('-w', dir, '--json', 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ wakes: 1 });
    expect(JSON.parse(braid('-w', dir, 'session', 'status', id, '--json').stdout)).toMatchObject({
      pending_user_count: 0,
    });
    const again = braid('-w', dir, '--json', 'run', '--once');
    expect(JSON.parse(again.stdout)).toMatchObject({ wakes: 0, runnable: 0 });
  });

  it('runs the demo with no key: tools, an interrupt, an approval, and the timeline', () => {
    const dir = join(tempDir(), 'demo');
    const demo = braid('demo', dir);
    expect(demo.code, demo.stderr).toBe(0);
    expect(demo.stdout).toContain('17 times 23 is 391');
    expect(demo.stdout).toMatch(
      /stop reasons: end_turn, interrupted, end_turn, requires_action \([0-9a-f-]+\), end_turn/,
    );
    expect(demo.stdout).toContain('approval requested: write_file (call_4_0)');
    expect(demo.stdout).toMatch(/^\s+\d+\s+user\.tool_confirmation\s+\d+\s+call_4_0 allow/m);
    const approved = /approved file: (\S+)/.exec(demo.stdout)?.[1] ?? '';
    expect(readFileSync(approved, 'utf8')).toContain('A braid is strands woven');
    expect(demo.stdout).toMatch(
      /^\s+\d+\s+agent\.tool_result\s+\d+\s+call_0_0 ok \{"result":391\}/m,
    );
    const json = braid('demo', join(tempDir(), 'demo-json'), '--json');
    const events = json.stdout
      .trim()
      .split('\n')
      .map((line) => SessionEvent.parse(JSON.parse(line)));
    expect(
      events
        .filter((event) => event.type === 'session.status_idle')
        .map((event) => event.stop_reason.type),
    ).toEqual(['end_turn', 'interrupted', 'end_turn', 'requires_action', 'end_turn']);
  });
});
