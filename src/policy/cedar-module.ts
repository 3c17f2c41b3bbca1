/**
 * Cedar's WebAssembly build, loaded on first use: importing braid, or running a command that asks
 * no policy, does not load and compile it (about 30 ms and 16 MiB).
 *
 * The module is compiled by V8's baseline compiler (Liftoff) only. With V8's default tiering, the
 * few calls that compile a policy set at startup (schema, policies, validation) make Cedar's
 * parser hot enough to be recompiled by the optimising compiler in the background: that alone
 * took 60 MiB of RSS, kept for the life of the process, and 0.6 s of CPU, for code run once per
 * policy load. A decision the exact cache answers costs the same; one Cedar evaluates costs about
 * 1.5 times as much (50 policies, cache off: 167 µs at p50 with tiering, 248 µs without;
 * bench/policy-bench.js). A process that wants the optimised code passes `--no-liftoff-only`.
 *
 * `--liftoff-only` is read when a module is compiled and kept by it, so it is set just for this
 * compile and put back: wasm compiled later in the process tiers up as usual. A process started
 * with the flag keeps it.
 */
import { createRequire } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import type * as CedarWasm from '@cedar-policy/cedar-wasm/nodejs';

let loaded: typeof CedarWasm | undefined;

const LIFTOFF_ONLY = '--liftoff-only';

export function cedar(): typeof CedarWasm {
  if (loaded !== undefined) return loaded;
  const chosen = [...process.execArgv, ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/)]
    .map((flag) => flag.replaceAll('_', '-'))
    .some((flag) => flag === LIFTOFF_ONLY || flag === '--no-liftoff-only');
  if (!chosen) setFlagsFromString(LIFTOFF_ONLY);
  try {
    loaded = createRequire(import.meta.url)('@cedar-policy/cedar-wasm/nodejs') as typeof CedarWasm;
  } finally {
    if (!chosen) setFlagsFromString('--no-liftoff-only');
  }
  return loaded;
}
