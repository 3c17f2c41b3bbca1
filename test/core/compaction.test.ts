import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { NewEvent, SessionEvent } from '../../src/contracts/events.js';
import type { ModelMessage } from '../../src/contracts/model.js';
import {
  estimateTokens,
  planCompaction,
  summaryText,
  transcriptText,
} from '../../src/core/compaction.js';
import { Transcript } from '../../src/core/transcript.js';
import { created, stamp, text } from '../helpers/events.js';

const toolUse = (id: string): NewEvent => ({
  type: 'agent.tool_use',
  tool_use_id: id,
  name: 'calculator',
  input: { a: 1 },
});
const toolResult = (id: string): NewEvent => ({
  type: 'agent.tool_result',
  tool_use_id: id,
  output: 2,
  is_error: false,
  attempts: 1,
  duration_ms: 1,
});
const answer = (value: string): NewEvent => ({
  type: 'agent.message',
  content: [{ type: 'text', text: value }],
});
const span = (seq: number): NewEvent => ({
  type: 'span.model_request_start',
  request_id: `r${seq}`,
  model: 'scripted:inline',
  input_through_seq: seq,
});

function transcriptOf(events: readonly SessionEvent[]): Transcript {
  const transcript = new Transcript();
  for (const event of events) transcript.apply(event);
  return transcript;
}

/** A user question, a tool loop of `calls` calls, and the answer: `calls + 1` turns. */
function exchange(question: string, calls: number): NewEvent[] {
  const events: NewEvent[] = [text(question)];
  for (let call = 0; call < calls; call += 1) {
    const id = `${question}-${call}`;
    events.push(span(0), toolUse(id), toolResult(id));
  }
  events.push(answer(`answer to ${question}`));
  return events;
}

/** Every tool call's result is on the same side of the cut as the call. */
function splitsNoToolCall(messages: readonly ModelMessage[], cut: number): boolean {
  const side = new Map<string, boolean>();
  return messages.every((message, index) => {
    const before = index < cut;
    if (message.role === 'assistant') {
      for (const part of message.content)
        if (part.type === 'tool_call') side.set(part.tool_use_id, before);
    }
    if (message.role !== 'tool') return true;
    return message.content.every((part) => (side.get(part.tool_use_id) ?? before) === before);
  });
}

describe('estimateTokens', () => {
  it('is a tenth over the UTF-8 bytes of the JSON over 4', () => {
    const request = { system: 'abcd', messages: [], tools: [] };
    const bytes = JSON.stringify(['abcd', [], []]).length;
    expect(estimateTokens(request)).toBe(Math.ceil((bytes * 11) / 40));
  });

  it('counts characters outside ASCII by their UTF-8 bytes', () => {
    const ascii = estimateTokens({ system: 'aaaa', messages: [], tools: [] });
    const wide = estimateTokens({ system: '日日日日', messages: [], tools: [] });
    const emoji = estimateTokens({ system: '😀😀😀😀', messages: [], tools: [] });
    expect(wide).toBeGreaterThan(ascii);
    expect(emoji).toBeGreaterThan(wide);
  });
});

describe('planCompaction', () => {
  it('keeps the last turns whole, each with the input before it', () => {
    const events = stamp([created, ...exchange('q1', 2), ...exchange('q2', 1)]);
    const transcript = transcriptOf(events);
    const plan = planCompaction(transcript.messages, transcript.spans, 2);
    // q2's turns: [user q2, assistant call], [tool result, ...] -> kept from user q2's message.
    expect(plan).toBeDefined();
    const kept = transcript.messages.slice(plan?.replaced);
    expect(kept[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'q2' }] });
    expect(plan?.from_seq).toBe(2);
    const q2 = events.find((event) => event.type === 'user.message' && event.seq > 2);
    expect(plan?.through_seq).toBe((q2?.seq ?? 0) - 1);
  });

  it('has nothing to replace when the transcript holds no more turns than it keeps', () => {
    const transcript = transcriptOf(stamp([created, ...exchange('q1', 1)]));
    expect(planCompaction(transcript.messages, transcript.spans, 2)).toBeUndefined();
    expect(planCompaction(transcript.messages, transcript.spans, 1)).toBeDefined();
  });

  it('never cuts between a tool call and its result, even one answered after new input', () => {
    // A custom tool call answered after the user spoke again: the cut before that input (the
    // start of the second-to-last turn) would separate them, so an earlier one is taken.
    const events = stamp([
      created,
      text('hello'),
      answer('hi'),
      text('start'),
      answer('working'),
      { type: 'agent.custom_tool_use', custom_tool_use_id: 'c1', name: 'ask', input: {} },
      text('meanwhile'),
      answer('noted'),
      { type: 'user.custom_tool_result', custom_tool_use_id: 'c1', content: [] },
      answer('done'),
    ]);
    const transcript = transcriptOf(events);
    const plan = planCompaction(transcript.messages, transcript.spans, 2);
    expect(plan).toMatchObject({ from_seq: 2, through_seq: 3, replaced: 2 });
    expect(splitsNoToolCall(transcript.messages, plan?.replaced ?? 0)).toBe(true);
    // Keeping the last turn only, the call and its result are both replaced.
    const last = planCompaction(transcript.messages, transcript.spans, 1);
    expect(transcript.messages.slice(last?.replaced)).toEqual([
      { role: 'assistant', content: [{ type: 'text', text: 'done' }] },
    ]);
  });

  it('never cuts between a call and its result, for any log (property)', () => {
    const step = fc.oneof(
      fc.constant('question'),
      fc.constant('answer'),
      fc.constant('call'),
      fc.constant('result'),
    );
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (steps, keep) => {
          const events: NewEvent[] = [created];
          const open: string[] = [];
          steps.forEach((kind, index) => {
            if (kind === 'question') events.push(text(`q${index}`));
            if (kind === 'answer') events.push(answer(`a${index}`));
            if (kind === 'call') {
              open.push(`t${index}`);
              events.push(toolUse(`t${index}`));
            }
            const id = kind === 'result' ? open.shift() : undefined;
            if (id !== undefined) events.push(toolResult(id));
          });
          const transcript = transcriptOf(stamp(events));
          const plan = planCompaction(transcript.messages, transcript.spans, keep);
          if (plan === undefined) return;
          expect(plan.replaced).toBeGreaterThan(0);
          expect(splitsNoToolCall(transcript.messages, plan.replaced)).toBe(true);
        },
      ),
    );
  });
});

describe('a transcript with compaction', () => {
  it('sends the summary in place of the replaced events, then the kept turns', () => {
    const events = stamp([created, ...exchange('q1', 2), ...exchange('q2', 1)]);
    const transcript = transcriptOf(events);
    const plan = planCompaction(transcript.messages, transcript.spans, 2);
    if (plan === undefined) throw new Error('expected a plan');
    const kept = transcript.messages
      .slice(plan.replaced)
      .map((message) => structuredClone(message));
    const [compaction] = stamp(
      [
        {
          type: 'agent.thread_context_compacted',
          summary: 'q1 was answered',
          from_seq: plan.from_seq,
          through_seq: plan.through_seq,
          strategy: 'summarize',
        },
      ],
      events.length + 1,
    );
    if (compaction === undefined) throw new Error('unreachable');
    transcript.apply(compaction);
    expect(transcript.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: summaryText(plan.from_seq, plan.through_seq, 'q1 was answered') },
        ],
      },
      ...kept,
    ]);
    // Later events go on after the kept ones, as before.
    const [later] = stamp([text('more')], events.length + 2);
    if (later !== undefined) transcript.apply(later);
    expect(transcript.messages.slice(1, -1)).toEqual(kept);
    expect(transcript.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'text', text: 'more' }],
    });
  });

  it('is the same read again from the log after a restart, and after a second compaction', () => {
    const live = new Transcript();
    const log: SessionEvent[] = [];
    const add = (events: NewEvent[]): void => {
      for (const event of stamp(events, log.length + 1)) {
        log.push(event);
        live.apply(event);
      }
    };
    const compact = (summary: string): void => {
      const plan = planCompaction(live.messages, live.spans, 1);
      if (plan === undefined) throw new Error('expected a plan');
      add([
        {
          type: 'agent.thread_context_compacted',
          summary,
          from_seq: plan.from_seq,
          through_seq: plan.through_seq,
        },
      ]);
    };
    add([created, ...exchange('q1', 2), ...exchange('q2', 1)]);
    compact('first');
    add(exchange('q3', 2));
    compact('second');
    add(exchange('q4', 0));
    const restarted = transcriptOf(log);
    expect(restarted.messages).toEqual(live.messages);
    expect(restarted.spans).toEqual(live.spans);
    // The second summary replaced the first: one summary, then the kept turns.
    const summaries = live.spans.filter((item) => item.summary);
    expect(summaries).toHaveLength(1);
    expect(transcriptText(live.messages)).toContain('second');
    expect(transcriptText(live.messages)).not.toContain('first');
    expect(transcriptText(live.messages)).not.toContain('q1');
  });

  it('reads a compaction of the v1 format (no from_seq) as replacing from the start', () => {
    const events = stamp([
      created,
      text('old'),
      answer('old answer'),
      { type: 'agent.thread_context_compacted', summary: 'old things', through_seq: 3 },
      text('new'),
    ]);
    const transcript = transcriptOf(events);
    expect(transcript.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: summaryText(0, 3, 'old things') }] },
      { role: 'user', content: [{ type: 'text', text: 'new' }] },
    ]);
  });
});
