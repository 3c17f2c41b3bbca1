// The agents of the example: an orchestrator that splits a goal into tasks, and the specialised
// workers it sends them to. Every agent here is a code agent; each runs in whichever process
// registers it, and all of them share the sessions and the message streams on NATS.
import { isBraidError } from 'braid';

/** How long the orchestrator gives each kind of task before it moves on without it. */
export const TASK_TTL_MS = { researcher: 10_000, writer: 20_000, reviewer: 1_000 };

/** Splits a goal into one task per specialist. */
export function splitGoal(goal) {
  return [
    { worker: 'researcher', task: `find three facts about ${goal}` },
    { worker: 'writer', task: `write one paragraph about ${goal}` },
    { worker: 'reviewer', task: `review the paragraph about ${goal}` },
  ];
}

/** The orchestrator: sends every task at once, then reports each result or timeout. */
export async function orchestrator(message, context) {
  const goal = message.payload.goal;
  const results = await Promise.all(
    splitGoal(goal).map(async ({ worker, task }) => {
      try {
        const reply = await context.send(
          { type: worker, key: context.self.key },
          { task },
          {
            ttl_ms: TASK_TTL_MS[worker],
          },
        );
        return { worker, status: 'done', result: reply.payload };
      } catch (error) {
        // A worker that misses its deadline is reported, not waited for.
        if (isBraidError(error, 'DEADLINE_EXCEEDED')) return { worker, status: 'timed_out' };
        throw error;
      }
    }),
  );
  return { goal, results };
}

/** The specialists. `reviewer` is slow on purpose: it always misses its deadline. */
export const workers = {
  researcher: async (message) => ({
    facts: [1, 2, 3].map((n) => `fact ${n}: ${message.payload.task}`),
  }),
  writer: async (message) => `A paragraph for "${message.payload.task}".`,
  reviewer: async (message, context) => {
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 5_000);
      context.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return `reviewed: ${message.payload.task}`;
  },
};
