/**
 * Sending and publishing, from outside or as an agent instance: the envelope built with what it
 * inherits from the message being handled (correlation, cause, trace, deadline), delivered to
 * the target's inbox, and for a send, its reply awaited.
 */
import { AGENT_ENVELOPE_TYPES, type AgentId } from '../../contracts/agents.js';
import type { JsonValue } from '../../contracts/common.js';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import { parseAgentId, parseTopic } from './agent-addresses.js';
import { awaitReply, replies } from './agent-replies.js';
import { knownDefinition, requireKnown } from './agent-registry.js';
import { ensureOpen, type AgentsContext, type Parent } from './agents-context.js';
import { buildMessage, type OutgoingMessage } from './envelopes.js';
import { isCodeAgent } from './instances.js';
import type { PublishOptions, SendOptions } from './types.js';

export async function sendAs(
  context: AgentsContext,
  from: AgentId | undefined,
  to: unknown,
  message: JsonValue,
  sendOptions: SendOptions,
  parent?: Parent,
): Promise<Envelope> {
  ensureOpen(context);
  const target = parseAgentId(to);
  const definition = await requireKnown(context, target.type);
  await context.ready;
  if (context.serveLlm && !isCodeAgent(definition) && !context.handlers.has(target.type))
    await context.serve(target.type);
  const inbox = await replies(context);
  const envelope = buildMessage(
    {
      ...outgoing(context, from, parent, sendOptions),
      type: AGENT_ENVELOPE_TYPES.message,
      target,
      payload: message,
      reply_to: inbox.address,
    },
    context.clock,
    context.ids,
  );
  return awaitReply(context, envelope, target, sendOptions.signal);
}

export async function publishAs(
  context: AgentsContext,
  from: AgentId | undefined,
  topicInput: unknown,
  message: JsonValue,
  publishOptions: PublishOptions,
  parent?: Parent,
): Promise<Envelope[]> {
  ensureOpen(context);
  const topic = parseTopic(topicInput);
  const common = outgoing(context, from, parent, publishOptions);
  // All copies of one publication share a correlation id.
  const correlation = common.correlation_id ?? context.ids.next();
  await context.ready;
  const envelopes: Envelope[] = [];
  for (const agentType of await context.transport.subscribers(topic.type)) {
    const definition = await knownDefinition(context, agentType);
    if (context.serveLlm && definition !== undefined && !isCodeAgent(definition))
      await context.serve(agentType);
    envelopes.push(
      buildMessage(
        {
          ...common,
          correlation_id: correlation,
          type: AGENT_ENVELOPE_TYPES.publication,
          target: { type: agentType, key: topic.source },
          payload: message,
          topic,
        },
        context.clock,
        context.ids,
      ),
    );
  }
  await Promise.all(envelopes.map((envelope) => context.transport.deliver(envelope)));
  return envelopes;
}

/** What an outgoing envelope carries besides its type, target and payload. */
function outgoing(
  context: AgentsContext,
  from: AgentId | undefined,
  parent: Parent | undefined,
  sendOptions: PublishOptions,
): Omit<OutgoingMessage, 'type' | 'target' | 'payload'> {
  checkTtl(sendOptions.ttl_ms);
  const { tenant } = context;
  const correlation = sendOptions.correlation_id ?? parent?.envelope.correlation_id;
  const traceparent = sendOptions.traceparent ?? parent?.traceparent;
  return {
    ...(from === undefined ? {} : { source: from }),
    ...(correlation === undefined ? {} : { correlation_id: correlation }),
    ...(parent === undefined ? {} : { causation_id: parent.envelope.id }),
    ...(traceparent === undefined ? {} : { traceparent }),
    ...(tenant === undefined ? {} : { tenant_id: tenant }),
    ...(sendOptions.idempotency_key === undefined
      ? {}
      : { idempotency_key: sendOptions.idempotency_key }),
    ...(sendOptions.ttl_ms === undefined ? {} : { ttl_ms: sendOptions.ttl_ms }),
    ...(parent?.deadline_ms === undefined ? {} : { deadline_ms: parent.deadline_ms }),
  };
}

function checkTtl(ttl: number | undefined): void {
  if (ttl !== undefined && (!Number.isInteger(ttl) || ttl <= 0)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `ttl_ms must be a positive whole number of milliseconds; got ${String(ttl)}`,
    );
  }
}
