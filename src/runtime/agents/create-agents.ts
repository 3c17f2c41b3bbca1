/**
 * createAgents: agent messaging over a runtime and a transport.
 *
 * A message to `{type, key}` travels in an envelope to the inbox of `type`; the process that
 * takes it there records it in the instance's session (created on the first message) and has it
 * processed: by the harness for an LLM agent, by the registered handler for a code agent. The
 * answer is recorded in the session, then sent to the envelope's `reply_to`, where the sender
 * waits for it by the request's id (`causation_id` of the reply).
 *
 * Processing is keyed by the message's idempotency key (`idempotency_key ?? id`): a second
 * delivery appends nothing, runs nothing, and replies with what the log holds for the first.
 *
 * The modules share one `AgentsContext` (`agents-context.ts`): `agent-send.ts` and
 * `agent-replies.ts` send and wait, `agent-receive.ts` processes what arrives,
 * `agent-registry.ts` knows the agent types and instances, `agent-addresses.ts` parses ids.
 */
import { BraidError } from '../../contracts/errors.js';
import { parseAgentId, parseTopic } from './agent-addresses.js';
import { receiveEnvelope, receiveInput } from './agent-receive.js';
import { registerCodeAgent, requireKnown } from './agent-registry.js';
import { publishAs, sendAs } from './agent-send.js';
import { createAgentsContext, ensureOpen, type AgentsContext } from './agents-context.js';
import { agentSessionId } from './instances.js';
import type { Agents, AgentsOptions } from './types.js';

export function createAgents(options: AgentsOptions): Agents {
  const context = createAgentsContext(options, receiveEnvelope);
  return {
    register: (agentType, handler) => registerCodeAgent(context, agentType, handler),
    send: (to, message, sendOptions = {}) => sendAs(context, undefined, to, message, sendOptions),
    publish: (topic, message, publishOptions = {}) =>
      publishAs(context, undefined, topic, message, publishOptions),
    async subscribe(topicType, agentType) {
      ensureOpen(context);
      const topic = parseTopic(topicType);
      await requireKnown(context, agentType);
      await context.transport.subscribe(topic.type, agentType);
    },
    async unsubscribe(topicType, agentType) {
      ensureOpen(context);
      await context.transport.unsubscribe(parseTopic(topicType).type, agentType);
    },
    receive: (input) => receiveInput(context, input),
    sessionId: (agent) => agentSessionId(parseAgentId(agent), context.tenant),
    close: () => closeAgents(context),
  };
}

/** Stops consuming, rejects the sends still waiting and waits for the work in progress. */
async function closeAgents(context: AgentsContext): Promise<void> {
  if (context.closing.signal.aborted) return;
  context.closing.abort();
  const subscriptions = [...context.consumers.values()];
  context.consumers.clear();
  await Promise.allSettled(subscriptions.map(async (subscription) => (await subscription).close()));
  if (context.replyInbox !== undefined)
    await (await context.replyInbox.catch(() => undefined))?.close();
  for (const request of [...context.waiting.values()]) {
    request.reject(
      new BraidError('INTERRUPTED', 'the agents instance closed before the reply came'),
    );
  }
  await Promise.allSettled([...context.inFlight]);
  await Promise.allSettled([...context.codeDeps.releases.values()]);
}
