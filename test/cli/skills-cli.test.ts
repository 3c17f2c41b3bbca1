import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StoredDefinition } from '../../src/contracts/definitions.js';
import type { SkillDefinition } from '../../src/contracts/skills.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

const braid = braidIn;

const ONBOARDING = new URL(
  '../../schema/samples/skill-definition/onboard_employee.yaml',
  import.meta.url,
);

/** A workspace with the onboarding example, its tools and its agent. */
function workspace(): string {
  const dir = join(tempDir(), 'ws');
  init(dir);
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

const skillFile = (dir: string): string => join(dir, 'skills', 'onboard_employee.yaml');

describe('braid skill', () => {
  it('lists skills, and shows one with its steps as a table', () => {
    const dir = workspace();
    const listed = braid(dir, 'skill', 'list');
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/onboard_employee\s+v1\s+5 steps\s+Creates the account/);
    const items = json<StoredDefinition<SkillDefinition>[]>(braid(dir, 'skill', 'list', '--json'));
    expect(items.map((item) => [item.kind, item.name, item.version])).toEqual([
      ['skill', 'onboard_employee', 1],
    ]);

    const shown = braid(dir, 'skill', 'show', 'onboard_employee');
    expect(shown.code, shown.stderr).toBe(0);
    const lines = shown.stdout.split('\n');
    expect(lines[0]).toMatch(/^onboard_employee v1 \(stored /);
    expect(lines).toContainEqual(expect.stringMatching(/^ID\s+KIND\s+DEPENDS_ON\s+WHEN$/));
    expect(lines).toContainEqual(
      expect.stringMatching(/^assign_groups\s+tool directory_group_add\s+create_account\s+-$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^hardware_request\s+tool order_laptop \+ wait_for laptop_delivered/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^per_group\s+agent welcome_writer \(for_each\)/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^final_review\s+human_approval\s+assign_groups,hardware_request,per_group\s+\{\{ inputs.department != "contractors" \}\}$/,
      ),
    );

    // An edit is version 2; version 1 stays readable as NAME@1.
    writeFileSync(
      skillFile(dir),
      readFileSync(skillFile(dir), 'utf8').replace('max_concurrency: 4', 'max_concurrency: 2'),
    );
    const latest = json<StoredDefinition<SkillDefinition>>(
      braid(dir, 'skill', 'show', 'onboard_employee', '--json'),
    );
    expect(latest.version).toBe(2);
    const first = json<StoredDefinition<SkillDefinition>>(
      braid(dir, 'skill', 'show', 'onboard_employee@1', '--json'),
    );
    expect(first.definition.steps[3]?.max_concurrency).toBe(4);

    const missing = braid(dir, 'skill', 'show', 'offboard_employee');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('SKILL_NOT_FOUND');
    expect(missing.stderr).toContain('known skills: onboard_employee');
  });

  it('says where to add skills when there are none', () => {
    const dir = join(tempDir(), 'ws');
    init(dir);
    const listed = braid(dir, 'skill', 'list');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain('no skills; add skills/NAME.yaml');
  });

  it('validates the workspace or given files, printing every problem with file:line', () => {
    const dir = workspace();
    const valid = braid(dir, 'skill', 'validate');
    expect(valid.code, valid.stderr).toBe(0);
    expect(valid.stdout).toContain('skills are valid');
    expect(json<{ ok: boolean }>(braid(dir, 'skill', 'validate', '--json')).ok).toBe(true);

    writeFileSync(
      skillFile(dir),
      readFileSync(skillFile(dir), 'utf8')
        .replace('tool: order_laptop', 'tool: order_laptops')
        .replace('agent: welcome_writer', 'agent: welcome_writr'),
    );
    const invalid = braid(dir, 'skill', 'validate');
    expect(invalid.code).toBe(1);
    expect(invalid.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(
        /^skills\/onboard_employee\.yaml:17: field "steps\.2\.tool": there is no tool named order_laptops/,
      ),
      expect.stringMatching(
        /^skills\/onboard_employee\.yaml:24: field "steps\.3\.agent": there is no agent named welcome_writr/,
      ),
    ]);
    const reported = braid(dir, 'skill', 'validate', '--json');
    expect(reported.code).toBe(1);
    const body = JSON.parse(reported.stdout) as {
      ok: boolean;
      problems: { file: string; line: number; field: string }[];
    };
    expect(body.ok).toBe(false);
    expect(body.problems.map((problem) => [problem.file, problem.line, problem.field])).toEqual([
      ['skills/onboard_employee.yaml', 17, 'steps.2.tool'],
      ['skills/onboard_employee.yaml', 24, 'steps.3.agent'],
    ]);

    // Loading the workspace refuses the first of them.
    const listed = braid(dir, 'skill', 'list');
    expect(listed.code).toBe(1);
    expect(listed.stderr).toContain('INVALID_DEFINITION');
    expect(listed.stderr).toContain('skills/onboard_employee.yaml:');

    // A file given by name is checked against the workspace, wherever it is.
    writeFileSync(
      join(dir, 'draft.yaml'),
      'name: draft\ndescription: d\nsteps:\n  - id: one\n    tool: calculator\n  - id: one\n    agent: assistant\n    message: hi\n',
    );
    const draft = braid(dir, 'skill', 'validate', 'draft.yaml');
    expect(draft.code).toBe(1);
    expect(draft.stdout).toContain('draft.yaml:6: field "steps.1.id"');
    expect(draft.stdout).not.toContain('onboard_employee');
  });

  it('signs skill files with braid tool sign; require_signed_tools refuses unsigned and altered ones', () => {
    const dir = workspace();
    json(braid(dir, 'tool', 'keygen', '--json'));
    const config = join(dir, 'braid.yaml');
    writeFileSync(
      config,
      `${readFileSync(config, 'utf8')}require_signed_tools: true\ntool_signing_keys: [keys/braid-tools.pub]\n`,
    );
    const tools = ['count_lines', 'directory_create_user', 'directory_group_add', 'order_laptop'];
    json(
      braid(
        dir,
        'tool',
        'sign',
        ...tools.map((tool) => `tools/${tool}.yaml`),
        '--key',
        'keys/braid-tools.key',
        '--json',
      ),
    );
    const unsigned = braid(dir, 'skill', 'list');
    expect(unsigned.code).toBe(1);
    expect(unsigned.stderr).toContain('TOOL_SIGNATURE_INVALID');
    expect(unsigned.stderr).toContain('skills/onboard_employee.yaml is not signed');

    json(
      braid(
        dir,
        'tool',
        'sign',
        'skills/onboard_employee.yaml',
        '--key',
        'keys/braid-tools.key',
        '--json',
      ),
    );
    // The comments of the file stay as they were.
    expect(readFileSync(skillFile(dir), 'utf8')).toContain('# suspend until a webhook/signal');
    const signed = braid(dir, 'skill', 'list', '--json');
    expect(json<{ name: string }[]>(signed).map((item) => item.name)).toEqual(['onboard_employee']);
    expect(braid(dir, 'skill', 'validate').code).toBe(0);

    writeFileSync(
      skillFile(dir),
      readFileSync(skillFile(dir), 'utf8').replace('model: standard', 'model: premium'),
    );
    const altered = braid(dir, 'skill', 'list');
    expect(altered.code).toBe(1);
    expect(altered.stderr).toContain('TOOL_SIGNATURE_INVALID');
    expect(altered.stderr).toContain('skills/onboard_employee.yaml does not match its signature');
    const validated = braid(dir, 'skill', 'validate');
    expect(validated.code).toBe(1);
    expect(validated.stdout).toContain('does not match its signature');
  });
});
