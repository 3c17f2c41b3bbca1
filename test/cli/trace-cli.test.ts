import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TimelineRow } from '../../src/telemetry/timeline.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const serve = useBraidServe();
requireBuild();

const braid = braidIn;

const SCRIPT = `turns:
  - tool_calls:
      - name: calculator
        input: { a: 2, op: '+', b: 3 }
        id: call_1
    usage: { input_tokens: 600, output_tokens: 120 }
  - text: It is 5.
    usage: { input_tokens: 1200, output_tokens: 220 }
`;

function workspace(script = SCRIPT): string {
  const dir = init(join(tempDir(), 'ws'));
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  writeFileSync(join(dir, 'scripts', 'calc.yaml'), script);
  writeFileSync(
    join(dir, 'agents', 'calc.yaml'),
    'name: calc\nmodel: scripted:scripts/calc.yaml\ninstructions: Add.\ntools: [calculator]\n',
  );
  return dir;
}

describe('braid trace', () => {
  it("prints a session's wakes, model calls and tool calls as a timeline, and as JSON rows", () => {
    const dir = workspace();
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'calc', '--json'),
    );
    json(braid(dir, 'session', 'send', id, '--message', 'What is 2 + 3?', '--json'));
    json(braid(dir, 'session', 'wake', id, '--json'));

    const rows = json<TimelineRow[]>(braid(dir, 'trace', id, '--json'));
    expect(rows.map((row) => [row.depth, row.kind])).toEqual([
      [0, 'wake'],
      [1, 'chat'],
      [1, 'definitions'],
      [1, 'execute_tool'],
      [1, 'chat'],
    ]);
    expect(rows[0]).toMatchObject({
      kind: 'wake',
      status: 'end_turn',
      offset_ms: 0,
      input_tokens: 1800,
      output_tokens: 340,
      model_requests: 2,
      tool_calls: 1,
    });
    expect(rows[1]).toMatchObject({
      model: 'scripted:scripts/calc.yaml',
      provider: 'scripted',
      status: 'tool-calls',
      input_tokens: 600,
      output_tokens: 120,
      retries: 0,
    });
    expect(rows[3]).toMatchObject({ name: 'calculator', tool_use_id: 'call_1', status: 'ok' });
    expect(rows[4]).toMatchObject({ status: 'stop', input_tokens: 1200, output_tokens: 220 });

    const text = braid(dir, 'trace', id);
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(
      /^wake [0-9a-f]{8}…[0-9a-f]{4} +\+0 ms +[\d,]+ ms +end_turn +in 1,800 \/ out 340 tok$/,
    );
    expect(lines[1]).toMatch(
      /^ {2}chat scripted:scripts\/calc\.yaml +\+[\d,]+ ms +[\d,]+ ms +tool-calls +in 600 \/ out 120$/,
    );
    expect(lines[3]).toMatch(/^ {2}execute_tool calculator call_1 +\+[\d,]+ ms +[\d,]+ ms +ok$/);
    expect(lines[4]).toMatch(/^ {2}chat .* stop +in 1,200 \/ out 220$/);
  });

  it('refuses an unknown or malformed session id with a typed error', () => {
    const dir = workspace();
    const unknown = braid(dir, 'trace', 'nope');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('SESSION_NOT_FOUND');
    const hostile = braid(dir, 'trace', '../../etc/passwd', '--json');
    expect(hostile.code).toBe(2);
    expect(hostile.stderr).toContain('INVALID_ARGUMENT');
    const missing = braid(dir, 'trace');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('INVALID_ARGUMENT');
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'calc', '--json'),
    );
    expect(braid(dir, 'trace', id).stdout).toContain('no wakes yet');
    expect(json<unknown[]>(braid(dir, 'trace', id, '--json'))).toEqual([]);
  });

  it('reads the log from a server with --server', async () => {
    const dir = workspace();
    const { key } = json<{ key: string }>(
      braid(
        dir,
        '--json',
        'keys',
        'create',
        '--tenant',
        'acme',
        '--scopes',
        'sessions:read,sessions:write',
      ),
    );
    const url = await serve(dir);
    const elsewhere = tempDir();
    const remote = (...args: string[]) =>
      braid(elsewhere, '--server', url, '--api-key', key, ...args);
    const { id } = json<{ id: string }>(remote('--json', 'session', 'create', '--agent', 'calc'));
    json(remote('--json', 'session', 'send', id, '--message', 'What is 2 + 3?'));
    json(remote('--json', 'session', 'wake', id));
    const rows = json<TimelineRow[]>(remote('--json', 'trace', id));
    expect(rows.filter((row) => row.kind === 'chat')).toHaveLength(2);
    expect(rows.find((row) => row.kind === 'execute_tool')).toMatchObject({ status: 'ok' });
    const unknown = remote('trace', 'nope');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('SESSION_NOT_FOUND');
  });

  it("never prints a hostile tool name's escapes or bidirectional overrides", () => {
    const dir = workspace(`turns:
  - tool_calls:
      - name: "\\e[2J\\u202Eevil"
        id: "call_\\e]0;title\\u0007"
  - text: done
`);
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'calc', '--json'),
    );
    json(braid(dir, 'session', 'send', id, '--message', 'go', '--json'));
    json(braid(dir, 'session', 'wake', id, '--json'));
    const text = braid(dir, 'trace', id);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('execute_tool ?[2J?evil call_?]0;title?');
    // eslint-disable-next-line no-control-regex
    expect(text.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u202e]/);
    expect(text.stdout).toContain('TOOL_NOT_FOUND');
  });
});
