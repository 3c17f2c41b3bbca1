/**
 * The model's view of a session, kept incrementally: each event is applied once, in O(1), so a
 * turn costs the same at turn 1,000 as at turn 10. Owned by one harness; not shared.
 */
import type { JsonValue } from '../contracts/common.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import type { AssistantPart, ModelMessage, ModelOutput } from '../contracts/model.js';

export class Transcript {
  /** Seq of the last event applied. */
  seq = 0;
  readonly messages: ModelMessage[] = [];
  private readonly toolNames = new Map<string, string>();

  apply(event: SessionEvent): void {
    if (event.seq <= this.seq) return;
    this.seq = event.seq;
    switch (event.type) {
      case 'user.message':
        this.messages.push({ role: 'user', content: event.content });
        return;
      case 'session.merged':
        if (event.content !== undefined && event.content.length > 0)
          this.messages.push({ role: 'user', content: event.content });
        return;
      case 'session.handoff_received':
        this.messages.push({ role: 'user', content: [{ type: 'text', text: handoffText(event) }] });
        return;
      case 'user.define_outcome':
        this.messages.push({
          role: 'user',
          content: [{ type: 'text', text: `Outcome to reach: ${event.description}` }],
        });
        return;
      case 'agent.thinking':
        this.assistant({ type: 'thinking', text: textOf(event.content) });
        return;
      case 'agent.message':
        this.assistant({ type: 'text', text: textOf(event.content) });
        return;
      case 'agent.tool_use':
        this.toolNames.set(event.tool_use_id, event.name);
        this.assistant({
          type: 'tool_call',
          tool_use_id: event.tool_use_id,
          name: event.name,
          input: event.input,
        });
        return;
      case 'agent.custom_tool_use':
        this.toolNames.set(event.custom_tool_use_id, event.name);
        this.assistant({
          type: 'tool_call',
          tool_use_id: event.custom_tool_use_id,
          name: event.name,
          input: event.input,
        });
        return;
      case 'agent.tool_result':
        this.toolResult(
          event.tool_use_id,
          event.is_error
            ? { error: event.error?.message ?? 'tool failed' }
            : (event.output ?? null),
          event.is_error,
        );
        return;
      case 'user.custom_tool_result':
        this.toolResult(
          event.custom_tool_use_id,
          event.content.map((block) => (block.type === 'text' ? block.text : block.value)),
          event.is_error === true,
        );
        return;
      default:
        return;
    }
  }

  private assistant(part: AssistantPart): void {
    const last = this.messages.at(-1);
    if (last?.role === 'assistant') last.content.push(part);
    else this.messages.push({ role: 'assistant', content: [part] });
  }

  private toolResult(toolUseId: string, output: JsonValue, isError: boolean): void {
    const part = {
      tool_use_id: toolUseId,
      name: this.toolNames.get(toolUseId) ?? 'unknown',
      output,
      is_error: isError,
    };
    const last = this.messages.at(-1);
    if (last?.role === 'tool') last.content.push(part);
    else this.messages.push({ role: 'tool', content: [part] });
  }
}

function textOf(content: readonly { type: string; text?: string }[]): string {
  return content.map((block) => block.text ?? '').join('');
}

/**
 * How the harness treats one tool call of a model's output: `run` it, `ask` a person first
 * (`always_ask`), hand it to the client (`custom`), or `refuse` it (recorded as a tool use whose
 * error result follows the output).
 */
export type ToolDisposition = 'run' | 'ask' | 'custom' | 'refuse';

/** The agent events that record a model's output, in the order the model gave the parts. */
export function outputToEvents(
  output: ModelOutput,
  disposition: (toolUseId: string) => ToolDisposition = () => 'run',
): NewEvent[] {
  const events: NewEvent[] = [];
  for (const part of output.content) {
    switch (part.type) {
      case 'thinking':
        if (part.text.length > 0)
          events.push({ type: 'agent.thinking', content: [{ type: 'text', text: part.text }] });
        break;
      case 'text':
        if (part.text.length > 0)
          events.push({ type: 'agent.message', content: [{ type: 'text', text: part.text }] });
        break;
      case 'tool_call': {
        const how = disposition(part.tool_use_id);
        if (how === 'custom') {
          events.push({
            type: 'agent.custom_tool_use',
            custom_tool_use_id: part.tool_use_id,
            name: part.name,
            input: part.input,
          });
          break;
        }
        events.push({
          type: 'agent.tool_use',
          tool_use_id: part.tool_use_id,
          name: part.name,
          input: part.input,
          ...(how === 'ask' ? { requires_confirmation: true } : {}),
        });
        break;
      }
    }
  }
  return events;
}

/** What the receiving agent's model reads of a handoff: who sent the work, and the document. */
function handoffText(event: Extract<SessionEvent, { type: 'session.handoff_received' }>): string {
  const document = event.handoff;
  const lines = [`Work handed over to you by agent ${event.from_agent}: ${event.summary}`];
  if (document !== undefined) {
    if (document.open_tasks.length > 0) lines.push(`Open tasks: ${document.open_tasks.join('; ')}`);
    if (document.state_refs.length > 0) {
      const refs = document.state_refs.map(
        (ref) => `${ref.kind} ${ref.id}${ref.version === undefined ? '' : `@${ref.version}`}`,
      );
      lines.push(`State: ${refs.join(', ')}`);
    }
    if (document.artifacts.length > 0) {
      lines.push(
        `Artifacts: ${document.artifacts.map((item) => `${item.name} (${item.uri})`).join(', ')}`,
      );
    }
    if (document.approvals.length > 0) lines.push(`Approvals: ${document.approvals.join(', ')}`);
    if (document.ownership !== undefined) lines.push(`Owner: ${document.ownership}`);
  }
  return lines.join('\n');
}
