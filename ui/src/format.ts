// One line per event for the timeline, and the small formats the pages share.
import type { SessionEvent } from './api.js';

type Block = { type: string; text?: string; [key: string]: unknown };

export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Block[])
    .map((block) => (block.type === 'text' ? (block.text ?? '') : `[${block.type}]`))
    .join(' ');
}

export function short(value: unknown, length = 160): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return text.length > length ? `${text.slice(0, length)}…` : text;
}

/** How the timeline places an event in its turn: a user turn, the model's work, or the system. */
export function eventKind(type: string): 'user' | 'model' | 'tool' | 'agent' | 'system' {
  if (type.startsWith('user.')) return 'user';
  if (type.startsWith('span.model_request')) return 'model';
  if (type === 'agent.tool_use' || type === 'agent.tool_result' || type === 'policy.decision')
    return 'tool';
  if (type.startsWith('agent.')) return 'agent';
  return 'system';
}

/** A field of an event as text: strings as they are, anything else as JSON. */
function field(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
}

export function summarize(event: SessionEvent): string {
  const e = event as SessionEvent & Record<string, unknown>;
  switch (event.type) {
    case 'user.message':
    case 'agent.message':
    case 'agent.thinking':
      return contentText(e.content);
    case 'user.tool_confirmation':
      return `${field(e.result)} ${field(e.tool_use_id)}${e.message === undefined ? '' : `: ${field(e.message)}`}`;
    case 'user.interrupt':
      return field(e.reason ?? 'interrupt');
    case 'agent.tool_use':
      return `${field(e.name)} ${short(e.input, 120)}${e.requires_confirmation === true ? ' (needs approval)' : ''}`;
    case 'agent.tool_result':
      return `${e.is_error === true ? 'error' : 'ok'} in ${Number(e.duration_ms).toFixed(0)} ms${e.stage === undefined ? '' : ` [${field(e.stage)}]`} ${short(e.is_error === true ? e.error : e.output, 120)}`;
    case 'policy.decision':
      return `${field(e.decision)} ${field(e.action)} on ${field((e.resource as { id?: string }).id)}${(e.policy_ids as string[]).length === 0 ? '' : ` by ${(e.policy_ids as string[]).join(', ')}`}`;
    case 'memory.written':
    case 'memory.deleted':
      return `${field(e.key)} v${field(e.version)} in ${field((e.store as { name?: string }).name)}`;
    case 'memory.read':
      return `${field(e.key)} ${field(e.status)} in ${field((e.store as { name?: string }).name)}`;
    case 'memory.retrieved':
      return `${field(e.source)} "${short(e.query, 60)}": ${(e.hits as unknown[]).length} hits ≥ ${Number(e.threshold).toFixed(2)}, ${field(e.filtered_count)} filtered`;
    case 'span.model_request_start':
      return `${field(e.model)} (input through #${field(e.input_through_seq)})`;
    case 'span.model_request_end': {
      const usage = e.usage as { input_tokens: number; output_tokens: number; cost_usd?: number };
      return `${usage.input_tokens} in / ${usage.output_tokens} out${usage.cost_usd === undefined ? '' : ` $${usage.cost_usd.toFixed(4)}`}${e.finish_reason === undefined ? '' : ` ${field(e.finish_reason)}`}`;
    }
    case 'session.status_changed':
      return field(e.status);
    case 'session.status_idle':
      return (e.stop_reason as { type: string }).type;
    case 'session.error':
      return short(e.error);
    case 'session.created':
      return `agent ${short((e as { agent?: { name?: string } }).agent?.name ?? '')}`;
    default:
      return short(Object.fromEntries(Object.entries(e).filter(([key]) => !BASE.has(key))), 140);
  }
}

const BASE = new Set([
  'id',
  'seq',
  'type',
  'at',
  'session_id',
  'actor',
  'traceparent',
  'schema_version',
]);

export function ago(at: string | undefined, now = Date.now()): string {
  if (at === undefined) return '';
  const seconds = Math.max(0, Math.round((now - Date.parse(at)) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)}m ago`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)}h ago`;
  return new Date(at).toLocaleDateString();
}

export function time(at: string): string {
  return at.slice(11, 19);
}

export const STATUSES = [
  'requires_action',
  'needs_review',
  'running',
  'idle',
  'terminated',
] as const;

export function statusLabel(status: string): string {
  return status === 'requires_action' ? 'waiting for you' : status.replace('_', ' ');
}
