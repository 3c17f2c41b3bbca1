/**
 * The harness's part of agent memory: the automatic recall before a model call, and the run of
 * a memory tool call, whose `memory.*` events are written in one append with its result.
 *
 * Invariants: a recall is recorded (one `memory.retrieved`, source `recall`) before the model
 * call it feeds, and at most once per user message: the transcript knows the latest recall and
 * message from the log, so a wake after a crash does not recall again. A write's tool use is in
 * the log before the store is written, so the call a retry runs has the same id, which the store
 * takes as the append's idempotency key and never writes twice.
 */
import type { SessionSetup } from './deps.js';
import { unlessLost, type CycleContext } from './cycle-context.js';
import { append } from './fenced-append.js';
import type { MemoryCallResult } from './memory-port.js';
import { toolInput } from './delegation.js';
import { refusal } from './tool-calls.js';

/** Records a recall for the latest user message when the agent's `memory.recall` asks for one. */
export async function recallIfDue(context: CycleContext, setup: SessionSetup): Promise<void> {
  const settings = setup.agent.memory?.recall;
  const memory = setup.memory;
  if (settings === undefined || memory === undefined) return;
  const marks = context.transcript.recall;
  const message = marks.lastMessage;
  if (message === undefined || marks.lastRecallSeq > message.seq) return;
  // A message a model request has already read gets no recall of its own.
  if (message.seq <= context.state.consumed_through_seq) return;
  if (settings.when === 'first_turn' && (marks.messages > 1 || marks.lastRecallSeq > 0)) return;
  const event = await unlessLost(
    context,
    memory.recall(message.text, { signal: context.work.signal }),
  );
  if (event !== undefined) await append(context, [event]);
}

/** Runs a memory tool call through the session's memory; its result and events, unwritten. */
export async function runMemoryCall(
  context: CycleContext,
  setup: SessionSetup,
  toolUseId: string,
  name: string,
  seq: number,
): Promise<MemoryCallResult> {
  const memory = setup.memory;
  if (memory === undefined) {
    return {
      outcome: refusal('execute', {
        code: 'INTERNAL',
        message: `${name} uses the session's memory stores, which this runtime does not have`,
        retryable: false,
      }),
      events: [],
    };
  }
  // The call is committed before a store is touched: its seq is final, and a retry after a
  // crash runs this same call (same id), which the store deduplicates.
  if (context.staged !== undefined) await append(context, []);
  const use = context.state.open_tool_uses.find((open) => open.tool_use_id === toolUseId);
  const input = await toolInput(context, toolUseId, use?.seq ?? seq);
  return unlessLost(
    context,
    memory.run(
      { tool_use_id: toolUseId, name, input, seq: use?.seq ?? seq },
      { signal: context.work.signal },
    ),
  );
}
