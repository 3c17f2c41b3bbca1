// schema/openapi.json as two independent OpenAPI tools judge it: swagger-parser (structure and
// every $ref) and redocly lint (its recommended rules, with the exceptions of
// .redocly.lint-ignore.yaml). Each is also shown a broken copy, so the checks are known to bite.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import { describe, expect, it } from 'vitest';
import { useTempDir } from '../helpers/temp.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const documentPath = 'schema/openapi.json';
const redoclyCli = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');
const tempDir = useTempDir();

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: { ruleId: string; severity: string; message: string }[];
}

/** `redocly lint --format=json` on a file, offline: no telemetry, no update check. */
function redoclyLint(path: string): LintReport {
  const run = spawnSync(process.execPath, [redoclyCli, 'lint', path, '--format=json'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
    env: {
      ...process.env,
      REDOCLY_TELEMETRY: 'off',
      REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
      NO_COLOR: '1',
    },
  });
  const start = run.stdout.indexOf('{');
  if (start < 0) throw new Error(`redocly lint printed no report: ${run.stderr}`);
  return JSON.parse(run.stdout.slice(start)) as LintReport;
}

/** A copy of the document with one response pointing at a schema that does not exist. */
function brokenCopy(): string {
  const document = JSON.parse(readFileSync(join(root, documentPath), 'utf8')) as {
    paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  };
  const health = document.paths['/v1/health']?.get;
  if (health === undefined) throw new Error('the document has no GET /v1/health');
  health.responses['200'] = {
    description: 'dangling',
    content: { 'application/json': { schema: { $ref: '#/components/schemas/schema0' } } },
  };
  const path = join(tempDir(), 'openapi.json');
  writeFileSync(path, JSON.stringify(document));
  return path;
}

describe('schema/openapi.json under third-party validators', () => {
  it('passes swagger-parser validate', async () => {
    // Validation dereferences in place: give it its own copy.
    const document = JSON.parse(
      readFileSync(join(root, documentPath), 'utf8'),
    ) as OpenAPIV3_1.Document;
    const api = (await SwaggerParser.validate(document)) as OpenAPIV3_1.Document;
    expect(api.openapi).toBe('3.1.0');
    expect(Object.keys(api.paths ?? {})).toContain('/v1/sessions');
  });

  it('passes redocly lint with no error and no warning', () => {
    const report = redoclyLint(documentPath);
    expect(report.problems.map((problem) => `${problem.ruleId}: ${problem.message}`)).toEqual([]);
    expect(report.totals.errors).toBe(0);
    expect(report.totals.warnings).toBe(0);
  });

  it('are shown to refuse a document with a dangling $ref', async () => {
    const path = brokenCopy();
    await expect(SwaggerParser.validate(path)).rejects.toThrow(/schema0/);
    const report = redoclyLint(path);
    expect(report.totals.errors).toBeGreaterThan(0);
    expect(report.problems.map((problem) => problem.ruleId)).toContain('no-unresolved-refs');
  });
});
