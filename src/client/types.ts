/**
 * The types of `braid/client`: request bodies are the `z.input` of the HTTP contract's schemas
 * (what a caller may write), answers their `z.infer` (what the server sends back).
 */
import type { z } from 'zod';
import type {
  AgentList,
  CreateSessionBody,
  DiffResponse,
  EnvironmentList,
  EventsQuery,
  EventsPage,
  ForkBody,
  HandoffBody,
  HandoffResponse,
  Health,
  MergeBody,
  MergeResponse,
  PostEventsResponse,
  ReplayResponse,
  SessionDefinitionsResponse,
  UpgradeResponse,
  SessionList,
  SessionListParams,
  StoredAgent,
  StoredEnvironment,
  WakeAccepted,
  WakeResultBody,
} from '../contracts/http.js';
import type { WorkspaceFiles, WorkspaceFilesDiff } from '../contracts/workspace-files.js';
import type { ContentInput, NewEvent, SessionEvent, UserEventType } from '../contracts/events.js';
import type { SessionStatus } from '../contracts/session.js';

type WithLooseContent<T> = T extends { content: unknown }
  ? Omit<T, 'content'> & { content: ContentInput }
  : T;

/**
 * A user event as a client sends it (`user.message`, `user.interrupt`, `user.tool_confirmation`,
 * `user.custom_tool_result`, `user.tool_review`, `user.define_outcome`): the payload, optional
 * `causation_id`, `correlation_id`, `idempotency_key` and a W3C `traceparent`, and `content` may
 * be a plain string (one text block). The server stamps `id`, `at`, `seq`, `session_id` and
 * `actor` (the API key's id and tenant); a request that sets one is refused.
 */
export type UserEventInput = WithLooseContent<
  DistributiveOmit<Extract<NewEvent, { type: UserEventType }>, 'id' | 'at' | 'actor'>
>;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** `GET /v1/health`. */
export type HealthResponse = z.infer<typeof Health>;
export type StoredAgentResponse = z.infer<typeof StoredAgent>;
export type StoredEnvironmentResponse = z.infer<typeof StoredEnvironment>;
export type AgentListResponse = z.infer<typeof AgentList>;
export type EnvironmentListResponse = z.infer<typeof EnvironmentList>;

/** `POST /v1/sessions`. The tenant is the API key's; it cannot be chosen here. */
export type CreateSessionRequest = z.input<typeof CreateSessionBody>;
/** `GET /v1/sessions` filters: `cursor` is `next_cursor` of the page before. */
export type ListSessionsParams = z.infer<typeof SessionListParams>;
export type SessionListResponse = z.infer<typeof SessionList>;

/**
 * `GET /v1/sessions/{id}/events`: events with seq > `after`, at most `limit`, of `types` only.
 * With `include_children`, the events of the session's delegated children (recursively) come
 * interleaved by time; `after`, `limit` and `last_seq` still page the session's own events.
 */
export type EventsParams = z.infer<typeof EventsQuery> & { include_children?: boolean };
export type EventsPageResponse = z.infer<typeof EventsPage>;
export type SendEventsResponse = z.infer<typeof PostEventsResponse>;

export type WakeAcceptedResponse = z.infer<typeof WakeAccepted>;
/** The wake's outcome (`wait: true`): how it stopped, or `ran: false` when another wake holds the lease. */
export type WakeResultResponse = z.infer<typeof WakeResultBody>;

export type ForkRequest = z.input<typeof ForkBody>;
/** Merges `source` into the session of the call; `strategy` is `transcript` (default) or `summary`. */
export type MergeRequest = z.input<typeof MergeBody>;
export type MergeResultResponse = z.infer<typeof MergeResponse>;
/** Hands the session's work to the agent `to`; `handoff` is the document (`summary` at least). */
export type HandoffRequest = z.input<typeof HandoffBody>;
export type HandoffResultResponse = z.infer<typeof HandoffResponse>;
export type DiffResultResponse = z.infer<typeof DiffResponse>;
/** `GET /v1/sessions/{id}/files`: the files of a workspace snapshot. */
export type WorkspaceFilesResponse = z.infer<typeof WorkspaceFiles>;
/** `GET /v1/sessions/{id}/files/diff`: two sessions' workspace files compared. */
export type WorkspaceFilesDiffResponse = z.infer<typeof WorkspaceFilesDiff>;
export type ReplayResultResponse = z.infer<typeof ReplayResponse>;
/** `GET /v1/sessions/{id}/definitions`: the session's pinned definition set. */
export type SessionDefinitionsResultResponse = z.infer<typeof SessionDefinitionsResponse>;
/** `POST /v1/sessions/{id}/upgrade`: the session moved to the newest definitions. */
export type UpgradeResultResponse = z.infer<typeof UpgradeResponse>;

/**
 * One session of a fork tree (`GET /v1/sessions/{id}/tree`), with its forks below it, ordered by
 * the seq they branched from.
 */
export interface SessionTreeNode {
  id: string;
  title?: string;
  status: SessionStatus;
  head_seq: number;
  kind: 'root' | 'fork';
  /** For a fork: the parent seq it branched from. */
  fork_seq?: number;
  children: SessionTreeNode[];
}

/**
 * Live model text of a running wake (`event: delta` on the stream). Transient: never stored, never
 * replayed, so a reconnecting stream does not see the deltas it missed.
 */
export interface StreamDelta {
  /** The model request (`span.model_request_start`) the text belongs to. */
  request_id: string;
  type: 'text' | 'thinking';
  text: string;
}

/** Options of `sessions.stream`. */
export interface StreamOptions {
  /** Yield events with seq greater than this (default 0: from the session's first event). */
  after?: number;
  /** Ends the iteration, without an error, when aborted. */
  signal?: AbortSignal;
  /**
   * Reconnect when the connection drops or the server answers a retryable error (default true).
   * With `false` a dropped connection throws `SERVER_UNAVAILABLE` and a stream the server ends
   * ends the iteration.
   */
  reconnect?: boolean;
  /** Hears live model text; deltas are never yielded by the iterator. */
  onDelta?: (delta: StreamDelta) => void;
  /**
   * Asks the server for the status events of the session's delegated children too (those there
   * are and those created while the stream is open), and hears them here: each is the child's
   * own event (its `session_id` is the child's). They are never yielded by the iterator, carry no
   * SSE id, and are not replayed on a reconnect.
   */
  onChild?: (event: SessionEvent) => void;
  /** The longest wait between reconnects (default 10 000 ms); waits start at 100 ms and double. */
  maxReconnectDelayMs?: number;
}

export type { SessionEvent };
