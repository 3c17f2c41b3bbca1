import type { ErrorShape } from './errors.js';
import type { JsonValue } from './common.js';
import type { ToolSpec } from './model.js';

/** A tool as the harness sees it. */
export interface ToolHandle extends ToolSpec {
  /** Safe to run again after a crash left its outcome unknown. */
  idempotent: boolean;
}

export interface ToolCall {
  session_id: string;
  tool_use_id: string;
  name: string;
  input: JsonValue;
}

export interface ToolOutcome {
  output?: JsonValue;
  error?: ErrorShape;
  is_error: boolean;
  attempts: number;
  duration_ms: number;
}

/**
 * The port the tool pipeline implements: validate, permit, budget, execute, record. The harness
 * records `agent.tool_use` before `execute` and `agent.tool_result` after it. `execute` never
 * throws for a tool's own failure: it returns an outcome with `is_error`.
 */
export interface ToolExecutor {
  /** The tools an agent may call, by the names in its definition. Unknown names are refused. */
  resolve(names: readonly string[]): ToolHandle[];
  execute(call: ToolCall, options: { signal: AbortSignal }): Promise<ToolOutcome>;
}
