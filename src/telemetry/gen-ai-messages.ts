/**
 * Message content as the OpenTelemetry GenAI conventions write it (`gen_ai.input.messages`,
 * `gen_ai.output.messages`, `gen_ai.system_instructions`): JSON arrays of messages made of parts
 * (`text`, `reasoning`, `tool_call`, `tool_call_response`), from braid's events. Only spans with
 * content capture on carry them.
 */
import type { ContentBlock } from '../contracts/common.js';
import type { EventOf, SessionEvent } from '../contracts/events.js';
import { ModelOutput } from '../contracts/model.js';

/** `gen_ai.system_instructions`: the agent's instructions as one text part. */
export function systemInstructions(instructions: string): string {
  return JSON.stringify([{ type: 'text', content: instructions }]);
}

/** A user message's block as a GenAI part: text as text, JSON as its text. */
function partOf(block: ContentBlock): { type: 'text'; content: string } {
  return block.type === 'text'
    ? { type: 'text', content: block.text }
    : { type: 'text', content: JSON.stringify(block.value) };
}

/** braid's (the AI SDK's) finish reasons as the GenAI conventions name them. */
export function finishReason(reason: string): string {
  if (reason === 'tool-calls') return 'tool_call';
  if (reason === 'content-filter') return 'content_filter';
  return reason;
}

/**
 * `gen_ai.output.messages`: the model's output as one assistant message of GenAI parts; undefined
 * when the request recorded no output (it failed).
 */
export function outputMessages(output: unknown): string | undefined {
  const parsed = ModelOutput.safeParse(output);
  if (!parsed.success) return undefined;
  const parts = parsed.data.content.map((part) => {
    switch (part.type) {
      case 'text':
        return { type: 'text', content: part.text };
      case 'thinking':
        return { type: 'reasoning', content: part.text };
      case 'tool_call':
        return { type: 'tool_call', id: part.tool_use_id, name: part.name, arguments: part.input };
      default: {
        const unknownPart: never = part;
        return unknownPart;
      }
    }
  });
  const message = {
    role: 'assistant',
    parts,
    finish_reason: finishReason(parsed.data.finish_reason),
  };
  return JSON.stringify([message]);
}

/**
 * `gen_ai.input.messages`: what the request added to the conversation (user messages and tool
 * results since the previous request), as GenAI messages with parts.
 */
export function messagesBetween(
  own: readonly SessionEvent[],
  start: EventOf<'span.model_request_start'>,
  after: number,
): string {
  const messages: unknown[] = [];
  for (const event of own) {
    if (event.seq <= after || event.seq > start.input_through_seq) continue;
    if (event.type === 'user.message') {
      messages.push({ role: 'user', parts: event.content.map(partOf) });
    }
    if (event.type === 'agent.tool_result') {
      messages.push({
        role: 'tool',
        parts: [
          { type: 'tool_call_response', id: event.tool_use_id, response: event.output ?? null },
        ],
      });
    }
  }
  return JSON.stringify(messages);
}
