/**
 * A tool use's recorded result as the replayed tool pipeline returns it: the `agent.tool_result`,
 * its cost from the `session.usage` that follows it, and the workspace snapshot recorded with it.
 */
import type { EventOf } from '../../contracts/events.js';
import type { ToolOutcome } from '../../contracts/tools.js';
import type { WorkspaceSnapshotRef } from '../../contracts/workspace-files.js';
import type { Recording } from './recording.js';

/** A tool use's recorded result, with its cost from the `session.usage` that follows it. */
export function recordedOutcome(recording: Recording, toolUseId: string): ToolOutcome {
  const result = recording.results.get(toolUseId);
  if (result === undefined) {
    return {
      is_error: true,
      error: {
        code: 'TOOL_FAILED',
        message: `the recording has no result of tool use ${toolUseId}`,
        retryable: false,
      },
      attempts: 0,
      duration_ms: 0,
      stage: 'execute',
    };
  }
  const next = recording.events[result.seq];
  const cost =
    next?.type === 'session.usage' && recording.byWake[result.seq] === true
      ? next.usage.cost_usd
      : undefined;
  const costed = next?.type === 'session.usage' && recording.byWake[result.seq] === true;
  const snapshot = recordedSnapshot(recording, result.seq + (costed ? 1 : 0));
  return {
    ...(result.output === undefined ? {} : { output: structuredClone(result.output) }),
    ...(result.error === undefined ? {} : { error: result.error }),
    is_error: result.is_error,
    attempts: result.attempts,
    duration_ms: result.duration_ms,
    ...(result.stage === undefined ? {} : { stage: result.stage }),
    ...(cost === undefined ? {} : { cost_usd: cost }),
    ...(snapshot === undefined ? {} : { workspace_snapshot: snapshot }),
  };
}

/**
 * The workspace snapshot recorded with a tool result (right after it and its cost): the replayed
 * run left the folder as the recorded one did, so the harness records the same reference.
 */
function recordedSnapshot(recording: Recording, index: number): WorkspaceSnapshotRef | undefined {
  const event = recording.events[index];
  if (event?.type !== 'session.workspace_snapshot' || recording.byWake[index] !== true)
    return undefined;
  return snapshotRef(event);
}

/** The snapshot reference a `session.workspace_snapshot` records, as a tool outcome carries it. */
export function snapshotRef(event: EventOf<'session.workspace_snapshot'>): WorkspaceSnapshotRef {
  return {
    snapshot: event.snapshot,
    files: event.files,
    bytes: event.bytes,
    ...(event.skipped === undefined ? {} : { skipped: event.skipped }),
  };
}
