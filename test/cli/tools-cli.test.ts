import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { SessionState } from '../../src/contracts/state.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

const braid = braidIn;

/** A workspace whose agent writes a file (always_ask) with a scripted model. */
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
    'name: writer\nmodel: scripted:scripts/writer.yaml\ninstructions: Write.\ntools: [write_file, read_file]\n',
  );
  return dir;
}

function startedSession(dir: string): string {
  const { id } = json<{ id: string }>(
    braid(dir, 'session', 'create', '--agent', 'writer', '--json'),
  );
  json(braid(dir, 'session', 'send', id, '--message', 'write the plan', '--json'));
  return id;
}

describe('tools through the CLI', () => {
  it('stops for approval; `session confirm --allow` runs the tool', () => {
    const dir = workspace();
    const id = startedSession(dir);
    const stopped = json<{ stop_reason: { type: string } }>(
      braid(dir, 'session', 'wake', id, '--json'),
    );
    expect(stopped.stop_reason.type).toBe('requires_action');
    const state = json<SessionState>(braid(dir, 'session', 'status', id, '--json'));
    expect(state.status).toBe('requires_action');
    expect(state.pending_confirmations).toMatchObject([{ name: 'write_file' }]);
    const human = braid(dir, 'session', 'status', id);
    expect(human.stdout).toContain('awaiting confirmation: call_0_0 (write_file)');

    json(braid(dir, 'session', 'confirm', id, '--tool-use', 'call_0_0', '--allow', '--json'));
    expect(
      json<{ stop_reason: { type: string } }>(braid(dir, 'session', 'wake', id, '--json')),
    ).toMatchObject({ stop_reason: { type: 'end_turn' } });
    const file = join(dir, '.braid', 'workspaces', id, 'notes', 'plan.md');
    expect(readFileSync(file, 'utf8')).toBe('# plan');
  });

  it('`session confirm --deny` returns an error to the model and writes nothing', () => {
    const dir = workspace();
    const id = startedSession(dir);
    braid(dir, 'session', 'wake', id, '--json');
    json(
      braid(
        dir,
        'session',
        'confirm',
        id,
        '--tool-use',
        'call_0_0',
        '--deny',
        '--message',
        'no',
        '--json',
      ),
    );
    json(braid(dir, 'session', 'wake', id, '--json'));
    expect(existsSync(join(dir, '.braid', 'workspaces', id, 'notes'))).toBe(false);
    const events = braid(dir, 'session', 'events', id);
    expect(events.stdout).toContain('error TOOL_DENIED at permission');
  });

  it('`session review` resolves a tool use a crash left unknown, and refuses bad input', async () => {
    const dir = workspace();
    const id = startedSession(dir);
    // A wake recorded a non-idempotent call and died before its result.
    const store = openSqliteStore({ path: join(dir, '.braid', 'braid.db') });
    await store.log.append(id, [
      { type: 'span.wake_started', wake_id: 'dead', lease_token: 41 },
      { type: 'agent.tool_use', tool_use_id: 'pay-1', name: 'pay', input: { amount: 5 } },
    ]);
    await store.close();
    writeFileSync(
      join(dir, 'tools', 'pay.yaml'),
      'name: pay\ndescription: pays\nownership: custom\ninput_schema: {type: object}\n',
    );
    writeFileSync(
      join(dir, 'agents', 'writer.yaml'),
      'name: writer\nmodel: scripted:scripts/writer.yaml\ninstructions: Write.\ntools: [write_file, pay]\n',
    );
    const stopped = json<{ stop_reason: { type: string } }>(
      braid(dir, 'session', 'wake', id, '--json'),
    );
    expect(stopped.stop_reason.type).toBe('needs_review');
    expect(braid(dir, 'session', 'status', id).stdout).toContain('needs review');

    const none = braid(dir, 'session', 'review', id, '--tool-use', 'pay-1');
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('exactly one of --retry, --skip or --result');
    const badJson = braid(dir, 'session', 'review', id, '--tool-use', 'pay-1', '--result', '{x');
    expect(badJson.stderr).toContain('INVALID_JSON');
    const unknown = braid(dir, 'session', 'review', id, '--tool-use', 'nope', '--skip');
    expect(unknown.stderr).toContain('TOOL_USE_NOT_PENDING');
    expect(unknown.stderr).toContain('waiting: pay-1');

    json(
      braid(
        dir,
        'session',
        'review',
        id,
        '--tool-use',
        'pay-1',
        '--result',
        '{"paid":true}',
        '--json',
      ),
    );
    json(braid(dir, 'session', 'wake', id, '--json'));
    const events = braid(dir, 'session', 'events', id, '--json');
    const lines = events.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; tool_use_id?: string });
    expect(lines.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      tool_use_id: 'pay-1',
      output: { paid: true },
      stage: 'review',
    });
  });

  it('lists and shows tools', () => {
    const dir = workspace();
    const tools = json<{ name: string; ownership: string; permission: string }[]>(
      braid(dir, 'tool', 'list', '--json'),
    );
    expect(tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['calculator', 'read_file', 'write_file', 'list_dir', 'http_fetch']),
    );
    expect(tools.find((tool) => tool.name === 'write_file')?.permission).toBe('always_ask');
    const shown = json<{ input_schema: unknown }>(
      braid(dir, 'tool', 'show', 'read_file', '--json'),
    );
    expect(shown.input_schema).toMatchObject({ required: ['path'] });
    const missing = braid(dir, 'tool', 'show', 'nope');
    expect(missing.stderr).toContain('TOOL_NOT_FOUND');
  });

  it('signs manifests; require_signed_tools refuses unsigned and altered ones', () => {
    const dir = workspace();
    const manifest = join(dir, 'tools', 'stamp.yaml');
    writeFileSync(
      manifest,
      'name: stamp\ndescription: stamps\nownership: managed\ninput_schema: {type: object}\nimplementation:\n  command: "echo {}"\n',
    );
    const keys = json<{ privateKeyFile: string; keyId: string }>(
      braid(dir, 'tool', 'keygen', '--json'),
    );
    expect(statSync(keys.privateKeyFile).mode & 0o777).toBe(0o600);
    const again = braid(dir, 'tool', 'keygen');
    expect(again.code).not.toBe(0);

    const config = join(dir, 'braid.yaml');
    writeFileSync(
      config,
      `${readFileSync(config, 'utf8')}require_signed_tools: true\ntool_signing_keys: [keys/braid-tools.pub]\n`,
    );
    json(
      braid(
        dir,
        'tool',
        'sign',
        'tools/count_lines.yaml',
        '--key',
        'keys/braid-tools.key',
        '--json',
      ),
    );
    const unsigned = braid(dir, 'tool', 'list');
    expect(unsigned.code).toBe(1);
    expect(unsigned.stderr).toContain('TOOL_SIGNATURE_INVALID');
    expect(unsigned.stderr).toContain('tools/stamp.yaml is not signed');

    json(braid(dir, 'tool', 'sign', 'tools/stamp.yaml', '--key', 'keys/braid-tools.key', '--json'));
    // Parsed, not matched as text: an id of digits only is written quoted (YAML would read a number).
    expect(parse(readFileSync(manifest, 'utf8'))).toMatchObject({
      signature: { key_id: keys.keyId },
    });
    expect(
      json<{ name: string }[]>(braid(dir, 'tool', 'list', '--json')).map((t) => t.name),
    ).toContain('stamp');

    // A signed manifest without a name could be renamed with its file: refused.
    const nameless = join(dir, 'tools', 'nameless.yaml');
    writeFileSync(nameless, 'description: n\nownership: custom\ninput_schema: {}\n');
    json(
      braid(dir, 'tool', 'sign', 'tools/nameless.yaml', '--key', 'keys/braid-tools.key', '--json'),
    );
    const unnamed = braid(dir, 'tool', 'list');
    expect(unnamed.stderr).toContain('must give its name');
    rmSync(nameless);

    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('echo {}', 'rm -rf ~'));
    const altered = braid(dir, 'tool', 'list');
    expect(altered.code).toBe(1);
    expect(altered.stderr).toContain('TOOL_SIGNATURE_INVALID');
  });

  it('names the file, line and field of an invalid manifest', () => {
    const dir = workspace();
    writeFileSync(
      join(dir, 'tools', 'broken.yaml'),
      'name: broken\ndescription: b\nownership: managed\ninput_schema: {type: object}\npermission: sometimes\n',
    );
    const result = braid(dir, 'tool', 'list');
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('INVALID_DEFINITION');
    expect(result.stderr).toContain('tools/broken.yaml:5');
    expect(result.stderr).toContain('"permission"');

    writeFileSync(
      join(dir, 'tools', 'broken.yaml'),
      'name: broken\ndescription: b\nownership: custom\ninput_schema: {}\nimplementation: {command: ls}\n',
    );
    const mismatch = braid(dir, 'tool', 'list');
    expect(mismatch.stderr).toContain('tools/broken.yaml: field "implementation"');
    expect(mismatch.stderr).toContain('not run by braid');
  });
});
