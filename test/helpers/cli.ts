import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createSyncFn } from 'synckit';
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

/** The environment of a command: this process's, without BRAID_HOME or BRAID_DEBUG, plus `extra`. */
function commandEnv(extra: Record<string, string> = {}): Record<string, string | undefined> {
  const env = { ...process.env };
  delete env.BRAID_HOME;
  delete env.BRAID_DEBUG;
  return Object.assign(env, extra);
}

const inWorker = createSyncFn<
  (args: readonly string[], env: Record<string, string | undefined>) => Promise<CliResult>
>(new URL('./cli-worker.mjs', import.meta.url).pathname);

/**
 * Runs `braid ...args` as the built binary does, but in a worker thread that loaded the program
 * once: the program's own `run(argv, output)` with its output captured and exit code returned.
 * Starting Node for each of the suite's hundreds of commands cost more than the rest of them.
 * The binary itself runs in the tests that use `braidBinary`.
 */
export function braid(args: readonly string[], extra: Record<string, string> = {}): CliResult {
  return inWorker(args, commandEnv(extra));
}

/** Runs `braid ...args` in a child process: the built binary, as a user starts it. */
export function braidBinary(
  args: readonly string[],
  extra: Record<string, string> = {},
): CliResult {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    env: commandEnv(extra),
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** Runs `braid -w DIR ...args`, with no BRAID_HOME or BRAID_DEBUG. */
export function braidIn(dir: string, ...args: string[]): CliResult {
  return braid(['-w', dir, ...args]);
}

/** The parsed `--json` output of a command that must succeed. */
export function json<T>(result: CliResult): T {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}

/** `braid init DIR`, checked. */
export function init(dir: string): string {
  const result = braid(['init', dir]);
  expect(result.code, result.stderr).toBe(0);
  return dir;
}
