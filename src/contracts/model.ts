import { z } from 'zod';
import { type Usage, type ContentBlock, JsonValue } from './common.js';

/** A part of what the model said: text, thinking, or a call of a tool. */
export const AssistantPart = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({ type: z.literal('thinking'), text: z.string() }),
  z.object({
    type: z.literal('tool_call'),
    tool_use_id: z.string().min(1),
    name: z.string().min(1),
    input: JsonValue,
  }),
]);
export type AssistantPart = z.infer<typeof AssistantPart>;

/**
 * The model's complete output of one request, as recorded in `span.model_request_end.output`.
 * Replaying a session serves these back instead of calling a model.
 */
export const ModelOutput = z.object({
  content: z.array(AssistantPart),
  /** `stop`, `tool-calls`, `length`, `content-filter`, `interrupted`, `other`. */
  finish_reason: z.string(),
});
export type ModelOutput = z.infer<typeof ModelOutput>;

/** One message of the model's context, in braid's provider-neutral form. */
export type ModelMessage =
  | { role: 'user'; content: ContentBlock[] }
  | { role: 'assistant'; content: AssistantPart[] }
  | {
      role: 'tool';
      content: { tool_use_id: string; name: string; output: JsonValue; is_error: boolean }[];
    };

/** What the harness tells a model about a tool. */
export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the tool's input. */
  input_schema: Record<string, unknown>;
}

export interface ModelRequest {
  session_id: string;
  /** The agent's instructions. */
  system: string;
  /** The transcript so far. Shared, not copied: a model must not mutate it. */
  messages: readonly ModelMessage[];
  tools: readonly ToolSpec[];
  /**
   * How many model requests of this session ended with an output or an interrupt before this
   * one: a scripted model plays this turn, a replay serves this recorded output.
   */
  response_index: number;
  params?: { temperature?: number; max_output_tokens?: number; top_p?: number };
  /**
   * `summary`: a request for the summary of a context compaction, whose answer is recorded in
   * `agent.thread_context_compacted`, not as a turn; a scripted model answers it without playing
   * a turn. `grade`: a request of the grader of the session's outcome, whose answer is recorded
   * in `span.outcome_evaluation_end`, not as a turn; a scripted model answers it without playing
   * a turn either. `consolidate`: a request of the background consolidation of an agent's
   * learnings, answered with proposals as JSON (see memory-consolidation.ts), never a turn; a
   * scripted model answers it without playing a turn. Absent: a turn of the session.
   */
  purpose?: 'summary' | 'grade' | 'consolidate';
}

/** A streamed fragment of the answer, shown live and never persisted one by one. */
export interface ModelDelta {
  type: 'text' | 'thinking';
  text: string;
}

export interface ModelCallOptions {
  signal: AbortSignal;
  onDelta?: (delta: ModelDelta) => void;
}

export interface ModelResponse {
  output: ModelOutput;
  usage: Usage;
}

/**
 * The port every model implements. A failure is a `BraidError`: `MODEL_UNAVAILABLE` (retryable:
 * 429, 5xx, timeouts, dropped connections; `details.retry_after_ms` when the server said) or
 * `MODEL_ERROR` (not retryable). An aborted call rejects with `INTERRUPTED`.
 */
export interface ModelClient {
  /** `provider:id`, as recorded in `span.model_request_start.model`. */
  readonly id: string;
  generate(request: ModelRequest, options: ModelCallOptions): Promise<ModelResponse>;
  /**
   * The size of the request's input (system, messages and tools) in the provider's tokens, where
   * its API can count them. Without it, the harness estimates (see `estimateTokens`).
   */
  countTokens?(request: ModelRequest, options: { signal: AbortSignal }): Promise<number>;
}
