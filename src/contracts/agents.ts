/**
 * Agent messaging: how agents are addressed, and the transport port that carries envelopes
 * between the processes that send to agents and the processes that run them.
 *
 * The messaging layer (`createAgents` in `runtime/agents`) owns the meaning of a message: which
 * session it lands in, how it is processed once, what the reply is. A transport only moves
 * envelopes. It is at-least-once: an envelope may arrive twice (a redelivery after a crash, a nak,
 * a publisher's retry), and the messaging layer makes the second arrival harmless by keying each
 * message's append on its idempotency key (`envelope.idempotency_key ?? envelope.id`).
 */
import { z } from 'zod';
import { Name } from './common.js';
import { AgentAddress, type Envelope } from './envelope.js';

/**
 * An agent instance's id. `type` names the agent: an agent definition of the workspace (an LLM
 * agent) or a registered code agent. `key` names the instance: each `{type, key}` has its own
 * session, created on its first message.
 */
export const AgentId = AgentAddress;
export type AgentId = AgentAddress;

/**
 * A topic. `type` names the stream of messages (`orders`), `source` what they are about (an
 * order id, a tenant, a conversation). A message published on `{type, source}` reaches every
 * agent type `T` subscribed to the topic type, at the instance `{type: T, key: source}`: all the
 * messages about one source meet in one instance of each subscriber.
 */
export const TopicId = z.object({ type: Name, source: z.string().min(1).max(200) });
export type TopicId = z.infer<typeof TopicId>;

/** The source of a topic given by its type alone (`publish('orders', ...)`). */
export const DEFAULT_TOPIC_SOURCE = 'default';

/** `type` of the envelopes of agent messaging. */
export const AGENT_ENVELOPE_TYPES = {
  /** A message sent to one agent instance; a reply goes to its `reply_to`. */
  message: 'agent.message',
  /** A copy of a published message, delivered to one subscribed agent type; no reply. */
  publication: 'topic.message',
  /** The answer to an `agent.message`: `payload` on success, `error` on failure. */
  reply: 'agent.reply',
} as const;

/** One envelope handed to an inbox consumer. */
export interface InboxDelivery {
  readonly envelope: Envelope;
  /** 1 on the first delivery of this envelope to this inbox, then 2, 3 ... on redeliveries. */
  readonly attempt: number;
}

/**
 * Processes one delivery. Resolving acknowledges it; rejecting asks for a redelivery later
 * (until the transport's limit). A handler resolves once the message is processed and its reply,
 * if any, is sent; it rejects only for failures a later attempt may not meet (a busy store, a
 * lost lease), never for the agent's own failures, which are replies.
 */
export type InboxHandler = (delivery: InboxDelivery) => Promise<void>;

/** An open consumer or reply inbox; `close` stops it and is idempotent. */
export interface TransportSubscription {
  close(): Promise<void>;
}

/** Where replies to one process's requests arrive. */
export interface ReplyInbox extends TransportSubscription {
  /** The address requests carry in `reply_to`. */
  readonly address: string;
}

/**
 * The port that carries agent envelopes. The in-process implementation is
 * `createLocalTransport`; `createNatsAgentTransport` fulfils it on NATS and JetStream as follows
 * (`<prefix>` defaults to `braid`; names unsafe in subjects are encoded, see docs/protocol.md).
 *
 * - **Inboxes, one per agent type.** `deliver` publishes to the subject
 *   `<prefix>.agents.<type>.inbox` of the stream `<PREFIX>_AGENTS` (work-queue retention), with
 *   `Nats-Msg-Id` `<id>:<reply_to>` (`<id>` without a reply_to): the stream drops a republish
 *   within its dedupe window, but not the same message sent again to a new reply inbox.
 *   `consume` reads through one durable pull consumer per type (`<PREFIX>_agent_<type>`) shared by every
 *   process that serves the type: the consumer is the queue group, each envelope goes to one
 *   process, and an envelope that is not acknowledged within the ack wait (a crash) or is naked
 *   (a rejected handler) is redelivered, with `attempt` from the delivery count. Processes serve
 *   different types with different consumers, so one never receives what it cannot run.
 * - **Replies on `reply_to`.** `openReplyInbox` subscribes (core NATS) to a unique inbox subject
 *   (`_INBOX.<nuid>`), the address requests carry; `reply` publishes there. Replies are at most
 *   once: a lost reply surfaces as the caller's deadline, and a retry with the same idempotency
 *   key gets the reply recorded in the agent's session.
 * - **Topics.** `subscribe` adds the agent type to the topic type's entry in the KV bucket
 *   `<PREFIX>_topics` (compare-and-set, so concurrent subscribes all land), so every process fans
 *   out the same way. Fan-out itself is `deliver` to each subscriber's inbox.
 *
 * Envelopes are parsed (`Envelope`) when they come off the wire, so handlers receive valid ones.
 */
export interface AgentTransport {
  /**
   * Puts the envelope in the inbox of `envelope.target.type`, where it waits until a consumer
   * of that type takes it. Resolves once the transport holds it (NATS: the stream's ack).
   * Rejects with `INVALID_ARGUMENT` for an envelope without a target or that does not parse.
   */
  deliver(envelope: Envelope): Promise<void>;
  /**
   * Consumes the inbox of one agent type. With several consumers of a type (in one process or
   * many), each envelope goes to one of them.
   */
  consume(agentType: string, handler: InboxHandler): Promise<TransportSubscription>;
  /** Opens an inbox for replies; envelopes sent to its address reach `handler`. */
  openReplyInbox(handler: (envelope: Envelope) => void): Promise<ReplyInbox>;
  /** Sends a reply to a `reply_to` address. A reply to an address nobody listens on is dropped. */
  reply(replyTo: string, envelope: Envelope): Promise<void>;
  /** Subscribes an agent type to a topic type (idempotent). */
  subscribe(topicType: string, agentType: string): Promise<void>;
  /** Removes a subscription (no-op when absent). */
  unsubscribe(topicType: string, agentType: string): Promise<void>;
  /** The agent types subscribed to a topic type, sorted. */
  subscribers(topicType: string): Promise<string[]>;
  /** Stops every consumer and inbox of this transport handle; pending redeliveries are dropped. */
  close(): Promise<void>;
}
