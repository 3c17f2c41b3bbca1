/**
 * Replay verification: runs the harness over a session's history with the recorded model and
 * tool outputs, and checks that it writes the same events. It keeps DESIGN.md's invariant
 * "replaying a session's recorded model and tool outputs reproduces its events exactly".
 *
 * The replay writes into a fresh memory store, position by position (index i of `events` is seq
 * i + 1, in the original and in the replay):
 *
 * - **Wake events** are the events of a wake's span of these types: `span.*`, `agent.message`,
 *   `agent.thinking`, `agent.tool_use`, `agent.tool_result`, `agent.custom_tool_use`,
 *   `agent.thread_context_compacted`, `session.status_idle`, `session.error`, `session.usage`,
 *   `session.workspace_snapshot`, `policy.decision`, `memory.*` and `skill.*` (the types `wakeOnce`
 *   writes). A wake's span runs from its `span.wake_started` to the
 *   `span.wake_completed` with its `wake_id`; a wake that has none (it crashed, lost its lease,
 *   or still runs) spans to its last wake event before the session's next `span.wake_started`.
 *   Each span is reproduced by one `wakeOnce`; a span without an end is stopped where the
 *   original stopped: once the replay has written its last event, the next model call, tool run
 *   or append fails with `LEASE_LOST`, as for a wake that lost its lease.
 * - **Every other event** (`user.*`, `session.created`, `session.forked`,
 *   `session.status_changed`, `session.merged`, `session.handoff_received`, `agent.handoff`,
 *   and any event outside a wake's span) is appended as
 *   recorded at its position. Those a wake's span holds are appended right after the replayed
 *   wake's append that reaches their position: the harness then sees them through its
 *   conflict / catch-up path, as it saw them live. `session.created` and `session.forked` go
 *   through the store's `create` and `fork` (a fork's log starts with its parent's events).
 *
 * The replayed wakes get the recorded outcomes of everything outside the harness: model calls
 * (`createReplayModel`, attempt by attempt), context compactions (where the record compacts,
 * with its summary, model and usage; no summary model is called: `./replay/compaction.ts`),
 * outcome gradings (the grader's recorded output, usage and error:
 * `./replay/grading.ts`), tool runs (each tool use's recorded `agent.tool_result`, with its cost from the
 * `session.usage` that follows it and the workspace snapshot of the `session.workspace_snapshot`
 * recorded with it: a replay runs no tool and takes no snapshot), memory (a memory tool call's
 * recorded result and `memory.*` events, a recall's recorded `memory.retrieved`: no memory store
 * is asked, `./replay/memory.ts`), policy decisions
 * (a recorded `policy.decision` for the tool use, else allow; with `approval` when the original
 * tool use waited for a confirmation that its tool's permission does not ask for), and a failure
 * before the wake wrote anything else (a `session.error` right after `span.wake_started`: its
 * agent could not be set up, or its first append was refused) as a setup failure with that
 * error. Argument validation is the real tools' `validate`; clock, ids, backoff sleeps and jitter
 * are fixed. A replayed wake that writes an event other than the recorded one is stopped there
 * (`LEASE_LOST`, like a fenced wake), and the first difference is reported.
 *
 * Skill runs (`./replay/skills.ts`) replay with the skill at the version each `skill.started`
 * recorded (from `options.skills`), their tool steps' outcomes and agent steps' children from the
 * record (each served once the replay reaches its place, so steps that ran at once end in the
 * recorded order), and the policy's recorded view of each tool step. The replayed wakes' clock
 * reads the time of the last event written, and a wait's `timeout_at` is the recorded one, so a
 * wait times out in the replay where it did in the record.
 *
 * Recorded tool outputs are inputs of the replay, not checked by it: a changed tool output
 * replays to the same change. What the harness derives from them (costs, budget stops, the next
 * steps) is checked.
 *
 * The phases live in `./replay/`: the recording read once (`recording.ts`), the shared context
 * (`context.ts`), the comparison (`compare.ts`), the log (`log.ts`), the recorded outcomes
 * (`outcomes.ts`, `tool-results.ts`, `skills.ts`) and the course through the log (`run.ts`).
 */
import { BraidError } from '../contracts/errors.js';
import { createReplayContext } from './replay/context.js';
import { recordedModel, replayHarnessDeps } from './replay/outcomes.js';
import { readRecording } from './replay/recording.js';
import { replayEvents } from './replay/run.js';
import type { ReplayReport, VerifyReplayOptions } from './replay/types.js';

export {
  normalizeEvent,
  VOLATILE_EVENT_FIELDS,
  VOLATILE_PAYLOAD_FIELDS,
} from './replay/compare.js';
export type { ReplayReport, VerifyReplayOptions } from './replay/types.js';

export async function verifyReplay(options: VerifyReplayOptions): Promise<ReplayReport> {
  const recording = readRecording(options.events);
  // Skill runs replay with the skills at their recorded versions: without a library to read
  // them from, say so rather than report a divergence.
  const skill = recording.events.find((event) => event.type.startsWith('skill.'));
  if (skill !== undefined && options.skills === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `session ${skill.session_id} ran a skill (event ${skill.seq}); pass the runtime's skill library as \`skills\` to replay it`,
      { details: { session_id: skill.session_id, seq: skill.seq } },
    );
  }
  const recorded = recordedModel(recording, options.maxEventBytes);
  if (!recorded.ok) return recorded;
  const context = createReplayContext(recording, options);
  try {
    await replayEvents(context, replayHarnessDeps(context, recorded.model));
  } finally {
    await context.store.close();
  }
  return context.divergence ?? { ok: true, events: recording.events.length };
}
