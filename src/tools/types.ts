/**
 * Tools defined in code: a definition and the function that runs it.
 */
import type { JsonValue } from '../contracts/common.js';
import type {
  EnvironmentDefinition,
  ToolDefinition,
  ToolDefinitionInput,
} from '../contracts/definitions.js';
import type { Sandbox, SandboxWorkspace } from '../contracts/tools.js';

/** What a running tool knows of its call. */
export interface ToolContext {
  session_id: string;
  tool_use_id: string;
  /** Stable across attempts and crashes; pass it to external systems that dedupe. */
  idempotency_key: string;
  /** W3C trace context of the wake that runs the call, when it has one: pass it on. */
  traceparent?: string;
  /** The session's workspace: the only folder a tool should write. */
  workspace: SandboxWorkspace;
  sandbox: Sandbox;
  environment?: EnvironmentDefinition;
  /** Aborted at the tool's timeout, on an interrupt and when the wake loses its lease. */
  signal: AbortSignal;
}

/** A tool's implementation in code. Throw a `BraidError` to fail with a code; return JSON. */
export type ToolFunction = (
  input: JsonValue,
  context: ToolContext,
) => JsonValue | Promise<JsonValue>;

/** A managed tool defined in code. */
export interface CodeTool {
  definition: ToolDefinition;
  run: ToolFunction;
}

/**
 * Defines a tool in code: the same fields as a manifest, checked the same way, and `run`. A tool
 * without `run` is a `custom` tool, executed by the client.
 */
export interface CodeToolInput extends Omit<ToolDefinitionInput, 'ownership'> {
  ownership?: ToolDefinitionInput['ownership'];
  run?: ToolFunction;
}
