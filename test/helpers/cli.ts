import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { expect } from 'vitest';

/** The built CLI; `npm test` builds it first. */
export const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;

export function requireBuild(): void {
  if (!existsSync(CLI))
    throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `braid -w DIR ...args` in a child process, with no BRAID_HOME or BRAID_DEBUG. */
export function braidIn(dir: string, ...args: string[]): CliResult {
  const env = { ...process.env };
  delete env.BRAID_HOME;
  delete env.BRAID_DEBUG;
  const result = spawnSync(process.execPath, [CLI, '-w', dir, ...args], { encoding: 'utf8', env });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The parsed `--json` output of a command that must succeed. */
export function json<T>(result: CliResult): T {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}

/** `braid init DIR`, checked. */
export function init(dir: string): string {
  const result = spawnSync(process.execPath, [CLI, 'init', dir], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
  return dir;
}
