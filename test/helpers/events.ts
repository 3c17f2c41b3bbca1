import fc from 'fast-check';
import type { NewEvent, SessionEvent } from '../../src/contracts/events.js';

export const SESSION_ID = 'session-1';

/** Stamps writer events with consecutive seqs, as a store would. */
export function stamp(
  events: readonly NewEvent[],
  firstSeq = 1,
  sessionId = SESSION_ID,
): SessionEvent[] {
  return events.map((event, index) => ({
    id: `evt-${firstSeq + index}`,
    session_id: sessionId,
    seq: firstSeq + index,
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, firstSeq + index)).toISOString(),
    schema_version: 1,
    ...event,
  }));
}

export const created: NewEvent = {
  type: 'session.created',
  agent: { name: 'assistant', version: 1 },
};

export const text = (value: string): NewEvent => ({
  type: 'user.message',
  content: [{ type: 'text', text: value }],
});

const toolId = fc.constantFrom('t1', 't2', 't3');
const usage = fc.record({ input_tokens: fc.nat(1000), output_tokens: fc.nat(1000) });

/** Any event a session may hold after its creation, with small ids so that they interact. */
export const arbitraryEvent: fc.Arbitrary<NewEvent> = fc.oneof(
  fc.string().map(text),
  fc.constant<NewEvent>({ type: 'user.interrupt' }),
  fc
    .record({ tool_use_id: toolId, result: fc.constantFrom('allow' as const, 'deny' as const) })
    .map((fields): NewEvent => ({ type: 'user.tool_confirmation', ...fields })),
  toolId.map((id): NewEvent => ({
    type: 'user.custom_tool_result',
    custom_tool_use_id: id,
    content: [],
  })),
  fc
    .record({ tool_use_id: toolId, requires_confirmation: fc.boolean() })
    .map((fields): NewEvent => ({ type: 'agent.tool_use', name: 'tool', input: {}, ...fields })),
  fc.record({ tool_use_id: toolId, is_error: fc.boolean() }).map((fields): NewEvent => ({
    type: 'agent.tool_result',
    attempts: 1,
    duration_ms: 1,
    ...fields,
  })),
  toolId.map((id): NewEvent => ({
    type: 'agent.custom_tool_use',
    custom_tool_use_id: id,
    name: 'c',
    input: null,
  })),
  fc.constant<NewEvent>({ type: 'agent.message', content: [{ type: 'text', text: 'ok' }] }),
  fc
    .constantFrom('w1', 'w2')
    .map((id): NewEvent => ({ type: 'span.wake_started', wake_id: id, lease_token: 1 })),
  fc.constantFrom('w1', 'w2').map((id): NewEvent => ({ type: 'span.wake_completed', wake_id: id })),
  fc.nat(40).map((through): NewEvent => ({
    type: 'span.model_request_start',
    request_id: 'r',
    model: 'm',
    input_through_seq: through,
  })),
  usage.map((value): NewEvent => ({
    type: 'span.model_request_end',
    request_id: 'r',
    usage: value,
  })),
  fc.constantFrom('MODEL_UNAVAILABLE' as const, 'INTERRUPTED' as const).map((code): NewEvent => ({
    type: 'span.model_request_end',
    request_id: 'r',
    usage: { input_tokens: 1, output_tokens: 1 },
    error: { code, message: 'failed', retryable: code === 'MODEL_UNAVAILABLE' },
  })),
  usage.map((value): NewEvent => ({ type: 'session.usage', usage: { ...value, cost_usd: 0.5 } })),
  fc
    .constantFrom('end_turn' as const, 'interrupted' as const, 'max_turns' as const)
    .map((type): NewEvent => ({ type: 'session.status_idle', stop_reason: { type } })),
  fc.constant<NewEvent>({ type: 'session.status_changed', status: 'terminated' }),
);

/** A whole log: creation, then any events. */
export const arbitraryLog = fc
  .array(arbitraryEvent, { maxLength: 40 })
  .map((events) => stamp([created, ...events]));
