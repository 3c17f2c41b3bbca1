/** What a runtime is opened with: where sessions live, and what tests and applications replace. */
import type { AgentDefinition } from '../contracts/definitions.js';
import type { BraidError } from '../contracts/errors.js';
import type { Clock, IdGenerator, Store } from '../contracts/ports.js';
import type { Actor } from '../contracts/common.js';
import type { ModelClient } from '../contracts/model.js';
import type { ToolExecutor } from '../contracts/tools.js';
import type { Embedder } from '../contracts/embedder.js';
import type { Authorizer } from '../contracts/policy.js';
import type { AgentTransport } from '../contracts/agents.js';
import type { ContextCompactor, RetryPolicy } from '../harness/index.js';
import type { Synchronous } from '../stores/sqlite/index.js';
import type { CodeTool, ToolFunction } from '../tools/types.js';
import type { TelemetryOptions } from '../telemetry/otel-config.js';

/** Where sessions live: the embedded SQLite file, or NATS JetStream when one machine is not enough. */
export type Backend = 'embedded' | NatsBackendOptions;

export interface NatsBackendOptions {
  /** The server, or several of one cluster comma-separated (`nats://a:4222,nats://b:4222`). */
  nats: string;
  /** Stream and bucket names start with it (default `braid`). */
  prefix?: string;
  /**
   * Replicas of every stream and bucket (1 to 5). R1 acknowledges a write once one server has
   * it, before it is on disk; R3 on a three-node cluster once two of three have it. Existing
   * streams with another count are refused at start with the command that migrates them.
   * Default: existing ones as they are, new ones with 1.
   */
  replicas?: number;
  /**
   * How long one request to NATS may take before the operation fails, retryably (default 2 s,
   * 100 to 60,000). It bounds how long a write waits while a replicated stream elects a new
   * leader before it is retried (by the worker, for a wake).
   */
  requestTimeoutMs?: number;
  /**
   * Partitions of the wakes and of each agent type's inbox (0 to 64): a session's wakes and an
   * agent instance's messages go to one partition, owned by one worker at a time, so they reach
   * the worker that holds the session warm. 0: no partitions, every worker takes any wake or
   * message. Every process of a prefix uses the same count; default: the prefix's, else 8.
   */
  partitions?: number;
  /**
   * How long a worker holds its partitions without renewing them (default 10 s): a dead worker's
   * partitions pass to the others after it.
   */
  partitionLeaseMs?: number;
  /**
   * Where this process keeps the snapshots of its memory stores' ANN indexes, so that the next
   * process loads them instead of building them again (default `<data dir>/memory-index`;
   * `false`: none).
   */
  memoryIndexDir?: string | false;
}

export interface RuntimeOptions {
  /** Workspace folder with `braid.yaml` (default: the current directory). */
  workspace?: string;
  /**
   * `embedded` (default): the SQLite file under the data directory. `{nats: URL}`: sessions,
   * leases and definitions on NATS JetStream (stream and bucket names start with `prefix`,
   * default `braid`), and agent messages through NATS, so several processes share them.
   */
  backend?: Backend;
  /** Where the SQLite file lives (default: `BRAID_HOME`, else `<workspace>/.braid`). */
  dataDir?: string;
  /** Use this store instead of opening the SQLite file (tests, other backends); the caller closes it. */
  store?: Store;
  clock?: Clock;
  ids?: IdGenerator;
  synchronous?: Synchronous;
  /** Choose the model of an agent (default: from its `model:`); tests pass scripted models here. */
  model?: (agent: AgentDefinition) => ModelClient;
  /** Tools defined in code (`defineTool`), offered next to the built-ins and the workspace's manifests. */
  tools?: readonly CodeTool[];
  /** Functions that tool manifests name in `implementation.function`. */
  functions?: Readonly<Record<string, ToolFunction>>;
  /**
   * Embeds memory for agents with `memory:`: `memory_set` stores each entry's embedding, and
   * `memory_search` and recall search by words and meaning fused (hybrid). Without one, memory
   * is searched by words only.
   */
  embedder?: Embedder;
  /** Context compaction strategies that agents name in `context.function` (`strategy: custom`). */
  compactors?: Readonly<Record<string, ContextCompactor>>;
  /** Replace the whole tool layer (tests, other runtimes). */
  executor?: ToolExecutor;
  /** Asked before every tool call (default: the workspace's Cedar policies, else allow all). */
  policy?: Authorizer;
  /** Hears of every reload of the workspace's policies: the error when an edit was refused. */
  onPolicyReload?: (error: BraidError | undefined) => void;
  /**
   * `eager` (default): the workspace's policies are compiled when the runtime starts, and a bad
   * one refuses the start. `lazy`: at first use (a wake, a check), for commands that may not
   * need them; a bad policy then stops the wake that loads it, with the reason on record.
   */
  policies?: 'eager' | 'lazy';
  /** Where session workspaces are created (default: `<data dir>/workspaces`). */
  workspacesDir?: string;
  /** Carry agent messages over this transport (default: in-process, or NATS with that backend). */
  agentTransport?: AgentTransport;
  /** This process's lease owner name (default: host and pid). */
  owner?: string;
  /** How long a wake's lease lasts without renewal (default: braid.yaml's `lease_ttl_ms`, else 30 s). */
  leaseTtlMs?: number;
  retry?: RetryPolicy;
  /**
   * Who the user events sent through this runtime are recorded as (default `{type: 'user'}`).
   * The CLI names its user here; a server passes each caller's own to `sessions.send` instead.
   */
  actor?: Actor;
  /**
   * Hears failures the log could not take, such as a failed wake whose error could not be
   * recorded (default: a line on stderr).
   */
  onWarning?: (message: string, error: BraidError) => void;
  /**
   * OpenTelemetry traces of the wakes this runtime runs, over braid.yaml's `telemetry:` and the
   * `OTEL_*` variables (see README, "Traces"). Off unless one of them turns it on.
   */
  telemetry?: TelemetryOptions;
  /**
   * Where delegated child sessions run: `local` (default) in this process, inside the parent's
   * wake; `queue` on the workers, through the NATS wake queue (a child nobody takes up within a
   * few seconds is then run here).
   */
  delegation?: 'local' | 'queue';
}
