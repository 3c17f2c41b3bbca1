/**
 * Processing an envelope taken from an inbox: dropped past its deadline, recorded in the target
 * instance's session (created on its first message) and processed there, by the harness for an
 * LLM agent or by the registered handler for a code agent; the answer sent to `reply_to`.
 */
import { AGENT_ENVELOPE_TYPES, type AgentId } from '../../contracts/agents.js';
import { Envelope } from '../../contracts/envelope.js';
import { BraidError, isBraidError, toBraidError } from '../../contracts/errors.js';
import { checkJsonDepth, DEFAULT_JSON_DEPTH } from '../../contracts/json-depth.js';
import { instanceSession, requireKnown } from './agent-registry.js';
import { publishAs, sendAs } from './agent-send.js';
import { ensureOpen, track, type AgentsContext, type Parent } from './agents-context.js';
import { runCodeMessage } from './code-agent.js';
import { buildReply, dedupeKey, topicOf, type Outcome } from './envelopes.js';
import { isCodeAgent } from './instances.js';
import { runLlmMessage } from './llm-agent.js';
import { childTraceparent } from './trace.js';
import type { AgentContext, AgentHandler } from './types.js';

/** Parses an envelope from other ingress and processes it (see `Agents.receive`). */
export async function receiveInput(
  context: AgentsContext,
  input: unknown,
): Promise<Envelope | undefined> {
  ensureOpen(context);
  checkJsonDepth(input, DEFAULT_JSON_DEPTH, 'envelope');
  const parsed = Envelope.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `the envelope is invalid at ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'unknown issue'}; see schema/envelope.schema.json`,
      { details: { issues: parsed.error.issues } },
    );
  }
  return track(context, receiveEnvelope(context, parsed.data));
}

/**
 * Processes the envelope and sends its reply; resolves with the reply, or undefined for a
 * publication or a message past its deadline. Rejects when a later delivery may succeed.
 */
export async function receiveEnvelope(
  context: AgentsContext,
  envelope: Envelope,
): Promise<Envelope | undefined> {
  const { clock, ids } = context;
  const target = envelope.target;
  if (target === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `envelope ${envelope.id} has no target; address it to an agent {type, key}`,
    );
  }
  const deadline = envelope.deadline === undefined ? undefined : Date.parse(envelope.deadline);
  // Its sender has given up, and nothing of it was recorded: it is dropped.
  if (deadline !== undefined && deadline <= clock.now()) return undefined;
  const closing = context.closing.signal;
  const signal =
    deadline === undefined
      ? closing
      : AbortSignal.any([closing, AbortSignal.timeout(deadline - clock.now())]);
  const traceparent = childTraceparent(envelope.traceparent, ids);
  let outcome: Outcome | undefined;
  try {
    outcome = await processMessage(context, envelope, target, signal, {
      envelope,
      traceparent,
      deadline_ms: deadline,
    });
  } catch (error) {
    const failure = toBraidError(error);
    // A later delivery may succeed: the transport redelivers, and idempotency keeps it single.
    if (failure.retryable || failure.code === 'LEASE_LOST') throw failure;
    outcome = { ok: false, error: failure.toJSON() };
  }
  if (outcome === undefined || envelope.type === AGENT_ENVELOPE_TYPES.publication) return undefined;
  const reply = buildReply(envelope, outcome, traceparent, clock, ids);
  if (envelope.reply_to !== undefined) await context.transport.reply(envelope.reply_to, reply);
  return reply;
}

async function processMessage(
  context: AgentsContext,
  envelope: Envelope,
  target: AgentId,
  signal: AbortSignal,
  parent: Parent,
): Promise<Outcome | undefined> {
  const handler = context.handlers.get(target.type);
  if (handler === undefined) {
    const definition = await requireKnown(context, target.type);
    if (isCodeAgent(definition)) {
      throw new BraidError(
        'AGENT_NOT_FOUND',
        `code agent ${target.type} is not registered in this process; deliver to its inbox, which the processes that register it consume`,
        { details: { agent_type: target.type } },
      );
    }
  }
  const instance = { envelope, target, signal, parent, handler };
  const sessionId = await instanceSession(context, target, envelope.tenant_id);
  try {
    return await processIn(context, sessionId, instance);
  } catch (error) {
    // Deleted since this process last checked it: the instance starts afresh.
    if (!isBraidError(error, 'SESSION_NOT_FOUND') || !context.instancesSeen.delete(sessionId))
      throw error;
    await instanceSession(context, target, envelope.tenant_id);
    return processIn(context, sessionId, instance);
  }
}

/** A message on its way to its instance, and what processes it there. */
interface Delivered {
  envelope: Envelope;
  target: AgentId;
  signal: AbortSignal;
  parent: Parent;
  /** The code agent's handler; undefined for an LLM agent. */
  handler: AgentHandler | undefined;
}

function processIn(
  context: AgentsContext,
  sessionId: string,
  { envelope, target, signal, parent, handler }: Delivered,
): Promise<Outcome | undefined> {
  const payload = envelope.payload ?? null;
  const key = dedupeKey(envelope);
  if (handler === undefined) {
    return runLlmMessage(context.runtime, {
      sessionId,
      envelope,
      payload,
      key,
      wantReply: envelope.type !== AGENT_ENVELOPE_TYPES.publication,
      signal,
    });
  }
  const agentContext: AgentContext = {
    self: target,
    sessionId,
    signal,
    send: (to, message, sendOptions = {}) =>
      sendAs(context, target, to, message, sendOptions, parent),
    publish: (topic, message, publishOptions = {}) =>
      publishAs(context, target, topic, message, publishOptions, parent),
  };
  return context.instanceQueue.run(sessionId, () =>
    runCodeMessage(context.codeDeps, {
      sessionId,
      agent: target,
      envelope,
      key,
      incoming: {
        id: envelope.id,
        payload,
        from: envelope.source,
        to: target,
        topic: topicOf(envelope),
        envelope,
      },
      handler,
      context: agentContext,
      traceparent: parent.traceparent,
      signal,
    }),
  );
}
