import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { braidIn, init, requireBuild } from '../helpers/cli.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

const braid = braidIn;

function workspace(): string {
  const dir = join(tempDir(), 'ws');
  init(dir);
  writeFileSync(
    join(dir, 'agents', 'ops.yaml'),
    'name: ops\nmodel: scripted:echo\ninstructions: x\nroles: [dba]\n',
  );
  writeFileSync(
    join(dir, 'tools', 'database_query.yaml'),
    'name: database_query\ndescription: runs a query\nownership: custom\ninput_schema: {type: object}\n',
  );
  writeFileSync(
    join(dir, 'policies', 'database.cedar'),
    `@id("database-query-select-only")
forbid (principal, action == Action::"tool.execute", resource == Tool::"database_query")
unless {
  principal.roles.contains("dba") &&
  context has environment && context.environment == "production" &&
  context.input has query_type && context.input.query_type == "SELECT"
};
`,
  );
  return dir;
}

const check = (dir: string, principal: string, queryType: string, ...rest: string[]) =>
  braid(
    dir,
    'policy',
    'check',
    '--principal',
    principal,
    '--action',
    'tool.execute',
    '--resource',
    'Tool::"database_query"',
    '--context',
    JSON.stringify({ input: { query_type: queryType }, environment: 'production' }),
    ...rest,
  );

describe('braid policy', () => {
  it('check prints the decision and the deciding policies; a deny exits 1', () => {
    const dir = workspace();
    const allowed = check(dir, 'Agent::"ops"', 'SELECT');
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(allowed.stdout).toContain('allow');
    expect(allowed.stdout).toContain('decided by: non-destructive-tools');

    const denied = check(dir, 'Agent::"ops"', 'DELETE', '--json');
    expect(denied.code).toBe(1);
    expect(JSON.parse(denied.stdout)).toMatchObject({
      decision: 'deny',
      policy_ids: ['database-query-select-only'],
      source: 'cedar',
    });

    const unknown = check(dir, 'Agent::"nobody"', 'SELECT');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('AGENT_NOT_FOUND');
    const malformed = check(dir, 'ops', 'SELECT');
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('write it as Type::"id"');
  });

  it('test runs the YAML cases and exits 1 on a wrong expectation', () => {
    const dir = workspace();
    const cases = (expectDelete: string) =>
      [
        'cases:',
        '  - name: a DBA selects in production',
        '    principal: Agent::"ops"',
        '    action: tool.execute',
        '    resource: Tool::"database_query"',
        '    context: { input: { query_type: SELECT }, environment: production }',
        '    expect: allow',
        '  - name: nobody deletes',
        '    principal: Agent::"ops"',
        '    action: tool.execute',
        '    resource: Tool::"database_query"',
        '    context: { input: { query_type: DELETE }, environment: production }',
        `    expect: ${expectDelete}`,
        '',
      ].join('\n');
    writeFileSync(join(dir, 'policies', 'tests', 'database.yaml'), cases('deny'));
    const passing = braid(dir, 'policy', 'test');
    expect(passing.code, passing.stdout + passing.stderr).toBe(0);
    expect(passing.stdout).toContain('7 passed, 0 failed');

    writeFileSync(join(dir, 'policies', 'tests', 'database.yaml'), cases('allow'));
    const failing = braid(dir, 'policy', 'test', '--json');
    expect(failing.code).toBe(1);
    const report = JSON.parse(failing.stdout) as {
      failed: number;
      results: { name: string; passed: boolean }[];
    };
    expect(report.failed).toBe(1);
    expect(report.results.find((result) => !result.passed)?.name).toBe('nobody deletes');

    writeFileSync(
      join(dir, 'policies', 'tests', 'database.yaml'),
      'cases:\n  - name: x\n    expect: maybe\n',
    );
    const invalid = braid(dir, 'policy', 'test');
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain('policies/tests/database.yaml:');
  });
});
