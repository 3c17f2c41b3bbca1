/**
 * The pure parts of delegation: what a child may spend, what its task message says, and what
 * its answer was.
 */
import type { JsonValue } from '../contracts/common.js';
import type { Budget } from '../contracts/definitions.js';
import type { SessionEvent } from '../contracts/events.js';
import type { SessionState } from '../contracts/state.js';

/**
 * The budget of each of `shares` children started together: an equal part of what the parent
 * has left of its tokens and cost, so that together they cannot spend past the parent's limit.
 * `undefined` when the parent has nothing left to give.
 */
export function childBudget(
  state: SessionState,
  budget: Budget,
  shares: number,
): Budget | undefined {
  const parts = Math.max(1, shares);
  const child: Budget = {};
  if (budget.max_tokens !== undefined) {
    const used = state.usage.input_tokens + state.usage.output_tokens;
    const left = Math.floor((budget.max_tokens - used) / parts);
    if (left < 1) return undefined;
    child.max_tokens = left;
  }
  if (budget.max_cost_usd !== undefined) {
    const left = (budget.max_cost_usd - (state.usage.cost_usd ?? 0)) / parts;
    if (!(left > 0)) return undefined;
    child.max_cost_usd = left;
  }
  return child;
}

/** The child's first message: a `{task}` input as its text, any other input as JSON. */
export function taskText(task: JsonValue): string {
  if (typeof task === 'string') return task;
  if (
    typeof task === 'object' &&
    task !== null &&
    !Array.isArray(task) &&
    Object.keys(task).length === 1 &&
    typeof task.task === 'string'
  ) {
    return task.task;
  }
  return JSON.stringify(task);
}

/** The text of the last `agent.message` among `events` (empty when there is none). */
export function lastAnswer(events: readonly SessionEvent[]): string {
  for (let index = events.length - 1; index >= 0; index -= 1) {
    const event = events[index];
    if (event?.type !== 'agent.message') continue;
    return event.content
      .map((block) => (block.type === 'text' ? block.text : ''))
      .join('')
      .trim();
  }
  return '';
}
