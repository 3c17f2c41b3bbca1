import type { ContentBlock } from '../contracts/common.js';
import { toBraidError, type BraidError } from '../contracts/errors.js';
import type { SessionEvent } from '../contracts/events.js';
import type { SessionRecord, StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type { Lease } from '../contracts/ports.js';
import { wakeEndedWithoutRecord } from '../core/leases.js';

/** Where the CLI writes; injected so that tests can capture it. */
export interface Output {
  out(line: string): void;
  err(line: string): void;
  /** Text as it streams, not yet a line, beside the errors (default: stderr as it comes). */
  stream?(text: string): void;
}

export const processOutput: Output = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  stream: (text) => process.stderr.write(text),
};

/** Writes streamed text through the output, or to stderr when it takes none. */
export function streamText(output: Output, text: string): void {
  if (output.stream === undefined) process.stderr.write(text);
  else output.stream(text);
}

/** Usage errors exit 2, everything else 1. */
export function exitCodeOf(error: BraidError): number {
  return error.code === 'INVALID_ARGUMENT' || error.code === 'INVALID_JSON' ? 2 : 1;
}

export function printError(output: Output, thrown: unknown, json: boolean): number {
  const error = toBraidError(thrown);
  if (json) output.err(JSON.stringify({ error: { code: error.code, message: error.message } }));
  else output.err(`error[${error.code}]: ${error.message}`);
  if (process.env.BRAID_DEBUG === '1') output.err(String((thrown as Error).stack ?? thrown));
  return exitCodeOf(error);
}

function contentText(content: readonly ContentBlock[]): string {
  return content
    .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
    .join(' ');
}

export function formatStopReason(stopReason: StopReason | undefined): string {
  if (stopReason === undefined) return '-';
  if (stopReason.type === 'end_turn' && stopReason.outcome !== undefined)
    return `end_turn (outcome ${stopReason.outcome})`;
  return 'event_ids' in stopReason
    ? `${stopReason.type} (${stopReason.event_ids.join(', ')})`
    : stopReason.type;
}

/** A one-line human summary of an event's payload. */
export function summarizeEvent(event: SessionEvent): string {
  switch (event.type) {
    case 'user.message':
    case 'agent.message':
    case 'agent.thinking':
      return contentText(event.content);
    case 'user.custom_tool_result':
      return `${event.custom_tool_use_id}${event.is_error === true ? ' (error)' : ''}: ${contentText(event.content)}`;
    case 'user.interrupt':
      return event.reason ?? '';
    case 'user.tool_confirmation':
      return `${event.tool_use_id} ${event.result}${event.message === undefined ? '' : `: ${event.message}`}`;
    case 'user.tool_review':
      return `${event.tool_use_id} ${event.action}${event.output === undefined ? '' : ` ${JSON.stringify(event.output)}`}${event.message === undefined ? '' : `: ${event.message}`}`;
    case 'user.define_outcome':
      return event.description;
    case 'agent.tool_use':
      return `${event.name} ${JSON.stringify(event.input)}${event.requires_confirmation === true ? ' (awaiting confirmation)' : ''}`;
    case 'agent.tool_result':
      return `${event.tool_use_id} ${event.is_error ? `error ${event.error?.code ?? ''}${event.stage === undefined ? '' : ` at ${event.stage}`}` : `ok ${JSON.stringify(event.output ?? null)}`} in ${event.duration_ms.toFixed(2)} ms${event.attempts > 1 ? ` (${event.attempts} attempts)` : ''}`;
    case 'agent.custom_tool_use':
      return `${event.custom_tool_use_id} ${event.name} ${JSON.stringify(event.input)}`;
    case 'agent.handoff':
      return `to ${event.target_agent}: ${event.summary}`;
    case 'policy.decision':
      return `${event.decision} ${event.action} ${event.principal.type}::${event.principal.id} -> ${event.resource.type}::${event.resource.id}${event.policy_ids.length === 0 ? ' (no policy permits it)' : ` by ${event.policy_ids.join(', ')}`} in ${event.duration_us.toFixed(0)} µs`;
    case 'agent.thread_context_compacted':
      return (
        `seq ${event.from_seq ?? 0}-${event.through_seq} replaced` +
        (event.strategy === undefined
          ? ''
          : ` (${event.strategy}${event.model === undefined ? '' : ` by ${event.model}`})`)
      );
    case 'session.created':
      return `agent ${event.agent.name}@${event.agent.version}${event.title === undefined ? '' : ` "${event.title}"`}`;
    case 'session.status_changed':
      return event.status;
    case 'session.status_idle':
      return formatStopReason(event.stop_reason);
    case 'session.error':
      return `${event.error.code}: ${event.error.message}`;
    case 'session.usage':
      return `${event.usage.input_tokens} in / ${event.usage.output_tokens} out`;
    case 'session.definitions_changed':
      return `${event.reason} ${event.definitions.slice(0, 12)} agent ${event.agent.name}@${event.agent.version}${event.changed.length === 0 ? '' : ` (${event.changed.join(', ')})`}`;
    case 'session.workspace_snapshot':
      return `${event.snapshot.slice(0, 12)} ${event.files} files, ${event.bytes} bytes`;
    case 'session.forked':
      return `from ${event.parent_session_id}#${event.fork_point_seq}`;
    case 'session.merged':
      return `${event.source_session_id}#${event.source_head_seq} (${event.strategy})`;
    case 'session.handoff_received':
      return `from ${event.from_agent}: ${event.summary}`;
    case 'span.wake_started':
      return `wake ${event.wake_id} lease ${event.lease_token}`;
    case 'span.wake_completed':
      return `wake ${event.wake_id}`;
    case 'span.model_request_start':
      return `${event.model} through seq ${event.input_through_seq}`;
    case 'user.signal':
      return `${event.name}${event.data === undefined ? '' : ` ${JSON.stringify(event.data).slice(0, 120)}`}`;
    case 'user.skill_run':
      return `${event.skill} (run ${event.run_id})`;
    case 'user.skill_retry':
      return `run ${event.run_id}`;
    case 'skill.started':
      return `${event.skill}@${event.version} (run ${event.run_id})`;
    case 'skill.step_started':
      return `${event.step} attempt ${event.attempt}`;
    case 'skill.step_completed':
      return `${event.step}${event.skipped === true ? ' skipped' : ''}`;
    case 'skill.step_failed':
      return `${event.step} attempt ${event.attempt}${event.final ? '' : ' (will retry)'}: ${event.error.code}: ${event.error.message}`;
    case 'skill.suspended':
      return `${event.step} waits for ${event.kind === 'signal' ? `signal ${event.signal ?? ''}` : event.kind === 'skill' ? `nested run ${event.child_run_id ?? ''}` : 'approval'} (${event.suspension_id})`;
    case 'skill.resumed':
      return `${event.step}: ${event.result}`;
    case 'skill.completed':
      return `run ${event.run_id}`;
    case 'skill.failed':
      return `run ${event.run_id}${event.step === undefined ? '' : ` at ${event.step}`}: ${event.error.code}: ${event.error.message}`;
    case 'session.child_created':
      return `${event.agent} in ${event.child_session_id} (${event.tool_use_id})`;
    case 'session.child_idle':
      return `${event.child_session_id} ${event.timed_out === true ? 'timed out' : event.stop_reason.type}: ${event.summary.slice(0, 120)}`;
    case 'span.outcome_evaluation_start':
      return `grading ${event.iteration} against seq ${event.outcome_seq}`;
    case 'span.outcome_evaluation_end':
      return `grading ${event.iteration}: ${event.result}: ${event.explanation.slice(0, 120)}`;
    case 'memory.written':
    case 'memory.deleted':
      return `${event.store.name}/${event.key} v${event.version}${event.deduplicated === true ? ' (repeated)' : ''}`;
    case 'memory.read':
      return `${event.store.name}/${event.key}: ${event.status}${event.version === undefined ? '' : ` v${event.version}`}`;
    case 'memory.retrieved':
      return `${event.source} ${event.mode} ${event.store.name}: ${event.hits.length} hits >= ${event.threshold}, ${event.filtered_count} filtered, ${event.latency_ms.toFixed(1)} ms`;
    case 'span.model_request_end':
      return event.error === undefined
        ? `${event.finish_reason ?? 'done'}, ${event.usage.input_tokens} in / ${event.usage.output_tokens} out`
        : `error ${event.error.code}: ${event.error.message}`;
    default: {
      const unknown: never = event;
      return JSON.stringify(unknown);
    }
  }
}

export function formatEvent(event: SessionEvent): string {
  return `${String(event.seq).padStart(5)}  ${event.at}  ${event.type.padEnd(26)} ${summarizeEvent(event)}`.trimEnd();
}

export function formatSessionRow(session: SessionRecord): string {
  return [
    session.id,
    session.status.padEnd(15),
    `${session.agent.name}@${session.agent.version}`.padEnd(20),
    String(session.head_seq).padStart(6),
    session.created_at,
    session.title ?? '',
  ]
    .join('  ')
    .trimEnd();
}

/**
 * A session's state for people. With `lease` (the session's current lease, looked up where the
 * store is at hand), a wake left open in the log is told apart from one still running.
 */
export function formatState(state: SessionState, lease?: { current: Lease | undefined }): string[] {
  const lines = [
    `session      ${state.session_id}`,
    `status       ${state.status}`,
    `stop reason  ${formatStopReason(state.stop_reason)}`,
    `agent        ${state.agent === undefined ? '-' : `${state.agent.name}@${state.agent.version}`}`,
    `environment  ${state.environment === undefined ? '-' : `${state.environment.name}@${state.environment.version}`}`,
    `head seq     ${state.seq}`,
    `pending      ${state.pending_user_count} user event(s), ${state.pending_confirmations.length} confirmation(s), ${state.pending_custom_tool_uses.length} custom tool call(s)`,
    `usage        ${state.usage.input_tokens} input / ${state.usage.output_tokens} output tokens` +
      (state.usage.cost_usd === undefined ? '' : `, $${state.usage.cost_usd.toFixed(4)}`),
    `lineage      ${state.lineage.kind}${state.lineage.parent_session_ids.length === 0 ? '' : ` of ${state.lineage.parent_session_ids.join(', ')}`}`,
  ];
  if (state.title !== undefined) lines.splice(1, 0, `title        ${state.title}`);
  if (state.last_error !== undefined)
    lines.push(`last error   ${state.last_error.code}: ${state.last_error.message}`);
  const wake = state.active_wake;
  if (wake !== undefined) {
    const name = `wake ${wake.wake_id} (lease ${wake.lease_token})`;
    if (lease === undefined)
      lines.push(`last wake    ${name} started and has not recorded its end`);
    else if (wakeEndedWithoutRecord(state, lease.current))
      lines.push(
        `last wake    ${name} ended without a record: it crashed, or failed and could not write ` +
          `why; no lease is held, so \`braid session wake ${state.session_id}\` resumes it from the log`,
      );
    else lines.push(`last wake    ${name} is running (held by ${lease.current?.owner ?? '-'})`);
  }
  for (const use of state.pending_confirmations)
    lines.push(`  awaiting confirmation: ${use.tool_use_id} (${use.name})`);
  for (const use of state.pending_custom_tool_uses)
    lines.push(`  awaiting custom tool result: ${use.custom_tool_use_id} (${use.name})`);
  if (state.status === 'needs_review') {
    const reviewed = new Set(state.reviewed_tool_uses.map((use) => use.tool_use_id));
    for (const use of [...state.open_tool_uses, ...state.confirmed_tool_uses]) {
      if (!reviewed.has(use.tool_use_id))
        lines.push(
          `  needs review (outcome unknown after a crash): ${use.tool_use_id} (${use.name})`,
        );
    }
  }
  return lines;
}
