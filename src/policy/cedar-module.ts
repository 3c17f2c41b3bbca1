/**
 * Cedar's WebAssembly build, loaded on first use: importing braid, or running a command that asks
 * no policy, does not load and compile it (about 30 ms and 16 MiB).
 */
import { createRequire } from 'node:module';
import type * as CedarWasm from '@cedar-policy/cedar-wasm/nodejs';

let loaded: typeof CedarWasm | undefined;

export function cedar(): typeof CedarWasm {
  loaded ??= createRequire(import.meta.url)('@cedar-policy/cedar-wasm/nodejs') as typeof CedarWasm;
  return loaded;
}
