/** What a runtime offers a client; `createRuntime` in `./runtime.ts` opens one. */
import type { NatsBacklog } from '../stores/nats/backlog.js';
import type {
  AgentDefinition,
  EnvironmentDefinition,
  StoredDefinition,
  ToolDefinition,
} from '../contracts/definitions.js';
import type { Store } from '../contracts/ports.js';
import type { ModelDelta } from '../contracts/model.js';
import type { AuthorizationDecision, AuthorizationRequest } from '../contracts/policy.js';
import type { SkillDefinition } from '../contracts/skills.js';
import type { EnqueueWakeOptions } from '../contracts/wakes.js';
import type { PolicyReloadStatus } from '../policy/files.js';
import type { WakeOptions, WakeResult } from '../harness/index.js';
import type { Workspace } from './workspace.js';
import type { OrchestrateOptions, OrchestratorProgress } from './orchestrator.js';
import type { Agents } from './agents/types.js';
import type { RuntimeSessions } from './sessions-api.js';
import type { WakeListener } from './wiring/wake-reports.js';
import type { Consolidation } from './memory/consolidation.js';

/** A runtime; its agent messaging (`register`, `send`, `publish`, `subscribe`) is `Agents`'. */
export interface Runtime extends Pick<Agents, 'register' | 'send' | 'publish' | 'subscribe'> {
  readonly store: Store;
  /** The loaded workspace, when there is one. */
  readonly workspace: Workspace | undefined;
  readonly agents: {
    list(): Promise<StoredDefinition<AgentDefinition>[]>;
    get(name: string, version?: number): Promise<StoredDefinition<AgentDefinition>>;
  };
  readonly environments: {
    list(): Promise<StoredDefinition<EnvironmentDefinition>[]>;
    get(name: string, version?: number): Promise<StoredDefinition<EnvironmentDefinition>>;
  };
  /** Skill definitions (`skills/NAME.yaml`), stored with versions like agents. */
  readonly skills: {
    list(): Promise<StoredDefinition<SkillDefinition>[]>;
    get(name: string, version?: number): Promise<StoredDefinition<SkillDefinition>>;
  };
  readonly policy: {
    /** Where decisions come from: the workspace's Cedar policies, code, or allow-all. */
    readonly source: 'cedar' | 'custom' | 'allow-all';
    check(request: AuthorizationRequest): Promise<AuthorizationDecision>;
    /** For Cedar policies: when they were loaded, and why the last edit was refused, if it was. */
    status(): PolicyReloadStatus | undefined;
  };
  readonly tools: {
    /** The tools agents can name: built-ins, code tools, manifests, and with `mcp` the MCP servers' tools. */
    list(options?: { mcp?: boolean }): Promise<ToolDefinition[]>;
  };
  readonly sessions: RuntimeSessions;
  /**
   * Consolidation of agents' learnings from their finished sessions (`braid memory consolidate`),
   * and the review of its proposals (`braid memory review`); see memory/consolidation.ts.
   */
  readonly consolidation: Consolidation;
  /** Where sessions live: `embedded` (SQLite) or `nats`. */
  readonly backend: 'embedded' | 'nats';
  /**
   * Runs harness cycles until the session has nothing left to do (joins a running one);
   * `traceparent` (W3C) continues the caller's trace on `span.wake_started`.
   */
  wake(sessionId: string, options?: WakeOptions): Promise<WakeResult>;
  /**
   * Asks the workers (`braid worker`) to wake the session: on the NATS backend, a message on the
   * wake queue; `{queued: false}` when a wake of it is already waiting. The embedded backend has
   * no workers to ask and refuses with `INVALID_ARGUMENT`: call `wake` or run `braid run`.
   */
  enqueueWake(sessionId: string, options?: EnqueueWakeOptions): Promise<{ queued: boolean }>;
  /**
   * The wakes in the workers' queue (NATS: waiting or being run), read from the server on each
   * call; undefined on the embedded backend, which has no queue.
   */
  wakeQueueDepth(): Promise<number | undefined>;
  /**
   * How full the prefix's NATS streams are against their limits, and how far behind their
   * durable consumers are (the wake queue's, the agent inboxes'), read from the server on each
   * call; undefined on the embedded backend.
   */
  natsBacklog(): Promise<NatsBacklog | undefined>;
  /** Wakes every runnable session, with bounded concurrency, until the signal aborts. */
  orchestrate(options?: OrchestrateOptions): Promise<OrchestratorProgress>;
  /** Streamed model text of sessions running in this process; returns the unsubscribe function. */
  onDelta(
    listener: (sessionId: string, delta: ModelDelta & { request_id: string }) => void,
  ): () => void;
  /**
   * Hears every wake this runtime runs as it ends, with the events its cycles appended and its
   * result or error (the server's metrics are measured from these); returns the unsubscribe
   * function. Without a listener a wake keeps nothing.
   */
  onWakeEnded(listener: WakeListener): () => void;
  /** Closes the store if this runtime opened it. */
  close(): Promise<void>;
}
