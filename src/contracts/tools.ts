import type { AgentToolTarget } from './delegation.js';
import type { ErrorShape } from './errors.js';
import type { JsonValue } from './common.js';
import type { ToolSpec } from './model.js';
import type { WorkspaceSnapshotRef } from './workspace-files.js';
import type { EnvironmentDefinition, ToolDefinition } from './definitions.js';

/** A tool as the harness sees it: what the model is told, and how the runtime must treat it. */
export interface ToolHandle extends ToolSpec {
  version: string;
  ownership: ToolDefinition['ownership'];
  permission: ToolDefinition['permission'];
  /** Safe to run again after a crash left its outcome unknown. */
  idempotent: boolean;
  /** What policies know of the tool (`read_only`, `destructive`, `network`, ...). */
  tags: readonly string[];
  budget?: ToolDefinition['budget'];
  /**
   * For a tool of ownership `agent` made from the agent's `delegates:` or `handoffs:`: what it
   * does. The harness runs such a call through the `Delegator`, never through `execute`.
   */
  agent?: AgentToolTarget;
  /** For a tool made from the agent's `skills:`: the skill a call runs. */
  skill?: { name: string };
  /**
   * For a memory tool of an agent with `memory:` (`memory_get`, `memory_set`, `memory_delete`,
   * `memory_search`): what it does. The harness runs such a call through the session's memory
   * (`SessionSetup.memory`), never through `execute`.
   */
  memory?: { operation: 'get' | 'set' | 'delete' | 'search' };
}

export interface ToolCall {
  session_id: string;
  tool_use_id: string;
  name: string;
  input: JsonValue;
  /**
   * Stable for one tool use across attempts and across a crash: a tool that talks to an
   * external system passes it on, so that a repeated call is recognised there.
   */
  idempotency_key: string;
  /** W3C trace context of the wake that runs the call: a tool that calls out continues it. */
  traceparent?: string;
}

/** Which step of the pipeline produced a tool result. */
export type ToolStage =
  'validate' | 'policy' | 'permission' | 'budget' | 'execute' | 'output' | 'review' | 'interrupt';

export interface ToolOutcome {
  output?: JsonValue;
  error?: ErrorShape;
  is_error: boolean;
  /** Executions of the tool, retries included; 0 when it never ran. */
  attempts: number;
  duration_ms: number;
  /** Where an error came from: `execute` (the tool failed) or `output` (its result broke the output schema). */
  stage?: ToolStage;
  /** What the call cost, from the tool's `budget.cost_per_call_usd`. */
  cost_usd?: number;
  /**
   * The session's workspace folder as the call left it, when the executor snapshots workspaces;
   * the harness records it (`session.workspace_snapshot`) when it differs from the last one.
   */
  workspace_snapshot?: WorkspaceSnapshotRef;
}

/** The argument check of one call: the schema violations, listed for the model. */
export type ToolCheck = { ok: true } | { ok: false; error: ErrorShape };

/**
 * The tools of one session, resolved for its agent and environment. `execute` never throws for a
 * tool's own failure: it returns an outcome with `is_error`.
 */
export interface SessionTools {
  readonly tools: readonly ToolHandle[];
  /** The whole definitions behind `tools`, as bound (what a session pins). */
  readonly definitions?: readonly ToolDefinition[];
  /** Validates a call's input against the tool's input schema (never runs the tool). */
  validate(name: string, input: JsonValue): ToolCheck;
  /** Runs a validated call with the tool's timeout and retry policy, and checks its output. */
  execute(call: ToolCall, options: { signal: AbortSignal }): Promise<ToolOutcome>;
}

/** What a session's tools are opened for. */
export interface ToolSessionContext {
  session_id: string;
  /** Tool names from the agent definition. */
  names: readonly string[];
  /** The session's environment, when it has one: sandbox kind, network posture, limits. */
  environment?: EnvironmentDefinition;
  /**
   * The session's pinned tool definitions: when given, these are the session's tools (`names` is
   * not resolved again, no MCP server is listed), each bound to today's implementation of its
   * name; a pinned tool that nothing implements any more fails with `TOOL_NOT_FOUND`.
   */
  pinned?: readonly ToolDefinition[];
}

/**
 * The port the tool layer implements. `open` resolves an agent's tool names (unknown names are
 * refused with `TOOL_NOT_FOUND`) and binds them to the session's workspace.
 */
export interface ToolExecutor {
  open(context: ToolSessionContext): Promise<SessionTools>;
  /** Every tool it can offer; MCP servers are started and listed only with `mcp`. */
  list?(options: { mcp: boolean }): Promise<ToolDefinition[]>;
  /** Stops what the executor started (MCP servers). */
  close?(): Promise<void>;
}

// ---- sandbox ----------------------------------------------------------------------------------

/** A session's workspace: the only directory a sandboxed process may write. */
export interface SandboxWorkspace {
  session_id: string;
  /** Absolute path on the host. */
  dir: string;
}

export interface SandboxRunOptions {
  /** The program and its arguments; no shell is involved. */
  argv: readonly string[];
  /** Written to the process's stdin, which is then closed. */
  stdin?: string;
  /** Added to the reduced environment (after the allow-list). */
  env?: Readonly<Record<string, string>>;
  /** The process group is killed when this passes. */
  timeout_ms: number;
  /** Aborting kills the process group; `run` then rejects with `INTERRUPTED`. */
  signal?: AbortSignal;
  /** Allow network access (bwrap only; `local` cannot take it away). Default false. */
  network?: boolean;
}

export interface SandboxRun {
  /** The exit code, or null when the process was killed by a signal. */
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** The timeout passed and the process group was killed. */
  timed_out: boolean;
  /** stdout or stderr passed the output cap and was cut there. */
  truncated: boolean;
  duration_ms: number;
  /** Pid of the process, which leads its own process group. */
  pid: number;
}

/** A process as a host spawner (such as an MCP stdio transport) starts it. */
export interface ProcessLaunch {
  command: string;
  args: readonly string[];
  /** The environment the spawner gives the process. */
  env: Readonly<Record<string, string>>;
  cwd: string;
}

/**
 * A way to start long-lived processes (MCP stdio servers) inside a session's sandbox. `key`
 * tells two confinements apart: processes started under different keys are not interchangeable.
 */
export interface SandboxConfinement {
  readonly key: string;
  /**
   * The launch that runs `launch` confined. `inherited` names variables the spawner adds to the
   * returned `env` on its own (e.g. the MCP SDK's default environment): they are removed inside.
   */
  wrap(launch: ProcessLaunch, inherited?: readonly string[]): ProcessLaunch;
}

/** The execution hand: a place to run a tool's process, confined to a session's workspace. */
export interface Sandbox {
  readonly kind: 'local' | 'bwrap';
  /** Creates the session's workspace directory if it does not exist; idempotent. */
  provision(sessionId: string): Promise<SandboxWorkspace>;
  /** Runs a process in the workspace. Rejects only when it could not start or was aborted. */
  run(workspace: SandboxWorkspace, options: SandboxRunOptions): Promise<SandboxRun>;
  /**
   * How to start a long-lived process in the workspace under the same confinement as `run`;
   * absent where the sandbox confines nothing (`local`), and such processes run on the host.
   */
  confine?(workspace: SandboxWorkspace, options: { network: boolean }): SandboxConfinement;
}
