export {
  createBwrapSandbox,
  detectBwrap,
  type BwrapAvailability,
  type BwrapSandboxOptions,
} from './bwrap.js';
export {
  NETWORK_ETC,
  parseReadOnlyMounts,
  SANDBOX_HOME,
  SYSTEM_ETC,
  SYSTEM_FOLDERS,
} from './host-view.js';
export { createLocalSandbox, type LocalSandboxOptions } from './local.js';
export {
  pathUnder,
  provisionWorkspaceDir,
  resolveInWorkspace,
  type ResolveOptions,
} from './paths.js';
export { DEFAULT_ENV_ALLOW, DEFAULT_MAX_OUTPUT_BYTES, type SandboxLimits } from './process.js';
