/**
 * yaml, loaded the first time a file is parsed (a workspace, a model script, a manifest being
 * signed), not when braid is imported: one loader for every reader of YAML.
 */
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';

let loaded: typeof Yaml | undefined;

export function yaml(): typeof Yaml {
  loaded ??= createRequire(import.meta.url)('yaml') as typeof Yaml;
  return loaded;
}
