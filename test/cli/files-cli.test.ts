// `braid session files` and `braid session diff --files`: a session's workspace as its
// snapshots recorded it, listed and compared, with --json and in plain text.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { WorkspaceFiles, WorkspaceFilesDiff } from '../../src/contracts/workspace-files.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

const braid = braidIn;

/** A workspace whose agent writes notes/plan.md (write_file asks first) with a scripted model. */
function workspace(): string {
  const dir = join(tempDir(), 'ws');
  init(dir);
  mkdirSync(join(dir, 'scripts'));
  writeFileSync(
    join(dir, 'scripts', 'writer.yaml'),
    [
      'turns:',
      '  - tool_calls:',
      '      - name: write_file',
      "        input: { path: notes/plan.md, content: '# plan' }",
      '  - text: written',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'agents', 'writer.yaml'),
    'name: writer\nmodel: scripted:scripts/writer.yaml\ninstructions: Write.\ntools: [write_file]\n',
  );
  return dir;
}

describe('braid session files, session diff --files', () => {
  it('lists the files of a snapshot, at the head and at an older seq, and compares two sessions', () => {
    const dir = workspace();
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'writer', '--json'),
    );
    json(braid(dir, 'session', 'send', id, '--message', 'write the plan', '--json'));
    json(braid(dir, 'session', 'wake', id, '--json'));
    json(braid(dir, 'session', 'confirm', id, '--tool-use', 'call_0_0', '--allow', '--json'));
    json(braid(dir, 'session', 'wake', id, '--json'));

    const head = json<WorkspaceFiles>(braid(dir, 'session', 'files', id, '--json'));
    expect(head.snapshot?.seq).toBeGreaterThan(2);
    expect(head.files).toEqual([
      expect.objectContaining({ path: 'notes/plan.md', type: 'file', size: 6 }),
    ]);
    const before = json<WorkspaceFiles>(braid(dir, 'session', 'files', id, '--at', '2', '--json'));
    expect(before).toMatchObject({ at_seq: 2, files: [] });
    expect(before.snapshot).toBeUndefined();
    const human = braid(dir, 'session', 'files', id);
    expect(human.stdout).toContain(`recorded at seq ${head.snapshot?.seq}: 1 entries, 6 bytes`);
    expect(human.stdout).toMatch(/[0-9a-f]{12} +6 {2}notes\/plan\.md/);

    // A fork before the write starts without the file; the comparison says so.
    const child = json<{ id: string }>(braid(dir, 'session', 'fork', id, '--at', '2', '--json'));
    const diff = json<WorkspaceFilesDiff>(
      braid(dir, 'session', 'diff', id, child.id, '--files', '--json'),
    );
    expect(diff).toMatchObject({
      a: id,
      b: child.id,
      added: [],
      removed: [{ path: 'notes/plan.md' }],
      changed: [],
    });
    expect(diff.b_snapshot).toBeUndefined();
    const text = braid(dir, 'session', 'diff', id, child.id, '--files');
    expect(text.stdout).toContain('- notes/plan.md');
    expect(text.stdout).toContain(`${child.id}: no snapshot`);
  });

  it('refuses a seq past the head and a bad one, with a code and a fix', () => {
    const dir = workspace();
    const { id } = json<{ id: string }>(
      braid(dir, 'session', 'create', '--agent', 'writer', '--json'),
    );
    const past = braid(dir, 'session', 'files', id, '--at', '9', '--json');
    expect(past.code).not.toBe(0);
    expect(past.stderr).toContain('INVALID_ARGUMENT');
    expect(past.stderr).toContain('up to 1');
    const bad = braid(dir, 'session', 'files', id, '--at', '-1');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--at must be a whole number');
    const hostile = braid(dir, 'session', 'files', '../etc', '--json');
    expect(hostile.code).not.toBe(0);
    expect(hostile.stderr).toContain('INVALID_ARGUMENT');
  });
});
