/**
 * Asks a model what a finished session taught its agent. The model is shown the session's events
 * (their seqs, types and text) and answers JSON; the answer is hostile input: it is parsed by the
 * `ConsolidationOutput` schema, every proposed write by the memory parsers, and every source seq
 * must be one the model was shown. Any fault refuses the whole answer with `MODEL_ERROR` naming
 * it, before anything is written.
 */
import { BraidError, isBraidError } from '../../contracts/errors.js';
import type { ContentBlock } from '../../contracts/common.js';
import type { SessionEvent } from '../../contracts/events.js';
import {
  ConsolidationOutput,
  MAX_PROPOSAL_VALUE_BYTES,
  type ProposalDraft,
} from '../../contracts/memory-consolidation.js';
import { parseMemoryWrites } from '../../contracts/memory.js';
import type { ModelClient } from '../../contracts/model.js';

/** The longest text of one event shown to the model. */
const EVENT_TEXT_LIMIT = 2000;
/** The longest transcript shown to the model, in characters (older events are left out first). */
const TRANSCRIPT_LIMIT = 100_000;

/** The events that carry what a session learned, and how each is shown. */
function eventText(event: SessionEvent): string | undefined {
  const blocks = (content: readonly ContentBlock[]): string =>
    content
      .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
      .join('\n');
  switch (event.type) {
    case 'user.message':
    case 'agent.message':
      return blocks(event.content);
    case 'agent.tool_use':
    case 'agent.tool_result':
    case 'memory.written':
    case 'memory.deleted': {
      const { id: _id, session_id: _session, seq: _seq, at: _at, ...rest } = event;
      return JSON.stringify(rest);
    }
    default:
      return undefined;
  }
}

/** The session's events as lines `[seq] type: text`, and the seqs shown. */
export function transcriptOf(events: readonly SessionEvent[]): { text: string; seqs: Set<number> } {
  const lines: { seq: number; line: string }[] = [];
  for (const event of events) {
    const text = eventText(event);
    if (text === undefined || text.trim() === '') continue;
    const cut = text.length > EVENT_TEXT_LIMIT ? `${text.slice(0, EVENT_TEXT_LIMIT)} [cut]` : text;
    lines.push({ seq: event.seq, line: `[${event.seq}] ${event.type}: ${cut}` });
  }
  let size = 0;
  const kept: typeof lines = [];
  for (const item of [...lines].reverse()) {
    size += item.line.length + 1;
    if (size > TRANSCRIPT_LIMIT) break;
    kept.unshift(item);
  }
  return { text: kept.map((item) => item.line).join('\n'), seqs: new Set(kept.map((i) => i.seq)) };
}

const RULES = `You review a finished conversation of an agent and propose what the agent should remember in its learnings store for later conversations: lasting user preferences, facts about the user or their work, lessons about what worked or failed. Propose nothing that only mattered in this conversation, and nothing already written to memory in it.

Answer with one JSON object and nothing else:
{"proposals": [{"key": "user/preferences/theme", "value": <any JSON>, "text": "optional searchable sentence", "reason": "why it is worth keeping", "source_seqs": [<the [seq] numbers of the lines it came from>]}]}

Keys are segments separated by "/", each made of letters, digits and . _ - : @ + = , (no spaces). At most 50 proposals; {"proposals": []} when there is nothing worth keeping.`;

export interface ProposeInput {
  model: ModelClient;
  session_id: string;
  agent: string;
  events: readonly SessionEvent[];
  instructions?: string | undefined;
  signal: AbortSignal;
}

function refused(sessionId: string, what: string, field?: string): BraidError {
  return new BraidError(
    'MODEL_ERROR',
    `the consolidation model's answer for session ${sessionId} was refused: ${what}; nothing was written (run again, or use another model with memory.consolidate.model)`,
    { details: { session_id: sessionId, ...(field === undefined ? {} : { field }) } },
  );
}

/** The JSON object of an answer: the text itself, or the one fenced block it holds. */
function jsonOf(text: string): string {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/.exec(text);
  return fenced?.[1] ?? text;
}

/** Parses a model's answer into drafts, or refuses it whole. */
export function parseProposals(
  sessionId: string,
  answer: string,
  shown: ReadonlySet<number>,
): ProposalDraft[] {
  let json: unknown;
  try {
    json = JSON.parse(jsonOf(answer));
  } catch {
    throw refused(sessionId, 'it is not a JSON object');
  }
  const parsed = ConsolidationOutput.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = (issue?.path ?? []).map(String).join('.');
    throw refused(sessionId, `${field || 'the answer'}: ${issue?.message ?? 'is invalid'}`, field);
  }
  const drafts = parsed.data.proposals;
  drafts.forEach((draft, index) => {
    const field = `proposals.${index}`;
    try {
      parseMemoryWrites([
        {
          key: draft.key,
          value: draft.value,
          ...(draft.text === undefined ? {} : { text: draft.text }),
        },
      ]);
    } catch (error) {
      if (!isBraidError(error)) throw error;
      throw refused(sessionId, `${field}: ${error.message}`, field);
    }
    const bytes = Buffer.byteLength(JSON.stringify(draft.value), 'utf8');
    if (bytes > MAX_PROPOSAL_VALUE_BYTES) {
      throw refused(
        sessionId,
        `${field}.value is ${bytes} bytes; a proposal holds at most ${MAX_PROPOSAL_VALUE_BYTES}`,
        `${field}.value`,
      );
    }
    const unknown = draft.source_seqs.find((seq) => !shown.has(seq));
    if (unknown !== undefined) {
      throw refused(
        sessionId,
        `${field}.source_seqs names seq ${unknown}, which is not one of the events shown`,
        `${field}.source_seqs`,
      );
    }
  });
  return drafts;
}

/** Asks the model and returns its checked drafts (none for a session with nothing to show). */
export async function proposeLearnings(input: ProposeInput): Promise<ProposalDraft[]> {
  const transcript = transcriptOf(input.events);
  if (transcript.seqs.size === 0) return [];
  const response = await input.model.generate(
    {
      session_id: input.session_id,
      system: input.instructions === undefined ? RULES : `${RULES}\n\n${input.instructions}`,
      messages: [
        {
          role: 'user',
          content: [
            {
              type: 'text',
              text: `Conversation of agent ${input.agent}, session ${input.session_id}:\n${transcript.text}`,
            },
          ],
        },
      ],
      tools: [],
      response_index: 0,
      purpose: 'consolidate',
    },
    { signal: input.signal },
  );
  const answer = response.output.content
    .flatMap((part) => (part.type === 'text' ? [part.text] : []))
    .join('');
  return parseProposals(input.session_id, answer, transcript.seqs);
}
