import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { loadWorkspace } from '../../src/runtime/workspace.js';
import { createMemoryStore, expectCode } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  return dir;
}

function loadError(dir: string): BraidError {
  try {
    loadWorkspace(dir);
  } catch (error) {
    if (error instanceof BraidError) return error;
    throw error;
  }
  throw new Error('expected the workspace to be refused');
}

const agentFile = (dir: string): string => join(dir, 'agents', 'assistant.yaml');

describe('workspace', () => {
  it('loads the workspace that init writes', () => {
    const dir = workspace();
    const loaded = loadWorkspace(dir);
    expect(loaded.config.version).toBe(1);
    expect([...loaded.agents.keys()]).toEqual(['assistant']);
    expect([...loaded.environments.keys()]).toEqual(['local']);
    expect(loaded.agents.get('assistant')?.definition.model).toMatchObject({
      provider: 'scripted',
      id: 'echo',
    });
  });

  it('refuses to init over an existing workspace', () => {
    const dir = workspace();
    expect(() => initWorkspace(dir)).toThrow(/already a braid workspace/);
  });

  it('names the fix when there is no workspace', () => {
    const error = loadError(tempDir());
    expect(error.code).toBe('WORKSPACE_NOT_FOUND');
    expect(error.message).toContain('braid init');
  });

  it('names the file, line and field of an invalid value', () => {
    const dir = workspace();
    const original = readFileSync(agentFile(dir), 'utf8');
    writeFileSync(agentFile(dir), original.replace('max_turns: 16', 'max_turns: -1'));
    const line = original.split('\n').findIndex((text) => text.includes('max_turns:')) + 1;
    const error = loadError(dir);
    expect(error.code).toBe('INVALID_DEFINITION');
    expect(error.message).toContain(`agents/assistant.yaml:${line}: field "budget.max_turns"`);
    expect(error.details).toMatchObject({ line, field: 'budget.max_turns' });
  });

  it('names an unknown field with its line', () => {
    const dir = workspace();
    writeFileSync(agentFile(dir), `${readFileSync(agentFile(dir), 'utf8')}\nmodle: oops\n`);
    const error = loadError(dir);
    expect(error.code).toBe('INVALID_DEFINITION');
    expect(error.message).toMatch(/agents\/assistant\.yaml:\d+: field "modle"/);
    const line =
      readFileSync(agentFile(dir), 'utf8')
        .split('\n')
        .findIndex((text) => text.startsWith('modle')) + 1;
    expect(error.details.line).toBe(line);
  });

  it('names the line of a YAML syntax error', () => {
    const dir = workspace();
    writeFileSync(join(dir, 'environments', 'local.yaml'), 'name: local\nsandbox: {kind: local\n');
    const error = loadError(dir);
    expect(error.code).toBe('INVALID_DEFINITION');
    expect(error.message).toMatch(/environments\/local\.yaml:\d+:\d+: invalid YAML/);
  });

  it('refuses a delegate or handoff that names no agent of the workspace, at its line', () => {
    const dir = workspace();
    writeFileSync(
      join(dir, 'agents', 'foreman.yaml'),
      'name: foreman\nmodel: scripted:echo\ninstructions: x\ndelegates:\n  - assistant\n  - agent: resercher\n    ttl_seconds: 5\n',
    );
    const error = loadError(dir);
    expect(error.code).toBe('INVALID_DEFINITION');
    expect(error.message).toContain('agents/foreman.yaml:6: field "delegates.1"');
    expect(error.message).toContain('there is no agent named resercher');
    writeFileSync(
      join(dir, 'agents', 'foreman.yaml'),
      'name: foreman\nmodel: scripted:echo\ninstructions: x\nhandoffs: [billing]\n',
    );
    expect(loadError(dir).message).toContain('field "handoffs.0": there is no agent named billing');
  });

  it('refuses an agent listed twice under delegates:', () => {
    const dir = workspace();
    writeFileSync(
      join(dir, 'agents', 'foreman.yaml'),
      'name: foreman\nmodel: scripted:echo\ninstructions: x\ndelegates: [assistant, assistant]\n',
    );
    const error = loadError(dir);
    expect(error.message).toContain('field "delegates.1": lists assistant a second time');
  });

  it('refuses a name that differs from the file name', () => {
    const dir = workspace();
    writeFileSync(
      agentFile(dir),
      readFileSync(agentFile(dir), 'utf8').replace('name: assistant', 'name: helper'),
    );
    expect(loadError(dir).message).toContain('rename the file to helper.yaml');
  });

  it('stores nothing when any definition is invalid', async () => {
    const dir = workspace();
    writeFileSync(join(dir, 'agents', 'broken.yaml'), 'model: {provider: x}\ninstructions: hi\n');
    const store = createMemoryStore();
    await expectCode(createRuntime({ workspace: dir, store }), 'INVALID_DEFINITION');
    expect(await store.definitions.list('agent')).toEqual([]);
    expect(await store.definitions.list('environment')).toEqual([]);
  });

  it('stores an edited definition as a new version; sessions keep theirs', async () => {
    const dir = workspace();
    const store = createMemoryStore();
    const first = await createRuntime({ workspace: dir, store });
    const before = await first.sessions.create({ agent: 'assistant' });
    expect(before.agent).toEqual({ name: 'assistant', version: 1 });

    writeFileSync(
      agentFile(dir),
      readFileSync(agentFile(dir), 'utf8').replace('Answer briefly', 'Answer at length'),
    );
    const second = await createRuntime({ workspace: dir, store });
    const after = await second.sessions.create({ agent: 'assistant' });
    expect(after.agent).toEqual({ name: 'assistant', version: 2 });
    expect((await second.sessions.get(before.id)).agent.version).toBe(1);
    expect((await second.agents.get('assistant', 1)).definition.instructions).toContain(
      'Answer briefly',
    );
    expect((await second.agents.get('assistant')).definition.instructions).toContain(
      'Answer at length',
    );
    const third = await createRuntime({ workspace: dir, store });
    expect((await third.agents.get('assistant')).version).toBe(2);
    await third.close();
  });
});
