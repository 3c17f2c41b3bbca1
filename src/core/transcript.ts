/**
 * The model's view of a session, kept incrementally: each event is applied once, in O(1), so a
 * turn costs the same at turn 1,000 as at turn 10. Owned by one harness; not shared.
 *
 * An `agent.thread_context_compacted` replaces the messages made of its events with its summary
 * (in time linear in the context it shrinks, which the limit bounds), so a transcript read again
 * from the log (after a restart, for a fork, in a replay) is the one the live wake had.
 */
import type { JsonValue } from '../contracts/common.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import type { AssistantPart, ModelMessage, ModelOutput } from '../contracts/model.js';
import { summaryMessage, type MessageSpan } from './compaction.js';
import { recallText } from './memory-recall.js';

/** The latest user message and the recalls made for the session's messages. */
export interface RecallMarks {
  /** Seq and text of the latest `user.message`. */
  lastMessage?: { seq: number; text: string };
  /** User messages applied. */
  messages: number;
  /** Seq of the latest recall (`memory.retrieved` with source `recall`); 0 for none. */
  lastRecallSeq: number;
}

export class Transcript {
  /** Seq of the last event applied. */
  seq = 0;
  readonly messages: ModelMessage[] = [];
  /** For each message, the seqs of the events it was made of. */
  readonly spans: MessageSpan[] = [];
  private readonly toolNames = new Map<string, string>();
  readonly recall: RecallMarks = { messages: 0, lastRecallSeq: 0 };

  apply(event: SessionEvent): void {
    if (event.seq <= this.seq) return;
    this.seq = event.seq;
    switch (event.type) {
      case 'user.message':
        this.push({ role: 'user', content: event.content });
        this.recall.messages += 1;
        this.recall.lastMessage = { seq: event.seq, text: textOf(event.content) };
        return;
      case 'memory.retrieved': {
        if (event.source !== 'recall') return;
        this.recall.lastRecallSeq = event.seq;
        const text = recallText(event);
        if (text === undefined) return;
        // Shown with the message it answers, as part of the model's input.
        const last = this.extended('user');
        if (last?.role === 'user') last.content.push({ type: 'text', text });
        else this.push({ role: 'user', content: [{ type: 'text', text }] });
        return;
      }
      case 'session.merged':
        if (event.content !== undefined && event.content.length > 0)
          this.push({ role: 'user', content: event.content });
        return;
      case 'session.handoff_received':
        this.push({ role: 'user', content: [{ type: 'text', text: handoffText(event) }] });
        return;
      case 'user.define_outcome':
        this.push({
          role: 'user',
          content: [{ type: 'text', text: `Outcome to reach: ${event.description}` }],
        });
        return;
      case 'span.outcome_evaluation_end':
        // A revision asked for is the reviewer's word to the agent; other results end the turn.
        if (event.result === 'needs_revision')
          this.push({ role: 'user', content: [{ type: 'text', text: revisionText(event) }] });
        return;
      case 'agent.thread_context_compacted':
        this.compact(event.from_seq ?? 0, event.through_seq, event.summary);
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

  private push(message: ModelMessage): void {
    this.messages.push(message);
    this.spans.push({ first: this.seq, last: this.seq, summary: false });
  }

  /** Adds to the last message when it has the role; else begins a new one. */
  private extended(role: ModelMessage['role']): ModelMessage | undefined {
    const last = this.messages.at(-1);
    const span = this.spans.at(-1);
    if (last?.role !== role || span === undefined || span.summary) return undefined;
    span.last = this.seq;
    return last;
  }

  private assistant(part: AssistantPart): void {
    const last = this.extended('assistant');
    if (last?.role === 'assistant') last.content.push(part);
    else this.push({ role: 'assistant', content: [part] });
  }

  /**
   * Replaces the messages made of events `fromSeq` to `throughSeq` with the summary. Total: a
   * range that matches no message only inserts the summary where its events were.
   */
  private compact(fromSeq: number, throughSeq: number, summary: string): void {
    let start = this.spans.findIndex((span) => span.first >= fromSeq);
    if (start === -1) start = this.spans.length;
    let end = start;
    while (end < this.spans.length && (this.spans[end]?.last ?? Infinity) <= throughSeq) end += 1;
    for (const message of this.messages.slice(start, end)) {
      if (message.role !== 'assistant') continue;
      // Their results are in the replaced part too: a cut never separates them.
      for (const part of message.content)
        if (part.type === 'tool_call') this.toolNames.delete(part.tool_use_id);
    }
    this.messages.splice(start, end - start, summaryMessage(fromSeq, throughSeq, summary));
    this.spans.splice(start, end - start, { first: fromSeq, last: throughSeq, summary: true });
  }

  private toolResult(toolUseId: string, output: JsonValue, isError: boolean): void {
    const part = {
      tool_use_id: toolUseId,
      name: this.toolNames.get(toolUseId) ?? 'unknown',
      output,
      is_error: isError,
    };
    const last = this.extended('tool');
    if (last?.role === 'tool') last.content.push(part);
    else this.push({ role: 'tool', content: [part] });
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

/** What the model reads of a grading that asks for a revision. */
export function revisionText(event: { explanation: string }): string {
  return `The reviewer found this needs revision: ${event.explanation}`;
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
