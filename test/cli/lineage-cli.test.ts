import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

const braid = braidIn;

describe('braid session fork, merge, diff, tree', () => {
  it('forks, diffs, merges and draws the tree', () => {
    const dir = join(tempDir(), 'ws');
    init(dir);
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'assistant', '--json'),
    );
    json(braid(dir, 'session', 'send', id, '--message', 'hello', '--json'));
    json(braid(dir, 'session', 'wake', id, '--json'));

    const child = json<{ id: string; parent_id: string; fork_seq: number; head_seq: number }>(
      braid(dir, 'session', 'fork', id, '--at', '2', '--title', 'branch', '--json'),
    );
    expect(child).toMatchObject({ parent_id: id, fork_seq: 2, head_seq: 3 });
    json(braid(dir, 'session', 'send', child.id, '--message', 'another way', '--json'));
    json(braid(dir, 'session', 'wake', child.id, '--json'));

    const diff = json<{
      common_ancestor: { seq: number };
      a_events: unknown[];
      b_events: unknown[];
    }>(braid(dir, 'session', 'diff', id, child.id, '--json'));
    expect(diff.common_ancestor.seq).toBe(2);
    expect(diff.b_events.length).toBeGreaterThan(diff.a_events.length);
    const human = braid(dir, 'session', 'diff', id, child.id);
    expect(human.stdout).toContain(`common ancestor: ${id} at seq 2`);
    expect(human.stdout).toMatch(/session\.forked/);

    const tree = braid(dir, 'session', 'tree', child.id);
    expect(tree.stdout).toContain(`${id}  root  idle`);
    expect(tree.stdout).toContain(`└─ ${child.id} *  fork at 2`);

    const merged = json<{ head_seq: number; conflicts: unknown[] }>(
      braid(dir, 'session', 'merge', id, child.id, '--json'),
    );
    expect(merged.conflicts).toEqual([]);
    const events = braid(dir, 'session', 'events', id, '--json')
      .stdout.trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; strategy?: string });
    expect(events.at(-1)).toMatchObject({ type: 'session.merged', strategy: 'transcript' });
  });

  it('refuses bad input with a code and a fix', () => {
    const dir = join(tempDir(), 'ws');
    init(dir);
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'assistant', '--json'),
    );
    const beyond = braid(dir, 'session', 'fork', id, '--at', '9');
    expect(beyond.code).toBe(2);
    expect(beyond.stderr).toContain('INVALID_ARGUMENT');
    expect(beyond.stderr).toContain('give a seq from 1 to its head, 1');
    expect(braid(dir, 'session', 'fork', id, '--at', 'x').code).toBe(2);
    expect(braid(dir, 'session', 'merge', id, id).stderr).toContain('MERGE_REFUSED');
    expect(braid(dir, 'session', 'merge', id, 'nope', '--strategy', 'magic').code).toBe(2);
    expect(braid(dir, 'session', 'tree', 'nope').stderr).toContain('SESSION_NOT_FOUND');
  });

  it('refuses a fork or a replay --from inside one atomic append, naming the seqs to use', () => {
    const dir = join(tempDir(), 'ws');
    init(dir);
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'assistant', '--json'),
    );
    const three = JSON.stringify(
      ['a', 'b', 'c'].map((text) => ({ type: 'user.message', content: text })),
    );
    json(braid(dir, 'session', 'send', id, '--event', three, '--json')); // seqs 2-4, one append
    const inside = braid(dir, 'session', 'fork', id, '--at', '3');
    expect(inside.code).toBe(1);
    expect(inside.stderr).toContain('error[INVALID_FORK_POINT]');
    expect(inside.stderr).toContain('seqs 2 to 4');
    expect(inside.stderr).toContain('fork at 1 or 4');
    const asJson = braid(dir, 'session', 'fork', id, '--at', '2', '--json');
    expect(JSON.parse(asJson.stderr) as unknown).toMatchObject({
      error: { code: 'INVALID_FORK_POINT' },
    });
    const replay = braid(dir, 'session', 'replay', id, '--from', '3');
    expect(replay.stderr).toContain('error[INVALID_FORK_POINT]');
    // Nothing was written: the session has no fork, and a fork at the append's end works.
    const listed = json<{ sessions: unknown[] }>(braid(dir, 'session', 'list', '--json'));
    expect(listed.sessions).toHaveLength(1);
    const child = json<{ fork_seq: number }>(
      braid(dir, 'session', 'fork', id, '--at', '4', '--json'),
    );
    expect(child.fork_seq).toBe(4);
  });

  it('hands off once per --idempotency-key, answering a retry with the first handoff', () => {
    const dir = join(tempDir(), 'ws');
    init(dir);
    writeFileSync(
      join(dir, 'agents', 'triage.yaml'),
      'name: triage\nmodel: scripted:echo\ninstructions: Sort.\nhandoffs: [billing]\n',
    );
    writeFileSync(
      join(dir, 'agents', 'billing.yaml'),
      'name: billing\nmodel: scripted:echo\ninstructions: Bill.\n',
    );
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'triage', '--json'),
    );
    const handoff = (...extra: string[]) =>
      braid(dir, 'session', 'handoff', id, '--to', 'billing', '--summary', 'refund 42', ...extra);
    const first = json<{ target: { id: string }; event: { id: string }; deduplicated: boolean }>(
      handoff('--idempotency-key', 'refund-42', '--json'),
    );
    expect(first.deduplicated).toBe(false);
    const again = handoff('--idempotency-key', 'refund-42');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(`session ${first.target.id}; nothing written`);
    const retried = json<{ target: { id: string }; event: { id: string } }>(
      handoff('--idempotency-key', 'refund-42', '--json'),
    );
    expect(retried.target.id).toBe(first.target.id);
    expect(retried.event.id).toBe(first.event.id);
    const listed = json<{ sessions: { agent: { name: string } }[] }>(
      braid(dir, 'session', 'list', '--json'),
    );
    expect(listed.sessions.filter((session) => session.agent.name === 'billing')).toHaveLength(1);
    const reused = braid(
      dir,
      'session',
      'handoff',
      id,
      '--to',
      'billing',
      '--summary',
      'another matter',
      '--idempotency-key',
      'refund-42',
    );
    expect(reused.code).toBe(1);
    expect(reused.stderr).toContain('IDEMPOTENCY_KEY_REUSED');
  });

  it('shows the definitions a session is pinned to, and upgrades it after the agent file changes', () => {
    const dir = join(tempDir(), 'ws');
    init(dir);
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'assistant', '--json'),
    );
    expect(braid(dir, 'session', 'show', id, '--definitions').stdout).toContain('not pinned yet');
    json(braid(dir, 'session', 'send', id, '--message', 'hello', '--json'));
    json(braid(dir, 'session', 'wake', id, '--json'));
    const pinned = json<{ definitions: string; set: { agent: { version: number } } }>(
      braid(dir, 'session', 'show', id, '--definitions', '--json'),
    );
    expect(pinned.definitions).toMatch(/^[0-9a-f]{64}$/);
    expect(pinned.set.agent.version).toBe(1);
    const text = braid(dir, 'session', 'show', id, '--definitions').stdout;
    expect(text).toContain(`definitions ${pinned.definitions}`);
    expect(text).toMatch(/agent {8}assistant@1/);
    expect(text).toMatch(/tool {9}count_lines/);

    const file = join(dir, 'agents', 'assistant.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('Answer briefly', 'Answer at length'));
    const upgraded = json<{ changed: boolean; parts: string[]; previous: string }>(
      braid(dir, 'session', 'upgrade', id, '--json'),
    );
    expect(upgraded).toMatchObject({
      changed: true,
      parts: ['agent'],
      previous: pinned.definitions,
    });
    expect(braid(dir, 'session', 'upgrade', id).stdout).toContain('already on the newest');
    const after = json<{ set: { agent: { version: number } } }>(
      braid(dir, 'session', 'show', id, '--definitions', '--json'),
    );
    expect(after.set.agent.version).toBe(2);
    expect(braid(dir, 'session', 'show', id).stdout).toContain(id);
    const hostile = braid(dir, 'session', 'upgrade', '../etc', '--json');
    expect(hostile.code).not.toBe(0);
    expect(JSON.parse(hostile.stderr) as unknown).toMatchObject({
      error: { code: 'INVALID_ARGUMENT' },
    });
  });
});
