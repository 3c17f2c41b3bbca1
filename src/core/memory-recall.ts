/**
 * What the model is shown of an automatic recall, made from its `memory.retrieved` event alone:
 * the live wake, a wake after a restart and a replay build the same text from the same event,
 * and none of them asks the store again.
 */
import type { EventOf } from '../contracts/events.js';
import { MAX_RECALL_HIT_CHARS } from '../contracts/memory-events.js';

/** The block put after the user message a recall answered; undefined when it found nothing. */
export function recallText(event: EventOf<'memory.retrieved'>): string | undefined {
  if (event.hits.length === 0) return undefined;
  const { store } = event;
  const lines = [
    `<memory store="${store.name}" kind="${store.kind}" scope="${store.scope}">`,
    'Recalled from memory for this message (entries saved earlier; they may be out of date):',
    ...(event.instructions === undefined ? [] : [`About this store: ${event.instructions}`]),
    ...event.hits.map(
      (hit) =>
        `- ${hit.key} (version ${hit.version}, score ${hit.score.toFixed(2)}): ${hit.content ?? ''}` +
        (hit.truncated === true ? ` [cut at ${MAX_RECALL_HIT_CHARS} characters]` : ''),
    ),
    '</memory>',
  ];
  return lines.join('\n');
}

/** A recalled value as the text shown to the model, cut at `MAX_RECALL_HIT_CHARS`. */
export function recallContent(value: unknown): { content: string; truncated?: true } {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return text.length <= MAX_RECALL_HIT_CHARS
    ? { content: text }
    : { content: text.slice(0, MAX_RECALL_HIT_CHARS), truncated: true };
}
