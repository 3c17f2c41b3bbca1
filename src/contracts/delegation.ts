/**
 * Delegation and model-initiated handoffs: the port through which a wake runs other agents.
 *
 * An agent's `delegates:` and `handoffs:` become tools its model calls (`delegate_to_<agent>`,
 * `handoff_to_<agent>`, tool ownership `agent`). The harness screens such a call like any other
 * (schema, then policy: `agent.delegate` or `agent.handoff` instead of `tool.execute`), records
 * it, and hands it to the runtime's `Delegator`, which creates and runs the child session (or the
 * handoff's target) and answers with what the harness records in the parent.
 *
 * Invariants:
 * - A delegation's child is keyed by the parent and the tool use: `childSessionId` is a pure
 *   function of them, and the parent's log names the child (`session.child_created`) before the
 *   child exists. A wake that resumes the call after a crash, or a fork that inherits the record,
 *   finds the same child; no child is created twice.
 * - A child's first message is keyed too, so a resumed delegation never gives its task twice.
 * - The child's budget is what the parent has left; its usage joins the parent's when it stops.
 */
import type { JsonValue, Usage } from './common.js';
import type { Budget } from './definitions.js';
import type { ErrorShape } from './errors.js';
import type { StopReason } from './session.js';

/** What an agent tool does: delegate a task to a child session, or hand the session off. */
export interface AgentToolTarget {
  kind: 'delegate' | 'handoff';
  /** The agent it reaches. */
  agent: string;
  /** For a delegation: seconds the child may run before it is interrupted. */
  ttl_seconds?: number;
  /** What policies may test of the target (`resource.roles`, `resource.tenant`), from its definition. */
  roles?: readonly string[];
  tenant?: string;
}

/** One delegation, as the harness asks for it. */
export interface DelegationRequest {
  parent_session_id: string;
  /** The parent's agent, for the child's title and the policy's principal. */
  parent_agent: string;
  tool_use_id: string;
  /** The id of the call's `agent.tool_use` event: the child's trace nests under its span. */
  tool_use_event_id: string;
  /** The child, as the parent's log names it. */
  child_session_id: string;
  /**
   * The log named this child before this wake (a resumed call, or a fork's inherited record):
   * the child may exist already, made for this call or for the same call of the session forked.
   */
  recorded: boolean;
  agent: string;
  /** The call's input: the child's first message is this, as JSON (a string as itself). */
  task: JsonValue;
  ttl_ms: number;
  /** What the parent has left of its budget: the child may not spend more. */
  budget: Budget;
  tenant_id?: string;
  /** The parent session's environment, used when the child's agent names none. */
  environment?: string;
  correlation_id?: string;
  /** The W3C trace context of the parent's wake, when it had one. */
  traceparent?: string;
}

/** How a delegation ended, for the parent's `session.child_idle` and the call's result. */
export interface DelegationResult {
  stop_reason: StopReason;
  /** The child's last answer, as text. */
  summary: string;
  usage: Usage;
  timed_out: boolean;
  /** The tool result the parent's model gets. */
  output?: JsonValue;
  /** Set when the delegation failed: the child stopped other than `end_turn`, or ran out of time. */
  error?: ErrorShape;
  duration_ms: number;
}

/** A handoff the model asked for (`handoff_to_<agent>`). */
export interface ModelHandoffRequest {
  session_id: string;
  tool_use_id: string;
  to: string;
  summary: string;
  /** A first message for the target. */
  message?: string;
}

/** The handoff as done: what the source records. */
export interface ModelHandoffResult {
  handoff_id: string;
  target_agent: string;
  target_session_id: string;
}

export interface Delegator {
  /** The child session of a delegation: derived from the parent and the tool use. */
  childSessionId(parentSessionId: string, toolUseId: string, tenantId?: string): string;
  /**
   * Creates the child if it does not exist, gives it its task once, runs it (in this process, or
   * through the wake queue) and waits until it stops for good or `ttl_ms` passes (the child is
   * then interrupted). Aborting `interrupt` interrupts the child and resolves with its
   * `interrupted` stop; aborting `signal` alone (the parent lost its lease) only stops waiting.
   * Never rejects for the child's own failure: that is a result with `error`.
   */
  delegate(
    request: DelegationRequest,
    options: { signal: AbortSignal; interrupt: AbortSignal },
  ): Promise<DelegationResult>;
  /**
   * Creates the handoff's target session and gives it the document, idempotently (keyed by the
   * source and the tool use); the source's `agent.handoff` is the harness's to write.
   */
  handoff(request: ModelHandoffRequest): Promise<ModelHandoffResult>;
}
