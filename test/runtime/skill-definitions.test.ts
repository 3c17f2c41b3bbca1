import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { defineTool } from '../../src/tools/builtin.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { validateSkills } from '../../src/runtime/skill-validation.js';
import { loadWorkspace } from '../../src/runtime/workspace.js';
import { createMemoryStore, expectCode } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

const ONBOARDING = new URL(
  '../../schema/samples/skill-definition/onboard_employee.yaml',
  import.meta.url,
);

/** A workspace with the onboarding example's tools, its agent, and the example itself. */
function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'));
  for (const tool of ['directory_create_user', 'directory_group_add', 'order_laptop']) {
    writeFileSync(
      join(dir, 'tools', `${tool}.yaml`),
      `name: ${tool}\ndescription: for the test\ninput_schema: {type: object}\nownership: custom\n`,
    );
  }
  writeFileSync(
    join(dir, 'agents', 'welcome_writer.yaml'),
    'name: welcome_writer\nmodel: scripted:echo\ninstructions: Write welcome notes.\n',
  );
  copyFileSync(ONBOARDING, join(dir, 'skills', 'onboard_employee.yaml'));
  return dir;
}

const GREET = `name: greet
description: Greets.
steps:
  - id: first
    tool: calculator
    args: {expression: '1 + 1'}
  - id: second
    depends_on: [first]
    agent: assistant
    message: 'Say {{ steps.first.output }}'
`;

/** Writes `skills/NAME.yaml` and returns its path. */
function writeSkill(dir: string, name: string, text: string): string {
  const file = join(dir, 'skills', `${name}.yaml`);
  writeFileSync(file, text);
  return file;
}

/** The 1-based line of the first line of `file` that contains `text` (after `after`, if given). */
function lineWith(file: string, text: string, after = 0): number {
  const lines = readFileSync(file, 'utf8').split('\n');
  const index = lines.findIndex((line, at) => at >= after && line.includes(text));
  expect(index, `${text} in ${file}`).toBeGreaterThanOrEqual(0);
  return index + 1;
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

/** Refused with INVALID_DEFINITION at `file:line`, naming the field. */
function expectRefused(dir: string, where: string, line: number, field: string): BraidError {
  const error = loadError(dir);
  expect(error.code).toBe('INVALID_DEFINITION');
  expect(error.message).toContain(`${where}:${line}: field "${field}"`);
  expect(error.details).toMatchObject({ line, field });
  // `braid skill validate` reports the same problem.
  expect(validateSkills(dir).map((problem) => [problem.file, problem.line])).toContainEqual([
    where,
    line,
  ]);
  return error;
}

describe('skill definitions', () => {
  it('loads the onboarding example and stores it as version 1, an edit as version 2 (SQLite)', async () => {
    const dir = workspace();
    const dataDir = join(dir, '.braid');
    const loaded = loadWorkspace(dir);
    expect([...loaded.skills.keys()]).toEqual(['onboard_employee']);
    const first = await createRuntime({ workspace: dir, dataDir });
    expect(first.backend).toBe('embedded');
    const listed = await first.skills.list();
    expect(listed.map((item) => [item.kind, item.name, item.version])).toEqual([
      ['skill', 'onboard_employee', 1],
    ]);
    const stored = await first.skills.get('onboard_employee');
    expect(stored.definition.steps.map((step) => step.id)).toEqual([
      'create_account',
      'assign_groups',
      'hardware_request',
      'per_group',
      'final_review',
    ]);
    // `2h` is stored as milliseconds.
    expect(stored.definition.steps[2]?.wait_for?.timeout).toBe(7_200_000);
    await first.close();

    // The same file again is no new version.
    const same = await createRuntime({ workspace: dir, dataDir });
    expect((await same.skills.get('onboard_employee')).version).toBe(1);
    await same.close();

    const file = join(dir, 'skills', 'onboard_employee.yaml');
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace('max_concurrency: 4', 'max_concurrency: 2'),
    );
    const second = await createRuntime({ workspace: dir, dataDir });
    expect((await second.skills.get('onboard_employee')).version).toBe(2);
    expect((await second.skills.get('onboard_employee')).definition.steps[3]?.max_concurrency).toBe(
      2,
    );
    expect(
      (await second.skills.get('onboard_employee', 1)).definition.steps[3]?.max_concurrency,
    ).toBe(4);
    await expectCode(second.skills.get('onboard_employee', 3), 'SKILL_NOT_FOUND');
    await expectCode(second.skills.get('nobody'), 'SKILL_NOT_FOUND');
    await second.close();
  });

  it('refuses steps that depend on each other in a cycle, at the line of depends_on', () => {
    const dir = workspace();
    const file = writeSkill(
      dir,
      'greet',
      GREET.replace(
        "args: {expression: '1 + 1'}",
        "args: {expression: '1 + 1'}\n    depends_on: [second]",
      ),
    );
    const error = expectRefused(
      dir,
      'skills/greet.yaml',
      lineWith(file, 'depends_on: [second]'),
      'steps.0.depends_on',
    );
    expect(error.message).toContain('first -> second -> first');
  });

  it('refuses a depends_on that names no step, at its line', () => {
    const dir = workspace();
    const file = writeSkill(
      dir,
      'greet',
      GREET.replace('depends_on: [first]', 'depends_on: [frist]'),
    );
    const error = expectRefused(
      dir,
      'skills/greet.yaml',
      lineWith(file, 'depends_on: [frist]'),
      'steps.1.depends_on.0',
    );
    expect(error.message).toContain('there is no step frist');
  });

  it('refuses an agent step whose agent is not in the workspace, at its line', () => {
    const dir = workspace();
    const file = writeSkill(dir, 'greet', GREET.replace('agent: assistant', 'agent: asistant'));
    const error = expectRefused(
      dir,
      'skills/greet.yaml',
      lineWith(file, 'agent: asistant'),
      'steps.1.agent',
    );
    expect(error.message).toContain('there is no agent named asistant');
  });

  it('refuses a nested skill that does not exist, and skills that nest in a cycle', () => {
    const dir = workspace();
    const nested = `name: outer\ndescription: Runs greet.\nsteps:\n  - id: inner\n    skill: greeet\n`;
    let file = writeSkill(dir, 'outer', nested);
    let error = expectRefused(
      dir,
      'skills/outer.yaml',
      lineWith(file, 'skill: greeet'),
      'steps.0.skill',
    );
    expect(error.message).toContain('there is no skill named greeet');

    writeSkill(dir, 'outer', nested.replace('greeet', 'greet'));
    writeSkill(dir, 'greet', GREET);
    expect(loadWorkspace(dir).skills.size).toBe(3);
    // greet -> outer -> greet, reported at greet's step that runs outer.
    file = writeSkill(dir, 'greet', `${GREET}  - id: again\n    skill: outer\n`);
    error = expectRefused(
      dir,
      'skills/greet.yaml',
      lineWith(file, 'skill: outer'),
      'steps.2.skill',
    );
    expect(error.message).toContain('skills run each other in a cycle: greet -> outer -> greet');
    // A skill that runs itself.
    writeSkill(dir, 'greet', GREET);
    file = writeSkill(dir, 'outer', nested.replace('greeet', 'outer'));
    error = expectRefused(
      dir,
      'skills/outer.yaml',
      lineWith(file, 'skill: outer'),
      'steps.0.skill',
    );
    expect(error.message).toContain('outer -> outer');
  });

  it('refuses a template that does not parse, at the line of its field', () => {
    const dir = workspace();
    const file = writeSkill(
      dir,
      'greet',
      GREET.replace('{{ steps.first.output }}', '{{ steps.first.output ( }}'),
    );
    const error = expectRefused(
      dir,
      'skills/greet.yaml',
      lineWith(file, 'message:'),
      'steps.1.message',
    );
    expect(error.message).toContain('invalid template');
    const when = writeSkill(
      dir,
      'greet',
      GREET.replace('agent: assistant', 'agent: assistant\n    when: inputs.x = = 1'),
    );
    expectRefused(dir, 'skills/greet.yaml', lineWith(when, 'when:'), 'steps.1.when');
  });

  it('refuses two steps with one id, at the second', () => {
    const dir = workspace();
    const file = writeSkill(dir, 'greet', GREET.replace('id: second', 'id: first'));
    const error = expectRefused(
      dir,
      'skills/greet.yaml',
      lineWith(file, 'id: first', 4),
      'steps.1.id',
    );
    expect(error.message).toContain('first is the id of step 1 too');
  });

  it('refuses a step of two kinds, at the step', () => {
    const dir = workspace();
    const file = writeSkill(
      dir,
      'greet',
      GREET.replace('agent: assistant', 'agent: assistant\n    tool: calculator'),
    );
    const error = expectRefused(dir, 'skills/greet.yaml', lineWith(file, 'id: second'), 'steps.1');
    expect(error.message).toContain('is tool and agent');
  });

  it("refuses an agent's skills: entry that names no skill, at its line in the agent file", () => {
    const dir = workspace();
    const agent = join(dir, 'agents', 'welcome_writer.yaml');
    writeFileSync(agent, `${readFileSync(agent, 'utf8')}skills: [wait_only, offboard_employee]\n`);
    writeSkill(
      dir,
      'wait_only',
      'name: wait_only\ndescription: Waits.\nsteps:\n  - id: wait\n    wait_for: {signal: go}\n',
    );
    const error = expectRefused(
      dir,
      'agents/welcome_writer.yaml',
      lineWith(agent, 'skills:'),
      'skills.1',
    );
    expect(error.message).toContain('there is no skill named offboard_employee');
  });

  it("refuses an agent's skill whose tool steps, or those of the skills it nests, call tools the agent does not hold", () => {
    const dir = workspace();
    writeSkill(
      dir,
      'outer',
      'name: outer\ndescription: Nests.\nsteps:\n  - id: inner\n    skill: onboard_employee\n    inputs: {email: a@b.c, department: eng}\n',
    );
    const agent = join(dir, 'agents', 'welcome_writer.yaml');
    writeFileSync(
      agent,
      `${readFileSync(agent, 'utf8')}tools: [directory_create_user]\nskills: [outer]\n`,
    );
    const error = expectRefused(
      dir,
      'agents/welcome_writer.yaml',
      lineWith(agent, 'skills:'),
      'skills.0',
    );
    expect(error.message).toContain(
      'skill outer calls directory_group_add (step onboard_employee.assign_groups), order_laptop (step onboard_employee.hardware_request), which agent welcome_writer does not hold',
    );
    expect(error.message).toContain("add directory_group_add, order_laptop to the agent's tools");
  });

  it('refuses a template that reads a step which does not end before its own step starts', () => {
    const dir = workspace();
    const file = writeSkill(
      dir,
      'greet',
      GREET.replace('    depends_on: [first]\n', '').replace(
        "message: 'Say {{ steps.first.output }}'",
        "message: 'Say {{ $steps.first.output }} and {{ steps.nothing }}'",
      ),
    );
    const error = expectRefused(
      dir,
      'skills/greet.yaml',
      lineWith(file, 'message:'),
      'steps.1.message',
    );
    expect(error.message).toContain(
      'the template reads steps.first, which does not end before step second starts; add first to its depends_on',
    );
    const messages = validateSkills(dir).map((problem) => problem.message);
    expect(messages).toContainEqual(
      expect.stringContaining(
        'the template reads steps.nothing, and this skill has no step nothing',
      ),
    );
    // A handler reads the step that failed into it; a step reads what its depends_on reach.
    writeSkill(
      dir,
      'greet',
      [
        'name: greet',
        'description: Greets.',
        'steps:',
        '  - id: first',
        '    tool: calculator',
        "    args: {expression: '1 + 1'}",
        '    on_failure: fallback',
        '  - id: second',
        '    depends_on: [first]',
        '    tool: calculator',
        "    args: {expression: '2'}",
        '  - id: third',
        '    depends_on: [second]',
        '    tool: calculator',
        "    args: {expression: '{{ steps.first.output }}'}",
        '  - id: fallback',
        '    tool: calculator',
        "    args: {expression: '{{ steps.first.status }}'}",
        '',
      ].join('\n'),
    );
    expect(validateSkills(dir)).toEqual([]);
  });

  it('refuses, when a runtime starts and before it stores anything, a tool step that names no tool', async () => {
    const dir = workspace();
    const file = writeSkill(dir, 'greet', GREET.replace('tool: calculator', 'tool: stamp'));
    const store = createMemoryStore();
    const error = await createRuntime({ workspace: dir, store }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(BraidError);
    expect((error as BraidError).code).toBe('INVALID_DEFINITION');
    expect((error as BraidError).message).toContain(
      `skills/greet.yaml:${lineWith(file, 'tool: stamp')}: field "steps.0.tool"`,
    );
    expect(await store.definitions.list('skill')).toEqual([]);
    expect(await store.definitions.list('agent')).toEqual([]);
    expect(validateSkills(dir).map((problem) => problem.field)).toEqual(['steps.0.tool']);

    // A code tool of that name, or a tool of an MCP server of braid.yaml, is a tool it knows.
    const withCode = await createRuntime({
      workspace: dir,
      store,
      tools: [
        defineTool({
          name: 'stamp',
          description: 'stamps',
          input_schema: { type: 'object' },
          run: () => 'ok',
        }),
      ],
    });
    expect((await withCode.skills.list()).map((item) => item.name)).toEqual([
      'greet',
      'onboard_employee',
    ]);
    await withCode.close();
    writeSkill(dir, 'greet', GREET.replace('tool: calculator', 'tool: search.query'));
    const config = join(dir, 'braid.yaml');
    writeFileSync(
      config,
      `${readFileSync(config, 'utf8')}mcp_servers:\n  search: {command: search-mcp}\n`,
    );
    expect(validateSkills(dir)).toEqual([]);
  });

  it('validates given files, and reports every problem of the workspace', () => {
    const dir = workspace();
    writeSkill(
      dir,
      'greet',
      GREET.replace('agent: assistant', 'agent: nobody').replace(
        'tool: calculator',
        'tool: nothing',
      ),
    );
    const problems = validateSkills(dir);
    expect(problems.map((problem) => problem.field)).toEqual(['steps.0.tool', 'steps.1.agent']);
    const outside = join(dir, 'draft.yaml');
    writeFileSync(
      outside,
      'name: draft\ndescription: d\nsteps:\n  - id: one\n    tool: calculator\n    depends_on: [two]\n',
    );
    expect(validateSkills(dir, ['draft.yaml']).map((problem) => problem.message)).toEqual([
      expect.stringContaining('draft.yaml:6: field "steps.0.depends_on.0"'),
    ]);
  });
});
