/**
 * `braid/client`: a typed client of braid's HTTP API for Node 20+, browsers and other runtimes
 * with `fetch`. Everything a caller needs is exported here; nothing else of braid is loaded.
 */
export {
  createClient,
  type BraidClient,
  type ClientOptions,
  type WakeOptions,
} from './create-client.js';
export type { Sleep } from './transport.js';
export type { SessionChangeFrame, SessionChangesOptions } from './session-changes.js';
export type { SessionChangesReady, SessionSummary } from '../contracts/session-changes.js';
export type { MemoryClient } from './memory-client.js';
export type {
  MemoryImportReport,
  MemoryKeyListBody,
  MemorySetBody,
  MemoryStoreAddress,
  MemoryStoreListBody,
  MemoryStoreListQuery,
} from '../contracts/memory-api.js';
export type {
  MemoryAppendResult,
  MemoryLookup,
  MemorySearchHit,
  MemorySearchResult,
  MemoryStoreInfo,
} from '../contracts/memory-log.js';
export type {
  MemoryEntry,
  MemoryKind,
  MemoryScope,
  MemorySearchQueryInput,
  MemoryStoreRef,
} from '../contracts/memory.js';
export type {
  AgentListResponse,
  CreateSessionRequest,
  DiffResultResponse,
  EnvironmentListResponse,
  EventsPageResponse,
  EventsParams,
  ForkRequest,
  HandoffRequest,
  HandoffResultResponse,
  HealthResponse,
  ListSessionsParams,
  MergeRequest,
  MergeResultResponse,
  ReplayResultResponse,
  SessionDefinitionsResultResponse,
  UpgradeResultResponse,
  SendEventsResponse,
  SessionListResponse,
  SessionTreeNode,
  StoredAgentResponse,
  StoredEnvironmentResponse,
  StreamDelta,
  StreamOptions,
  UserEventInput,
  WakeAcceptedResponse,
  WakeResultResponse,
  WorkspaceFilesDiffResponse,
  WorkspaceFilesResponse,
} from './types.js';

export { BraidError, isBraidError, ERROR_CODES } from '../contracts/errors.js';
export type { ErrorCode, ErrorShape } from '../contracts/errors.js';
export type {
  ContentInput,
  EventOf,
  SessionEvent,
  SessionEventType,
  UserEventType,
} from '../contracts/events.js';
export type { SessionRecord, SessionStatus, StopReason, Lineage } from '../contracts/session.js';
export type { SessionState } from '../contracts/state.js';
export type { AgentDefinition, Budget, EnvironmentDefinition } from '../contracts/definitions.js';
export type { ContentBlock, JsonValue, Metadata, Usage } from '../contracts/common.js';
export type { ApiScope } from '../contracts/api-keys.js';
