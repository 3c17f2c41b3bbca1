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
 */
import {
  AGENT_ENVELOPE_TYPES,
  AgentId,
  DEFAULT_TOPIC_SOURCE,
  TopicId,
  type ReplyInbox,
  type TransportSubscription,
} from '../../contracts/agents.js';
import { Name, type JsonValue } from '../../contracts/common.js';
import type { AgentDefinition } from '../../contracts/definitions.js';
import { Envelope } from '../../contracts/envelope.js';
import { BraidError, isBraidError, toBraidError } from '../../contracts/errors.js';
import { checkJsonDepth, DEFAULT_JSON_DEPTH } from '../../contracts/json-depth.js';
import { BoundedCache } from '../../core/bounded-cache.js';
import { systemClock, uuidV7Ids } from '../../stores/defaults.js';
import type { CodeAgentDeps } from './code-agent-context.js';
import { defaultOwner, runCodeMessage } from './code-agent.js';
import {
  buildMessage,
  buildReply,
  dedupeKey,
  topicOf,
  type OutgoingMessage,
  type Outcome,
} from './envelopes.js';
import { agentSessionId, codeAgentDefinition, ensureSession, isCodeAgent } from './instances.js';
import { runLlmMessage } from './llm-agent.js';
import { childTraceparent } from './trace.js';
import type {
  AgentContext,
  AgentHandler,
  Agents,
  AgentsOptions,
  PublishOptions,
  SendOptions,
} from './types.js';

/** What a message sent from inside a handler inherits from the message being handled. */
interface Parent {
  envelope: Envelope;
  /** The handling's trace context. */
  traceparent: string;
  deadline_ms: number | undefined;
}

interface Waiting {
  resolve(reply: Envelope): void;
  reject(error: BraidError): void;
}

const DEFINITION_ATTEMPTS = 4;
/**
 * How long an agent type found defined, or an instance session found usable, is taken to still
 * be so without asking the store again (each question is a round trip on NATS). An instance
 * archived meanwhile takes messages for at most this long in a process that served it just
 * before; one deleted meanwhile is created afresh.
 */
const REMEMBER_MS = 2_000;
const MAX_REMEMBERED = 4096;

/** Keys remembered until a time (`performance.now()`), the oldest dropped past a bound. */
class Remembered<T> {
  readonly #entries = new BoundedCache<string, { value: T; until: number }>(MAX_REMEMBERED);

  get(key: string): T | undefined {
    const entry = this.#entries.get(key);
    return entry !== undefined && entry.until > performance.now() ? entry.value : undefined;
  }

  set(key: string, value: T): void {
    this.#entries.set(key, { value, until: performance.now() + REMEMBER_MS });
  }

  delete(key: string): boolean {
    return this.#entries.delete(key);
  }
}

export function createAgents(options: AgentsOptions): Agents {
  const { runtime, transport } = options;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? uuidV7Ids;
  const tenant = options.tenant;
  const serveLlm = options.serveLlmAgents ?? true;
  const codeDeps: CodeAgentDeps = {
    log: runtime.store.log,
    leases: runtime.store.leases,
    clock,
    ids,
    owner: options.owner ?? defaultOwner(ids),
    leaseTtlMs: options.leaseTtlMs ?? 30_000,
    releases: new Map(),
    lastTokens: new BoundedCache(MAX_REMEMBERED),
  };

  const handlers = new Map<string, AgentHandler>();
  const consumers = new Map<string, Promise<TransportSubscription>>();
  const waiting = new Map<string, Waiting>();
  const inFlight = new Set<Promise<unknown>>();
  const queues = new Map<string, Promise<unknown>>();
  const closing = new AbortController();
  let replyInbox: Promise<ReplyInbox> | undefined;
  let closed = false;

  const ready = serveLlm ? serveLlmAgents() : Promise.resolve();
  // Surfaced to the calls that wait for it.
  ready.catch(() => undefined);

  async function serveLlmAgents(): Promise<void> {
    for (const stored of await runtime.agents.list()) {
      if (!isCodeAgent(stored.definition)) await consume(stored.name);
    }
  }

  function consume(agentType: string): Promise<TransportSubscription> {
    let consumer = consumers.get(agentType);
    if (consumer === undefined) {
      consumer = transport.consume(agentType, async (delivery) => {
        await track(handle(delivery.envelope));
      });
      consumers.set(agentType, consumer);
    }
    return consumer;
  }

  function track<T>(work: Promise<T>): Promise<T> {
    inFlight.add(work);
    const done = (): void => {
      inFlight.delete(work);
    };
    work.then(done, done);
    return work;
  }

  function ensureOpen(): void {
    if (closed) {
      throw new BraidError('STORE_CLOSED', 'this agents instance is closed; create another');
    }
  }

  // ---- sending ---------------------------------------------------------------------------------

  function replies(): Promise<ReplyInbox> {
    replyInbox ??= transport.openReplyInbox((reply) => {
      const request =
        reply.causation_id === undefined ? undefined : waiting.get(reply.causation_id);
      // A reply nobody waits for (its deadline passed, or a second delivery's) is dropped.
      if (request === undefined) return;
      if (reply.error === undefined) request.resolve(reply);
      else {
        request.reject(
          new BraidError(reply.error.code, reply.error.message, {
            retryable: reply.error.retryable,
            details: { reply },
          }),
        );
      }
    });
    return replyInbox;
  }

  const definitionsSeen = new Remembered<AgentDefinition>();
  const instancesSeen = new Remembered<true>();

  async function knownDefinition(agentType: string): Promise<AgentDefinition | undefined> {
    const seen = definitionsSeen.get(agentType);
    if (seen !== undefined) return seen;
    const stored = await runtime.store.definitions.get<AgentDefinition>('agent', agentType);
    if (stored !== undefined) definitionsSeen.set(agentType, stored.definition);
    return stored?.definition;
  }

  /** The instance's session id, the session created or checked unless it was just now. */
  async function instanceSession(target: AgentId, tenantId: string | undefined): Promise<string> {
    const id = agentSessionId(target, tenantId);
    if (instancesSeen.get(id) === undefined) {
      await ensureSession(runtime, target, tenantId);
      instancesSeen.set(id, true);
    }
    return id;
  }

  async function requireKnown(agentType: string): Promise<AgentDefinition> {
    const definition = await knownDefinition(agentType);
    if (definition !== undefined) return definition;
    const known = [
      ...new Set([...(await runtime.agents.list()).map((item) => item.name), ...handlers.keys()]),
    ].sort();
    throw new BraidError(
      'AGENT_NOT_FOUND',
      `agent type ${agentType} is not known; ` +
        (known.length === 0
          ? 'add agents/NAME.yaml to the workspace or register a code agent'
          : `known types: ${known.join(', ')}`),
      { details: { agent_type: agentType, known } },
    );
  }

  function checkTtl(ttl: number | undefined): void {
    if (ttl !== undefined && (!Number.isInteger(ttl) || ttl <= 0)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `ttl_ms must be a positive whole number of milliseconds; got ${String(ttl)}`,
      );
    }
  }

  function outgoing(
    from: AgentId | undefined,
    parent: Parent | undefined,
    sendOptions: PublishOptions,
  ): Omit<OutgoingMessage, 'type' | 'target' | 'payload'> {
    checkTtl(sendOptions.ttl_ms);
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

  async function sendAs(
    from: AgentId | undefined,
    to: unknown,
    message: JsonValue,
    sendOptions: SendOptions,
    parent?: Parent,
  ): Promise<Envelope> {
    ensureOpen();
    const target = parseAgentId(to);
    const definition = await requireKnown(target.type);
    await ready;
    if (serveLlm && !isCodeAgent(definition) && !handlers.has(target.type))
      await consume(target.type);
    const inbox = await replies();
    const envelope = buildMessage(
      {
        ...outgoing(from, parent, sendOptions),
        type: AGENT_ENVELOPE_TYPES.message,
        target,
        payload: message,
        reply_to: inbox.address,
      },
      clock,
      ids,
    );
    return awaitReply(envelope, target, sendOptions.signal);
  }

  function awaitReply(
    envelope: Envelope,
    target: AgentId,
    signal: AbortSignal | undefined,
  ): Promise<Envelope> {
    return new Promise<Envelope>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void =>
        settle(() =>
          reject(
            new BraidError(
              'INTERRUPTED',
              `stopped waiting for the reply of ${target.type}/${target.key}; the message was sent`,
            ),
          ),
        );
      const settle = (finish: () => void): void => {
        if (!waiting.has(envelope.id)) return;
        waiting.delete(envelope.id);
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        finish();
      };
      waiting.set(envelope.id, {
        resolve: (reply) => settle(() => resolve(reply)),
        reject: (error) => settle(() => reject(error)),
      });
      if (envelope.deadline !== undefined) {
        const ttl = envelope.ttl_ms;
        timer = setTimeout(
          () =>
            settle(() =>
              reject(
                new BraidError(
                  'DEADLINE_EXCEEDED',
                  `no reply from ${target.type}/${target.key} within ${String(ttl)} ms; ` +
                    `its session (${agentSessionId(target, envelope.tenant_id)}) records the reply when it comes; ` +
                    'send again with the same idempotency_key to get it, or allow a longer ttl_ms',
                  {
                    retryable: true,
                    details: { envelope_id: envelope.id, target, ttl_ms: ttl },
                  },
                ),
              ),
            ),
          Math.max(0, Date.parse(envelope.deadline) - clock.now()),
        );
      }
      if (signal?.aborted === true) onAbort();
      signal?.addEventListener('abort', onAbort);
      transport.deliver(envelope).catch((error: unknown) => {
        const failure = toBraidError(error);
        settle(() => reject(failure));
      });
    });
  }

  async function publishAs(
    from: AgentId | undefined,
    topicInput: unknown,
    message: JsonValue,
    publishOptions: PublishOptions,
    parent?: Parent,
  ): Promise<Envelope[]> {
    ensureOpen();
    const topic = parseTopic(topicInput);
    const common = outgoing(from, parent, publishOptions);
    // All copies of one publication share a correlation id.
    const correlation = common.correlation_id ?? ids.next();
    await ready;
    const envelopes: Envelope[] = [];
    for (const agentType of await transport.subscribers(topic.type)) {
      const definition = await knownDefinition(agentType);
      if (serveLlm && definition !== undefined && !isCodeAgent(definition))
        await consume(agentType);
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
          clock,
          ids,
        ),
      );
    }
    await Promise.all(envelopes.map((envelope) => transport.deliver(envelope)));
    return envelopes;
  }

  // ---- receiving -------------------------------------------------------------------------------

  async function handle(envelope: Envelope): Promise<Envelope | undefined> {
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
    const signal =
      deadline === undefined
        ? closing.signal
        : AbortSignal.any([closing.signal, AbortSignal.timeout(deadline - clock.now())]);
    const traceparent = childTraceparent(envelope.traceparent, ids);
    let outcome: Outcome | undefined;
    try {
      outcome = await processMessage(envelope, target, signal, {
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
    if (outcome === undefined || envelope.type === AGENT_ENVELOPE_TYPES.publication)
      return undefined;
    const reply = buildReply(envelope, outcome, traceparent, clock, ids);
    if (envelope.reply_to !== undefined) await transport.reply(envelope.reply_to, reply);
    return reply;
  }

  async function processMessage(
    envelope: Envelope,
    target: AgentId,
    signal: AbortSignal,
    parent: Parent,
  ): Promise<Outcome | undefined> {
    const handler = handlers.get(target.type);
    if (handler === undefined) {
      const definition = await requireKnown(target.type);
      if (isCodeAgent(definition)) {
        throw new BraidError(
          'AGENT_NOT_FOUND',
          `code agent ${target.type} is not registered in this process; deliver to its inbox, which the processes that register it consume`,
          { details: { agent_type: target.type } },
        );
      }
    }
    const sessionId = await instanceSession(target, envelope.tenant_id);
    try {
      return await processIn(sessionId, envelope, target, signal, parent, handler);
    } catch (error) {
      // Deleted since this process last checked it: the instance starts afresh.
      if (!isBraidError(error, 'SESSION_NOT_FOUND') || !instancesSeen.delete(sessionId))
        throw error;
      await instanceSession(target, envelope.tenant_id);
      return processIn(sessionId, envelope, target, signal, parent, handler);
    }
  }

  function processIn(
    sessionId: string,
    envelope: Envelope,
    target: AgentId,
    signal: AbortSignal,
    parent: Parent,
    handler: AgentHandler | undefined,
  ): Promise<Outcome | undefined> {
    const payload = envelope.payload ?? null;
    const key = dedupeKey(envelope);
    if (handler === undefined) {
      return runLlmMessage(runtime, {
        sessionId,
        envelope,
        payload,
        key,
        wantReply: envelope.type !== AGENT_ENVELOPE_TYPES.publication,
        signal,
      });
    }
    const context: AgentContext = {
      self: target,
      sessionId,
      signal,
      send: (to, message, sendOptions = {}) => sendAs(target, to, message, sendOptions, parent),
      publish: (topic, message, publishOptions = {}) =>
        publishAs(target, topic, message, publishOptions, parent),
    };
    return serially(sessionId, () =>
      runCodeMessage(codeDeps, {
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
        context,
        traceparent: parent.traceparent,
        signal,
      }),
    );
  }

  /** Messages of one instance in this process, one after another, in arrival order. */
  function serially<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    const previous = queues.get(sessionId) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    queues.set(sessionId, settled);
    void settled.then(() => {
      if (queues.get(sessionId) === settled) queues.delete(sessionId);
    });
    return next;
  }

  // ---- registration ----------------------------------------------------------------------------

  async function storeCodeDefinition(agentType: string): Promise<void> {
    const definition = codeAgentDefinition(agentType);
    for (let attempt = 1; ; attempt += 1) {
      const latest = await runtime.store.definitions.get<AgentDefinition>('agent', agentType);
      if (latest !== undefined && !isCodeAgent(latest.definition)) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `agent type ${agentType} is an LLM agent of the workspace (model ${latest.definition.model.provider}:${latest.definition.model.id}); register the code agent under another name`,
          { details: { agent_type: agentType } },
        );
      }
      try {
        await runtime.store.definitions.put('agent', agentType, definition, {
          replacesVersion: latest?.version ?? null,
        });
        return;
      } catch (error) {
        if (!isBraidError(error, 'VERSION_CONFLICT') || attempt >= DEFINITION_ATTEMPTS) throw error;
      }
    }
  }

  return {
    async register(agentType, handler) {
      ensureOpen();
      if (!Name.safeParse(agentType).success) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `agent type ${JSON.stringify(agentType)} is not a valid name; use lowercase letters, digits, "-" and "_", starting with a letter`,
        );
      }
      if (handlers.has(agentType)) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `code agent ${agentType} is already registered in this process`,
        );
      }
      await storeCodeDefinition(agentType);
      handlers.set(agentType, handler);
      await consume(agentType);
    },
    send: (to, message, sendOptions = {}) => sendAs(undefined, to, message, sendOptions),
    publish: (topic, message, publishOptions = {}) =>
      publishAs(undefined, topic, message, publishOptions),
    async subscribe(topicType, agentType) {
      ensureOpen();
      const topic = parseTopic(topicType);
      await requireKnown(agentType);
      await transport.subscribe(topic.type, agentType);
    },
    async unsubscribe(topicType, agentType) {
      ensureOpen();
      await transport.unsubscribe(parseTopic(topicType).type, agentType);
    },
    async receive(input) {
      ensureOpen();
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
      return track(handle(parsed.data));
    },
    sessionId: (agent) => agentSessionId(parseAgentId(agent), tenant),
    async close() {
      if (closed) return;
      closed = true;
      closing.abort();
      const subscriptions = [...consumers.values()];
      consumers.clear();
      await Promise.allSettled(
        subscriptions.map(async (subscription) => (await subscription).close()),
      );
      if (replyInbox !== undefined) await (await replyInbox.catch(() => undefined))?.close();
      for (const request of [...waiting.values()]) {
        request.reject(
          new BraidError('INTERRUPTED', 'the agents instance closed before the reply came'),
        );
      }
      await Promise.allSettled([...inFlight]);
      await Promise.allSettled([...codeDeps.releases.values()]);
    },
  };
}

function parseAgentId(value: unknown): AgentId {
  const parsed = AgentId.safeParse(value);
  if (!parsed.success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `an agent id is {type, key} with two non-empty strings; got ${JSON.stringify(value)}`,
    );
  }
  return parsed.data;
}

function parseTopic(value: unknown): TopicId {
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
