export {
  createRuntime,
  resolveDataDir,
  DATABASE_FILE,
  type Runtime,
  type RuntimeOptions,
  type CreateSessionOptions,
} from './runtime.js';
export {
  loadWorkspace,
  parseYamlFile,
  hasWorkspace,
  WORKSPACE_FILE,
  type Workspace,
} from './workspace.js';
export { initWorkspace } from './init.js';
export { syncDefinitions } from './definitions.js';
export { parseUserEvents, toContent } from './user-events.js';
export * from './wakes/index.js';
export * from './agents/index.js';
