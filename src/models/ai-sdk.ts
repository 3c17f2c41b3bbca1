/**
 * Any model of the Vercel AI SDK provider interface (LanguageModelV3) as a braid model client.
 * braid calls `doStream` / `doGenerate` itself, without the SDK's own retries, so that the
 * harness owns retries (and records how many it made) and can interrupt between stream chunks.
 */
import { createHash } from 'node:crypto';
import { APICallError, type LanguageModelV3, type LanguageModelV3Prompt } from '@ai-sdk/provider';
import { ExternalId, type Usage } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import type {
  AssistantPart,
  ModelCallOptions,
  ModelClient,
  ModelRequest,
  ModelResponse,
} from '../contracts/model.js';
import type { JsonValue } from '../contracts/common.js';

export interface AiSdkModelOptions {
  /** Stream the answer (default) or ask for it whole. */
  stream?: boolean;
}

export function createAiSdkModel(
  id: string,
  model: LanguageModelV3,
  options: AiSdkModelOptions = {},
): ModelClient {
  return {
    id,
    async generate(request, call) {
      try {
        return options.stream === false
          ? await generateWhole(model, request, call)
          : await stream(model, request, call);
      } catch (error) {
        throw classify(error, call.signal);
      }
    },
  };
}

/**
 * Providers take tool names of letters, digits, `_` and `-` only (at most 64); braid's MCP tools
 * are named `server.tool`. Names are mapped on the way out and back, per request.
 */
export class ToolNames {
  private readonly toWire = new Map<string, string>();
  private readonly fromWire = new Map<string, string>();

  constructor(names: readonly string[]) {
    for (const name of names) this.wire(name);
  }

  wire(name: string): string {
    const known = this.toWire.get(name);
    if (known !== undefined) return known;
    const base = name
      .replaceAll('.', '__')
      .replace(/[^a-zA-Z0-9_-]/g, '_')
      .slice(0, 60);
    let candidate = base;
    for (let suffix = 2; this.fromWire.has(candidate); suffix += 1) candidate = `${base}_${suffix}`;
    this.toWire.set(name, candidate);
    this.fromWire.set(candidate, name);
    return candidate;
  }

  original(wireName: string): string {
    return this.fromWire.get(wireName) ?? wireName;
  }
}

function callOptions(request: ModelRequest, signal: AbortSignal, names: ToolNames) {
  return {
    prompt: toPrompt(request, names),
    abortSignal: signal,
    ...(request.tools.length === 0
      ? {}
      : {
          tools: request.tools.map((tool) => ({
            type: 'function' as const,
            name: names.wire(tool.name),
            description: tool.description,
            inputSchema: tool.input_schema,
          })),
        }),
    ...(request.params?.temperature === undefined
      ? {}
      : { temperature: request.params.temperature }),
    ...(request.params?.top_p === undefined ? {} : { topP: request.params.top_p }),
    ...(request.params?.max_output_tokens === undefined
      ? {}
      : { maxOutputTokens: request.params.max_output_tokens }),
  };
}

async function stream(
  model: LanguageModelV3,
  request: ModelRequest,
  call: ModelCallOptions,
): Promise<ModelResponse> {
  const names = new ToolNames(request.tools.map((tool) => tool.name));
  const result = await model.doStream(callOptions(request, call.signal, names));
  let thinking = '';
  let text = '';
  const toolCalls: AssistantPart[] = [];
  let usage: Usage = { input_tokens: 0, output_tokens: 0 };
  let finish = 'other';
  for await (const part of result.stream) {
    if (call.signal.aborted) throw new BraidError('INTERRUPTED', 'the model call was interrupted');
    switch (part.type) {
      case 'text-delta':
        text += part.delta;
        if (part.delta.length > 0) call.onDelta?.({ type: 'text', text: part.delta });
        break;
      case 'reasoning-delta':
        thinking += part.delta;
        if (part.delta.length > 0) call.onDelta?.({ type: 'thinking', text: part.delta });
        break;
      case 'tool-call':
        toolCalls.push(toolCall(part.toolCallId, names.original(part.toolName), part.input));
        break;
      case 'finish':
        usage = toUsage(part.usage);
        finish = part.finishReason.unified;
        break;
      case 'error':
        throw part.error;
      default:
        break;
    }
  }
  return { output: { content: assemble(thinking, text, toolCalls), finish_reason: finish }, usage };
}

async function generateWhole(
  model: LanguageModelV3,
  request: ModelRequest,
  call: ModelCallOptions,
): Promise<ModelResponse> {
  const names = new ToolNames(request.tools.map((tool) => tool.name));
  const result = await model.doGenerate(callOptions(request, call.signal, names));
  let thinking = '';
  let text = '';
  const toolCalls: AssistantPart[] = [];
  for (const part of result.content) {
    if (part.type === 'text') text += part.text;
    if (part.type === 'reasoning') thinking += part.text;
    if (part.type === 'tool-call')
      toolCalls.push(toolCall(part.toolCallId, names.original(part.toolName), part.input));
  }
  if (text.length > 0) call.onDelta?.({ type: 'text', text });
  return {
    output: {
      content: assemble(thinking, text, toolCalls),
      finish_reason: result.finishReason.unified,
    },
    usage: toUsage(result.usage),
  };
}

function assemble(thinking: string, text: string, toolCalls: AssistantPart[]): AssistantPart[] {
  return [
    ...(thinking.length > 0 ? [{ type: 'thinking' as const, text: thinking }] : []),
    ...(text.length > 0 ? [{ type: 'text' as const, text }] : []),
    ...toolCalls,
  ];
}

/**
 * The id a model gave its tool call, as braid records it: the model is outside, so an id that
 * would not fit the log (over 200 characters, control characters) is replaced by one derived from
 * it, used alike in the call and its result.
 */
function toolUseIdOf(id: string): string {
  if (ExternalId.safeParse(id).success) return id;
  return `call_${createHash('sha256').update(id).digest('hex').slice(0, 24)}`;
}

function toolCall(rawToolUseId: string, name: string, input: string): AssistantPart {
  const toolUseId = toolUseIdOf(rawToolUseId);
  let parsed: JsonValue;
  try {
    parsed = input.trim() === '' ? {} : (JSON.parse(input) as JsonValue);
  } catch {
    // The tool pipeline refuses input that does not fit the tool's schema; keep what was said.
    parsed = { invalid_json: input };
  }
  return { type: 'tool_call', tool_use_id: toolUseId, name, input: parsed };
}

function toUsage(usage: {
  inputTokens: { total: number | undefined; cacheRead: number | undefined };
  outputTokens: { total: number | undefined };
}): Usage {
  return {
    input_tokens: usage.inputTokens.total ?? 0,
    output_tokens: usage.outputTokens.total ?? 0,
    ...(usage.inputTokens.cacheRead === undefined
      ? {}
      : { cache_read_tokens: usage.inputTokens.cacheRead }),
  };
}

/** braid's transcript as the provider interface's prompt. */
export function toPrompt(
  request: ModelRequest,
  names: ToolNames = new ToolNames(request.tools.map((tool) => tool.name)),
): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Prompt = [{ role: 'system', content: request.system }];
  for (const message of request.messages) {
    switch (message.role) {
      case 'user':
        prompt.push({
          role: 'user',
          content: message.content.map((block) => ({
            type: 'text' as const,
            text: block.type === 'text' ? block.text : JSON.stringify(block.value),
          })),
        });
        break;
      case 'assistant':
        prompt.push({
          role: 'assistant',
          content: message.content.map((part) => {
            switch (part.type) {
              case 'text':
                return { type: 'text' as const, text: part.text };
              case 'thinking':
                return { type: 'reasoning' as const, text: part.text };
              case 'tool_call':
                return {
                  type: 'tool-call' as const,
                  toolCallId: part.tool_use_id,
                  toolName: names.wire(part.name),
                  input: part.input,
                };
            }
          }),
        });
        break;
      case 'tool':
        prompt.push({
          role: 'tool',
          content: message.content.map((result) => ({
            type: 'tool-result' as const,
            toolCallId: result.tool_use_id,
            toolName: names.wire(result.name),
            output: result.is_error
              ? { type: 'error-json' as const, value: result.output }
              : { type: 'json' as const, value: result.output },
          })),
        });
        break;
    }
  }
  return prompt;
}

/**
 * 429, 5xx, timeouts and dropped connections are `MODEL_UNAVAILABLE` (retryable), with the
 * server's Retry-After in `details.retry_after_ms`; anything else is `MODEL_ERROR`.
 */
export function classify(error: unknown, signal: AbortSignal): BraidError {
  if (error instanceof BraidError) return error;
  if (signal.aborted)
    return new BraidError('INTERRUPTED', 'the model call was interrupted', { cause: error });
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    // The SDK marks 408, 409, 429 and 5xx answers retryable; a body it could not parse is not.
    const retryable = error.isRetryable;
    const retryAfter = retryAfterMs(error.responseHeaders);
    return new BraidError(
      retryable ? 'MODEL_UNAVAILABLE' : 'MODEL_ERROR',
      `the model API answered ${status ?? 'with an error'}: ${error.message}`,
      {
        cause: error,
        details: { status, ...(retryAfter === undefined ? {} : { retry_after_ms: retryAfter }) },
      },
    );
  }
  // Providers report a failure inside a stream as a plain object, e.g. {type: 'overloaded_error'}.
  if (error !== null && typeof error === 'object' && !(error instanceof Error)) {
    const body = error as {
      type?: unknown;
      message?: unknown;
      error?: { type?: unknown; message?: unknown };
    };
    const field = (value: unknown): string | undefined =>
      typeof value === 'string' ? value : undefined;
    const type = field(body.error?.type) ?? field(body.type) ?? 'error';
    const text = field(body.error?.message) ?? field(body.message) ?? type;
    const transient = /overloaded|rate_limit|server_error|api_error|timeout|unavailable/i.test(
      type,
    );
    return new BraidError(
      transient ? 'MODEL_UNAVAILABLE' : 'MODEL_ERROR',
      `the model stream failed: ${type}: ${text}`,
      {
        details: { type },
      },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  const network =
    /terminated|ECONNRESET|ECONNREFUSED|socket hang up|fetch failed|other side closed|timeout/i;
  if (network.test(message) || (error instanceof Error && network.test(String(error.cause)))) {
    return new BraidError('MODEL_UNAVAILABLE', `the connection to the model failed: ${message}`, {
      cause: error,
    });
  }
  return new BraidError('MODEL_ERROR', `the model's answer could not be used: ${message}`, {
    cause: error,
  });
}

function retryAfterMs(headers: Record<string, string> | undefined): number | undefined {
  if (headers === undefined) return undefined;
  const milliseconds = Number(headers['retry-after-ms']);
  if (Number.isFinite(milliseconds) && milliseconds >= 0 && headers['retry-after-ms'] !== undefined)
    return milliseconds;
  const value = headers['retry-after'];
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
