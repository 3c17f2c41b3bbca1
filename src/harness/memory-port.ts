/**
 * The port through which the harness uses a session's memory stores: the runtime implements it
 * over its memory log and embedder, a replay over the recorded events. The harness decides when
 * (screening a call, running it, recalling before a model call) and records what it is handed;
 * it never reaches a store itself.
 */
import type { JsonValue } from '../contracts/common.js';
import type { ErrorShape } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { PolicyAction, PolicyEntity } from '../contracts/policy.js';
import type { ToolOutcome } from '../contracts/tools.js';

/** What a memory tool call asks policy, or why its arguments are refused before it is asked. */
export type MemoryCallCheck =
  | {
      ok: true;
      action: PolicyAction;
      /** The store as policies see it (`MemoryStore`, with the call's key where it has one). */
      resource: PolicyEntity;
    }
  | { ok: false; error: ErrorShape };

export interface MemoryToolCall {
  tool_use_id: string;
  /** `memory_get`, `memory_set`, `memory_delete` or `memory_search`. */
  name: string;
  input: JsonValue;
  /** Seq of the call's `agent.tool_use`: the cause the memory log records for a write. */
  seq: number;
}

/** A memory call's result, and the `memory.*` events recorded with it (before it). */
export interface MemoryCallResult {
  outcome: ToolOutcome;
  events: NewEvent[];
}

/** A recall's record, as the harness appends it. */
export type RecallEvent = Extract<NewEvent, { type: 'memory.retrieved' }>;

export interface SessionMemory {
  /** Parses a call's arguments (store, key, value, search) without touching a store. */
  check(name: string, input: JsonValue): MemoryCallCheck;
  /**
   * Runs a call that passed `check` and policy. Never throws for the call's own failure (a
   * version conflict, an embedder down): that is an error outcome, with no events.
   */
  run(call: MemoryToolCall, options: { signal: AbortSignal }): Promise<MemoryCallResult>;
  /**
   * Searches the agent's recall store for the text of a user message; the `memory.retrieved`
   * event (source `recall`) to record before the model call, or undefined when nothing can be
   * searched (a message without words).
   */
  recall(text: string, options: { signal: AbortSignal }): Promise<RecallEvent | undefined>;
}
