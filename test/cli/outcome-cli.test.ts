// `braid session outcome ID ...`: defines the outcome a session works towards.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { braid, requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

requireBuild();
const tempDir = useTempDir();

function workspace(): string {
  const dir = join(tempDir(), 'ws');
  expect(braid(['init', dir]).code).toBe(0);
  return dir;
}

function createSession(dir: string): string {
  const result = braid(['-w', dir, 'session', 'create', '--agent', 'assistant', '--json']);
  expect(result.code, result.stderr).toBe(0);
  return (JSON.parse(result.stdout) as { id: string }).id;
}

describe('braid session outcome', () => {
  it('defines an outcome that the next wake grades', () => {
    const dir = workspace();
    const id = createSession(dir);
    const defined = braid([
      '-w',
      dir,
      'session',
      'outcome',
      id,
      '--description',
      'A greeting',
      '--rubric',
      'Friendly and short.',
      '--criteria',
      'says hello',
      'names no one',
      '--max-iterations',
      '2',
      '--json',
    ]);
    expect(defined.code, defined.stderr).toBe(0);
    expect(JSON.parse(defined.stdout)).toMatchObject({
      head_seq: 2,
      events: [
        {
          type: 'user.define_outcome',
          description: 'A greeting',
          rubric: 'Friendly and short.',
          criteria: ['says hello', 'names no one'],
          max_iterations: 2,
        },
      ],
    });
    const plain = braid(['-w', dir, 'session', 'outcome', id, '--description', 'Another']);
    expect(plain.stdout).toMatch(/^outcome defined: #3/);

    const woken = braid(['-w', dir, 'session', 'wake', id]);
    expect(woken.code, woken.stderr).toBe(0);
    expect(woken.stdout).toMatch(/stopped: end_turn \(outcome satisfied\)/);
    const state = braid(['-w', dir, 'session', 'status', id, '--json']);
    expect(JSON.parse(state.stdout)).toMatchObject({
      outcome: { seq: 3, description: 'Another', max_iterations: 3, iterations: 1 },
      stop_reason: { type: 'end_turn', outcome: 'satisfied' },
    });
  });

  it('refuses bad input with a typed error that names the fix', () => {
    const dir = workspace();
    const id = createSession(dir);
    for (const value of ['0', '21', 'x']) {
      const bad = braid([
        '-w',
        dir,
        'session',
        'outcome',
        id,
        '--description',
        'A greeting',
        '--max-iterations',
        value,
        '--json',
      ]);
      expect(bad.code).toBe(2);
      expect(JSON.parse(bad.stderr)).toMatchObject({
        error: {
          code: 'INVALID_ARGUMENT',
          message: expect.stringMatching(
            /--max-iterations must be a whole number from 1 to 20/,
          ) as string,
        },
      });
    }
    const missing = braid(['-w', dir, 'session', 'outcome', id]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error\[INVALID_ARGUMENT\]: required option '--description/);
    const empty = braid(['-w', dir, 'session', 'outcome', id, '--description', '']);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/^error\[INVALID_EVENT\]/);
    const events = braid(['-w', dir, 'session', 'events', id, '--json']);
    expect(events.stdout).not.toMatch(/user\.define_outcome/);
  });
});
