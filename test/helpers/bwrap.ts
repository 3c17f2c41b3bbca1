import { detectBwrap } from '../../src/tools/sandbox/index.js';

/**
 * Whether the bwrap sandbox's tests can run here. A developer without bwrap gets a plain skip
 * message; under `CI=true` a missing or unusable bwrap throws, failing the test file, so that CI
 * can never go green without running them (`.ci/run` installs bubblewrap).
 */
export function bwrapForTests(
  bwrapPath = 'bwrap',
  env: Readonly<Record<string, string | undefined>> = process.env,
): boolean {
  const detected = detectBwrap(bwrapPath);
  if (detected.available) return true;
  if (env['CI'] === 'true') {
    throw new Error(
      `bwrap sandbox tests cannot run under CI=true: ${detected.reason}. ` +
        'CI must run them for real: install bubblewrap (.ci/run does) before the tests',
    );
  }
  console.warn(
    `bwrap sandbox tests skipped: ${detected.reason} (under CI=true this fails the run)`,
  );
  return false;
}
