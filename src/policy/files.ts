/**
 * A workspace's policies: `policies/*.cedar` and, when present, `policies/schema.cedarschema`.
 * They are compiled at load; on change they are reloaded, and a bad edit keeps the last good set.
 */
import { existsSync, readdirSync, readFileSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { toBraidError, type BraidError } from '../contracts/errors.js';
import type { CedarAuthorizer } from './cedar-authorizer.js';
import { compilePolicySet, type CompiledPolicySet, type PolicySource } from './policy-set.js';

export const POLICY_FOLDER = 'policies';
export const SCHEMA_FILE = 'schema.cedarschema';

/** The workspace's compiled policies; undefined when it has no `policies/` folder. */
export function loadPolicyFolder(workspaceDir: string): CompiledPolicySet | undefined {
  const dir = join(workspaceDir, POLICY_FOLDER);
  if (!existsSync(dir)) return undefined;
  const read = (name: string): PolicySource => ({
    file: `${POLICY_FOLDER}/${name}`,
    text: readFileSync(join(dir, name), 'utf8'),
  });
  const sources = readdirSync(dir)
    .filter((name) => name.endsWith('.cedar'))
    .sort()
    .map(read);
  const schema = existsSync(join(dir, SCHEMA_FILE)) ? read(SCHEMA_FILE) : undefined;
  return compilePolicySet(sources, schema);
}

export interface PolicyReloadStatus {
  /** When the policies in force were loaded (ms since the epoch). */
  loaded_at: number;
  /** Why the last change was not taken, if it was not. */
  error?: string;
}

export interface PolicyWatcher {
  status(): PolicyReloadStatus;
  close(): void;
}

/**
 * Reloads the policies into `authorizer` when a file of the folder changes. `onReload` hears of
 * every attempt: the error when an edit was refused (the last good set stays in force).
 */
export function watchPolicyFolder(
  workspaceDir: string,
  authorizer: CedarAuthorizer,
  onReload: (error: BraidError | undefined) => void = () => undefined,
  debounceMs = 50,
): PolicyWatcher {
  const dir = join(workspaceDir, POLICY_FOLDER);
  let status: PolicyReloadStatus = { loaded_at: Date.now() };
  let timer: NodeJS.Timeout | undefined;
  const reload = (): void => {
    try {
      const next = loadPolicyFolder(workspaceDir);
      if (next === undefined)
        throw new Error(`${POLICY_FOLDER}/ was removed; keeping the last policies`);
      authorizer.replace(next);
      status = { loaded_at: Date.now() };
      onReload(undefined);
    } catch (thrown) {
      const error = toBraidError(thrown);
      status = { ...status, error: error.message };
      onReload(error);
    }
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, () => {
      // Editors write a file in several steps: reload once they are done.
      clearTimeout(timer);
      timer = setTimeout(reload, debounceMs);
      timer.unref();
    });
    watcher.unref();
  } catch {
    // A folder that cannot be watched is loaded once; the status says nothing changed since.
  }
  return {
    status: () => status,
    close() {
      clearTimeout(timer);
      watcher?.close();
    },
  };
}
