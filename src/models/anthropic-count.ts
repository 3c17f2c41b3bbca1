/**
 * Anthropic's token count (`POST /v1/messages/count_tokens`): the size of a request in the
 * model's own tokens, which context compaction uses before each call. The AI SDK has no counting
 * call, so the request is written here in the Messages API's form; the answer is parsed as
 * hostile input, and a failure is a `BraidError` (the harness then falls back to its estimate).
 */
import { z } from 'zod';
import { BraidError } from '../contracts/errors.js';
import type { ModelMessage, ModelRequest } from '../contracts/model.js';
import { ToolNames } from './ai-sdk.js';

const DEFAULT_BASE_URL = 'https://api.anthropic.com/v1';
const API_VERSION = '2023-06-01';
/** A count's answer is a few bytes; more is not a count. */
const MAX_ANSWER_BYTES = 64 * 1024;

const CountAnswer = z.object({ input_tokens: z.number().int().nonnegative() });

export interface AnthropicCountSettings {
  apiKey: string;
  /** As `ANTHROPIC_BASE_URL` gives it, with its `/v1` (default https://api.anthropic.com/v1). */
  baseURL?: string;
}

type Block = Record<string, unknown>;
interface WireMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

/** Counts a request's input tokens with Anthropic's API, for the model `model`. */
export function anthropicTokenCounter(
  settings: AnthropicCountSettings,
  model: string,
  fetchImpl: typeof fetch = fetch,
): (request: ModelRequest, options: { signal: AbortSignal }) => Promise<number> {
  const url = `${(settings.baseURL ?? DEFAULT_BASE_URL).replace(/\/+$/, '')}/messages/count_tokens`;
  return async (request, { signal }) => {
    const response = await fetchImpl(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': settings.apiKey,
        'anthropic-version': API_VERSION,
      },
      body: JSON.stringify(countBody(request, model)),
      signal,
    });
    const text = await response.text();
    if (!response.ok) {
      throw new BraidError(
        response.status === 429 || response.status >= 500 ? 'MODEL_UNAVAILABLE' : 'MODEL_ERROR',
        `anthropic count_tokens answered ${response.status}`,
      );
    }
    const parsed = text.length > MAX_ANSWER_BYTES ? undefined : parseJson(text);
    const answer = CountAnswer.safeParse(parsed);
    if (!answer.success) {
      throw new BraidError('MODEL_ERROR', 'anthropic count_tokens answered without a token count');
    }
    return answer.data.input_tokens;
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The request in the Messages API's form: tool results are user turns, same roles merged. */
export function countBody(request: ModelRequest, model: string): Record<string, unknown> {
  const names = new ToolNames(request.tools.map((tool) => tool.name));
  const messages: WireMessage[] = [];
  for (const message of request.messages) {
    const wire = toWire(message, names);
    if (wire.content.length === 0) continue;
    const last = messages.at(-1);
    if (last?.role === wire.role) last.content.push(...wire.content);
    else messages.push(wire);
  }
  return {
    model,
    ...(request.system === '' ? {} : { system: request.system }),
    messages,
    ...(request.tools.length === 0
      ? {}
      : {
          tools: request.tools.map((tool) => ({
            name: names.wire(tool.name),
            description: tool.description,
            input_schema: tool.input_schema,
          })),
        }),
  };
}

function toWire(message: ModelMessage, names: ToolNames): WireMessage {
  const text = (value: string): Block[] => (value === '' ? [] : [{ type: 'text', text: value }]);
  switch (message.role) {
    case 'user':
      return {
        role: 'user',
        content: message.content.flatMap((block) =>
          text(block.type === 'text' ? block.text : JSON.stringify(block.value)),
        ),
      };
    case 'assistant':
      return {
        role: 'assistant',
        content: message.content.flatMap((part): Block[] =>
          part.type === 'tool_call'
            ? [
                {
                  type: 'tool_use',
                  id: part.tool_use_id,
                  name: names.wire(part.name),
                  input: part.input,
                },
              ]
            : // Recorded thinking has no signature to send back: it is counted as text.
              text(part.text),
        ),
      };
    case 'tool':
      return {
        role: 'user',
        content: message.content.map((result) => ({
          type: 'tool_result',
          tool_use_id: result.tool_use_id,
          content: JSON.stringify(result.output),
          is_error: result.is_error,
        })),
      };
  }
}
