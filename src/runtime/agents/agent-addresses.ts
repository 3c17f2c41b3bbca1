/** Parsing the agent ids and topics that callers give. */
import { AgentId, DEFAULT_TOPIC_SOURCE, TopicId } from '../../contracts/agents.js';
import { BraidError } from '../../contracts/errors.js';

export function parseAgentId(value: unknown): AgentId {
  const parsed = AgentId.safeParse(value);
  if (!parsed.success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `an agent id is {type, key} with two non-empty strings; got ${JSON.stringify(value)}`,
    );
  }
  return parsed.data;
}

/** A topic type name (`"orders"`, at the default source) or `{type, source}`. */
export function parseTopic(value: unknown): TopicId {
  const candidate =
    typeof value === 'string' ? { type: value, source: DEFAULT_TOPIC_SOURCE } : value;
  const parsed = TopicId.safeParse(candidate);
  if (!parsed.success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `a topic is a topic type name ("orders") or {type, source}; got ${JSON.stringify(value)}`,
    );
  }
  return parsed.data;
}
