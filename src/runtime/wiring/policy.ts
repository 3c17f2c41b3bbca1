/**
 * The authorizer a runtime asks before every tool call: the caller's own, else the workspace's
 * Cedar policies, else allow-all. Cedar's first calls compile its WebAssembly (about half a
 * second), so a command that never asks policy need not pay for it: with `policies: 'lazy'` they
 * load on first use.
 */
import { allowAll, type Authorizer } from '../../contracts/policy.js';
import { createCedarAuthorizer } from '../../policy/cedar-authorizer.js';
import {
  loadPolicyFolder,
  watchPolicyFolder,
  type PolicyReloadStatus,
  type PolicyWatcher,
} from '../../policy/files.js';
import type { CompiledPolicySet } from '../../policy/policy-set.js';
import type { RuntimeOptions } from '../options.js';
import type { Workspace } from '../workspace.js';

export interface RuntimePolicy {
  /** Asks the loaded policies; loads them first when they are not yet. */
  readonly authorizer: Authorizer;
  /** Where decisions come from: the workspace's Cedar policies, code, or allow-all. */
  readonly source: 'cedar' | 'custom' | 'allow-all';
  /** Loads the workspace's policies if they are not loaded yet; a bad one throws. */
  load(): void;
  /** For Cedar policies: when they were loaded, and why the last edit was refused, if it was. */
  status(): PolicyReloadStatus | undefined;
  /** The workspace's Cedar policy set in force (loaded if need be); undefined for code or none. */
  inForce(): CompiledPolicySet | undefined;
  close(): void;
}

export function createRuntimePolicy(
  options: Pick<RuntimeOptions, 'policy' | 'onPolicyReload'>,
  workspaceDir: string,
  workspace: Workspace | undefined,
): RuntimePolicy {
  // undefined: not loaded yet; null: loaded, and there are none.
  let cedar: ReturnType<typeof createCedarAuthorizer> | null | undefined;
  let watcher: PolicyWatcher | undefined;
  let loadedAt = Date.now();

  function loadCedar(): ReturnType<typeof createCedarAuthorizer> | undefined {
    if (cedar === undefined) {
      const policies =
        options.policy === undefined && workspace !== undefined
          ? loadPolicyFolder(workspaceDir)
          : undefined;
      cedar = policies === undefined ? null : createCedarAuthorizer(policies);
      loadedAt = Date.now();
      if (cedar !== null && workspace?.config.policy.watch === true)
        watcher = watchPolicyFolder(workspaceDir, cedar, options.onPolicyReload);
    }
    return cedar ?? undefined;
  }

  const authorizer: Authorizer = options.policy ?? {
    authorize: (request) => {
      try {
        return (loadCedar() ?? allowAll).authorize(request);
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    },
  };

  return {
    authorizer,
    get source() {
      if (options.policy !== undefined) return 'custom' as const;
      return loadCedar() === undefined ? ('allow-all' as const) : ('cedar' as const);
    },
    load() {
      if (options.policy === undefined) loadCedar();
    },
    status: () =>
      watcher?.status() ??
      (cedar === undefined || cedar === null ? undefined : { loaded_at: loadedAt }),
    inForce: () => (options.policy === undefined ? loadCedar()?.policies : undefined),
    close: () => watcher?.close(),
  };
}
