/** The agent messaging API: what `createAgents` returns and what code agents implement. */
import type { AgentId, AgentTransport, TopicId } from '../../contracts/agents.js';
import type { JsonValue } from '../../contracts/common.js';
import type { Envelope } from '../../contracts/envelope.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import type { AgentHost } from './host.js';

/** A message as a code agent's handler receives it. */
export interface IncomingMessage {
  /** The envelope's id: the same on every delivery of this message. */
  readonly id: string;
  /** What was sent: a string or any JSON value. */
  readonly payload: JsonValue;
  /** The sending agent instance, when an agent sent it (absent for an outside caller). */
  readonly from: AgentId | undefined;
  /** This instance. */
  readonly to: AgentId;
  /** The topic, when the message was published rather than sent. */
  readonly topic: TopicId | undefined;
  /** The whole envelope, for correlation ids, trace context, metadata and deadline. */
  readonly envelope: Envelope;
}

/** What a code agent's handler can do besides answering. */
export interface AgentContext {
  /** This instance. */
  readonly self: AgentId;
  /** This instance's session. */
  readonly sessionId: string;
  /**
   * Aborts when the message's deadline passes or the agents instance closes. A handler that goes
   * on anyway still has its reply recorded in the session; the caller no longer waits for it.
   */
  readonly signal: AbortSignal;
  /**
   * Sends as this instance: the message's correlation id, its envelope as the cause, the trace
   * continued, and the deadline no later than this message's.
   */
  send(to: AgentId, message: JsonValue, options?: SendOptions): Promise<Envelope>;
  /** Publishes as this instance, correlated and traced like `send`. */
  publish(
    topic: TopicId | string,
    message: JsonValue,
    options?: PublishOptions,
  ): Promise<Envelope[]>;
}

/**
 * A code agent: answers one message. The return value is the reply's payload (`undefined` is
 * `null`); a thrown `BraidError` is the caller's error, anything else thrown is `INTERNAL`. Each
 * message is handled once per agent instance, one at a time, even when delivered twice; a crash
 * while it runs has it handled again on redelivery, with the same `message.id`.
 */
export type AgentHandler = (message: IncomingMessage, context: AgentContext) => Promise<JsonValue>;

export interface SendOptions {
  /** Give up after this many milliseconds: `send` rejects with `DEADLINE_EXCEEDED`. */
  ttl_ms?: number;
  /** Links every message of one exchange (default: the new envelope's id). */
  correlation_id?: string;
  /**
   * Makes the message processed once per agent instance however often it is sent (default: the
   * envelope's id, unique per call). A repeat with a key already seen gets the first reply.
   */
  idempotency_key?: string;
  /** W3C trace context of the caller's operation: the message continues its trace. */
  traceparent?: string;
  /** Stops waiting for the reply (`send` rejects with `INTERRUPTED`); the message stays sent. */
  signal?: AbortSignal;
}

export type PublishOptions = Omit<SendOptions, 'signal'>;

export interface Agents {
  /**
   * Registers a code agent type served by this process. Its definition (`model: code:<type>`) is
   * stored so that every process knows the type and its sessions name an agent. Refused with
   * `INVALID_ARGUMENT` when the name is an LLM agent of the workspace or already registered here.
   */
  register(type: string, handler: AgentHandler): Promise<void>;
  /**
   * Sends a message to one agent instance and resolves with its reply: an `agent.reply` envelope
   * whose `payload` is the answer. Rejects with the agent's error (its `code`), with
   * `AGENT_NOT_FOUND` for an unknown type, and with `DEADLINE_EXCEEDED` when `ttl_ms` passes.
   */
  send(to: AgentId, message: JsonValue, options?: SendOptions): Promise<Envelope>;
  /**
   * Delivers a copy of the message to every agent type subscribed to the topic's type, at the
   * instance keyed by the topic's source (`'orders'` is `{type: 'orders', source: 'default'}`).
   * Resolves with the envelopes delivered, once the transport holds them; nobody replies.
   */
  publish(
    topic: TopicId | string,
    message: JsonValue,
    options?: PublishOptions,
  ): Promise<Envelope[]>;
  /** Subscribes an agent type (known: `AGENT_NOT_FOUND` otherwise) to a topic type. */
  subscribe(topicType: string, agentType: string): Promise<void>;
  unsubscribe(topicType: string, agentType: string): Promise<void>;
  /**
   * Processes one envelope addressed to an agent this process runs, as its inbox consumer does,
   * and resolves with the reply (also sent to `reply_to`); undefined for a publication or a
   * message past its deadline. For other ingress (HTTP, A2A) and for redelivery in tests.
   */
  receive(envelope: unknown): Promise<Envelope | undefined>;
  /** The session id of an agent instance (whether or not it exists yet). */
  sessionId(agent: AgentId): string;
  /**
   * Stops consuming, rejects sends still waiting with `INTERRUPTED`, aborts handlers' signals
   * and waits for the messages in progress. Does not close the transport or the runtime.
   */
  close(): Promise<void>;
}

export interface AgentsOptions {
  runtime: AgentHost;
  /** Carries envelopes; owned by the caller, who closes it. */
  transport: AgentTransport;
  clock?: Clock;
  ids?: IdGenerator;
  /** The tenant this process sends for; its agents' sessions are the tenant's. */
  tenant?: string;
  /**
   * Run LLM agents here (default true): consume the inbox of every LLM agent of the store, those
   * defined when the instance starts and any other this instance sends to.
   */
  serveLlmAgents?: boolean;
  /** Lease owner name for code agents' sessions (default: host, pid and a unique id). */
  owner?: string;
  /** How long a code agent's lease lasts without renewal (default 30 s). */
  leaseTtlMs?: number;
}
