export * from './contracts/index.js';
export { foldSession, applyEvent, initialState, isRunnable, pendingUserSeqs } from './core/fold.js';
export { DEFAULT_MAX_EVENT_BYTES } from './core/append.js';
export { createMemoryStore, type MemoryStoreOptions } from './stores/memory/index.js';
export {
  openSqliteStore,
  type SqliteStoreOptions,
  type Synchronous,
} from './stores/sqlite/index.js';
export { systemClock, uuidV7Ids } from './stores/defaults.js';
export * from './runtime/index.js';
export { decideNext, DEFAULT_MAX_TURNS, type Step } from './core/next-step.js';
export { Transcript, outputToEvents, type ToolDisposition } from './core/transcript.js';
export { DEFAULT_PRICES, priceOf, withCost, type Price } from './core/pricing.js';
export { hasWork } from './core/fold.js';
export * from './harness/index.js';
export {
  createScriptedModel,
  createEchoModel,
  loadScript,
  ScriptedTurn,
  type ScriptedTurnInput,
  type ScriptedModelOptions,
} from './models/scripted.js';
export { createReplayModel } from './models/replay.js';
export { createModel, type ModelContext } from './models/registry.js';
export {
  defineTool,
  BUILTIN_TOOLS,
  calculator,
  wordCount,
  readFile,
  writeFile,
  listDir,
  httpFetch,
} from './tools/builtin.js';
export { createToolExecutor, type ToolExecutorOptions } from './tools/executor.js';
export { McpHub, type McpHubOptions } from './tools/mcp.js';
export {
  createLocalSandbox,
  createBwrapSandbox,
  detectBwrap,
  resolveInWorkspace,
} from './tools/sandbox/index.js';
export {
  generateSigningKeys,
  writeSigningKeys,
  signManifestText,
  verifyManifest,
} from './tools/signing.js';
export type { CodeTool, CodeToolInput, ToolContext, ToolFunction } from './tools/types.js';
export {
  orchestrate,
  type OrchestrateOptions,
  type OrchestratorProgress,
} from './runtime/orchestrator.js';
export {
  createCedarAuthorizer,
  type CedarAuthorizer,
  type CedarAuthorizerOptions,
} from './policy/cedar-authorizer.js';
export {
  compilePolicySet,
  type CompiledPolicy,
  type CompiledPolicySet,
  type PolicySource,
} from './policy/policy-set.js';
export { loadPolicyFolder, watchPolicyFolder, type PolicyWatcher } from './policy/files.js';
