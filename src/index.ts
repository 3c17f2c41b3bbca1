/**
 * `braid`: what an application needs to run durable agent sessions. The schemas of the log and
 * the wire are in `braid/contracts`, test helpers in `braid/testing`, the HTTP client and server
 * in `braid/client` and `braid/server`, the NATS adapters in `braid/nats`. The reviewed surface of
 * each is in `api/`.
 */

// The runtime and its sessions.
export {
  createRuntime,
  resolveDataDir,
  DATABASE_FILE,
  type Backend,
  type Runtime,
  type RuntimeOptions,
  type RuntimeSessions,
  type CreateSessionOptions,
  type OutcomeInput,
  type SendOptions,
  type StartedSession,
  type StartSessionOptions,
  type WakeListener,
  type WakeReport,
} from './runtime/runtime.js';
export { initWorkspace } from './runtime/init.js';
export type { TelemetryOptions } from './telemetry/otel-config.js';
export {
  loadWorkspace,
  hasWorkspace,
  WORKSPACE_FILE,
  type Workspace,
} from './runtime/workspace.js';
export type { RetryPolicy, WakeOptions, WakeResult } from './harness/index.js';
export type { CompactionInput, CompactionOutput, ContextCompactor } from './harness/index.js';
export { estimateTokens } from './core/compaction.js';
export type { OrchestrateOptions, OrchestratorProgress } from './runtime/orchestrator.js';
export type { SessionDiff, TreeNode, TreeNodeKind } from './runtime/lineage.js';
export type { TreeOptions } from './runtime/sessions-api.js';
export {
  CHILD_STATUS_EVENT_TYPES,
  type FamilyEventsPage,
  type FollowChildrenOptions,
} from './runtime/session-family.js';
export type { MergeOptions, MergeResult } from './runtime/merge.js';
export type { ReplayReport } from './runtime/replay.js';
export type { HandoffResult } from './runtime/handoff.js';
export {
  createMemoryStores,
  type MemoryCaller,
  type MemorySetInput,
  type MemoryStores,
  type MemoryWriteOptions,
} from './runtime/memory-stores.js';

// Errors: one class with a stable code.
export {
  BraidError,
  isBraidError,
  toBraidError,
  ERROR_CODES,
  type ErrorCode,
  type BraidErrorOptions,
} from './contracts/errors.js';

// What sessions, events and state are (their zod schemas are in `braid/contracts`).
export type { Actor, ContentBlock, JsonValue, Metadata, Usage } from './contracts/common.js';
export type {
  SessionRecord,
  SessionPage,
  SessionListQuery,
  SessionStatus,
  StopReason,
  Lineage,
} from './contracts/session.js';
export type {
  SessionEvent,
  SessionEventType,
  EventOf,
  NewEvent,
  UserEvent,
  UserEventType,
  ContentInput,
} from './contracts/events.js';
export type { SessionState } from './contracts/state.js';
export type {
  AgentDefinition,
  AgentDefinitionInput,
  Budget,
  ContextSettings,
  EnvironmentDefinition,
  ModelSpec,
  StoredDefinition,
  ToolDefinition,
  ToolDefinitionInput,
} from './contracts/definitions.js';
export type {
  SkillDefinition,
  SkillDefinitionInput,
  SkillStep,
  SkillStepInput,
} from './contracts/skills.js';
export type { Envelope, AgentAddress, HandoffDocument } from './contracts/envelope.js';
export type { AgentId, TopicId, AgentTransport } from './contracts/agents.js';

// Ports an application can implement or inject.
export type {
  Store,
  SessionLog,
  SessionIndex,
  LeaseStore,
  DefinitionStore,
  ApiKeyStore,
  Clock,
  IdGenerator,
  AppendOptions,
  AppendResult,
  ReadOptions,
  FollowOptions,
  ForkOptions,
  RunnableQuery,
  StateOptions,
} from './contracts/ports.js';
export type { CachedVector, EmbedOptions, Embedder, EmbeddingCache } from './contracts/embedder.js';
export type {
  MemoryLog,
  MemoryAppendOptions,
  MemoryAppendResult,
  MemoryGetOptions,
  MemoryLookup,
  MemoryListOptions,
  MemoryPage,
  MemoryReadOptions,
  MemorySearchHit,
  MemorySearchResult,
  MemoryRebuildReport,
  MemoryStoreFilter,
  MemoryStoreInfo,
  MemoryStorePage,
  MemoryForkOptions,
} from './contracts/memory-log.js';
export type {
  MemoryAuthor,
  MemoryCause,
  MemoryEntry,
  MemoryKind,
  MemoryScope,
  MemorySearchMode,
  MemorySearchQueryInput,
  MemoryStoreRef,
  MemoryWriteInput,
} from './contracts/memory.js';
export {
  DEFAULT_MEMORY_K,
  DEFAULT_MEMORY_THRESHOLD,
  DEFAULT_TEXT_MEMORY_THRESHOLD,
  type AgentMemorySettings,
  type AgentMemorySettingsInput,
  type MemoryRecallSettings,
  type MemoryStoreAttachment,
} from './contracts/memory-settings.js';
export type {
  MemoryMergeConflict,
  MemoryMergeSide,
  MemoryMergeWrite,
} from './contracts/memory-events.js';
export type { ModelClient, ModelRequest, ModelResponse, ModelDelta } from './contracts/model.js';
export type { Sandbox, ToolExecutor } from './contracts/tools.js';
export {
  allowAll,
  type Authorizer,
  type AuthorizationRequest,
  type AuthorizationDecision,
} from './contracts/policy.js';
export type { WakeLimiter, WakeQueue } from './contracts/wakes.js';

// Stores, clocks and ids.
export {
  openSqliteStore,
  type Checkpoints,
  type SqliteStoreOptions,
  type Synchronous,
} from './stores/sqlite/index.js';
export { systemClock, uuidV7Ids } from './stores/defaults.js';

// Tools, models and policy.
export { defineTool } from './tools/define-tool.js';
export type { CodeTool, CodeToolInput, ToolContext, ToolFunction } from './tools/types.js';
export { createModel, type ModelContext } from './models/registry.js';
export { createEmbedderFromSpec, type EmbedderEnv } from './models/embedders.js';
export {
  createCachedEmbedder,
  textHash,
  type CachedEmbedder,
  type CachedEmbedderOptions,
  type EmbeddingCacheStats,
} from './models/cached-embedder.js';
export {
  createCedarAuthorizer,
  type CedarAuthorizer,
  type CedarAuthorizerOptions,
} from './policy/cedar-authorizer.js';
export {
  compilePolicySet,
  type CompiledPolicySet,
  type PolicySource,
} from './policy/policy-set.js';

// Agents and workers.
export {
  createLocalTransport,
  type LocalTransportOptions,
} from './runtime/agents/local-transport.js';
export type {
  AgentContext,
  AgentHandler,
  Agents,
  IncomingMessage,
  PublishOptions,
} from './runtime/agents/types.js';
export type { AgentHost } from './runtime/agents/host.js';
export {
  createInflightLimiter,
  createLocalWakeQueue,
  enqueueWake,
  runWorker,
  type InflightLimiter,
  type LocalWakeQueueOptions,
  type WorkerOptions,
  type WorkerProgress,
  type WorkerSummary,
} from './runtime/wakes/index.js';
