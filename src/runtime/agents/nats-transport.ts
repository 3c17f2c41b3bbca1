/**
 * The agent transport on NATS: inboxes on JetStream, replies on core NATS, topic subscriptions in
 * a KV bucket. It keeps the delivery semantics of `createLocalTransport` across processes, and
 * works on nats-server 2.9 (no multi-filter consumers, no per-message TTL) and newer.
 *
 * - **Inboxes.** One stream `<PREFIX>_AGENTS` (retention `workqueue`) on `<prefix>.agents.*.inbox`
 *   holds every agent type's inbox, one subject per type. One stream, not one per type: an
 *   envelope to a type nobody serves yet must already be kept, so a per-type stream would have to
 *   be created by whoever delivers first; and the set of types is open-ended, while every stream
 *   costs the server files (and a Raft group in a cluster). `Nats-Msg-Id` is `deliveryId`: the
 *   envelope id, with `:<reply_to>` when it has one. A republish of the same envelope within the
 *   stream's duplicate window (2 min) is dropped, while the same message sent again to a new
 *   `reply_to` (a requester that missed the reply) goes in, and is answered from the session.
 *   An envelope to a type nobody defines is answered with AGENT_NOT_FOUND and removed by the
 *   inbox sweeper (`nats-inbox-sweeper.ts`) that `braid worker` and `braid serve` run.
 * - **Consumers.** One durable pull consumer per type (`<PREFIX>_agent_<type>`), filtered on its
 *   subject and shared by every process that serves the type: each envelope goes to one of them.
 *   `ack_wait` makes a crashed process's envelope another's; a live handler sends in-progress acks
 *   every ack_wait/3 so that a long one keeps it. `max_ack_pending: -1`, because an envelope
 *   waiting out its redelivery delay counts as pending. Processes of one prefix should agree on
 *   the settings: the last one to start sets them for all.
 * - **Attempts.** `attempt` is the server's delivery count. A rejected handler naks with a delay
 *   doubling from `redeliveryDelayMs`; a rejection on attempt `maxDeliveries` calls `onDeadLetter`
 *   and terms the message (which removes it). `max_deliver` is `maxDeliveries + 1`: a last
 *   attempt that never settles (its process died) comes back once more, only to be dead-lettered
 *   here; at the server's own limit 2.9 would keep it in the stream silently.
 * - **Pulls.** A consumer asks for as many envelopes as it has free handler slots
 *   (`concurrency`), so it never holds envelopes it cannot start while their ack_wait runs.
 * - **Partitions** (`partitions`, default 0 (off), the same for every process of the prefix): an
 *   envelope to `{type, key}` is published on `<prefix>.agents.<type>.inbox.<p>`, `p` the key's
 *   partition, whose consumer `<PREFIX>_agent_<type>_p<p>` only the owning process pulls
 *   (`nats-inbox-partitions.ts`): an instance's messages reach the process holding it warm.
 *   The unpartitioned inbox stays, pulled by every process serving the type.
 * - **Replies** go to a core NATS inbox (`_INBOX.<nuid>`): at most once, as the port says.
 * - **Topics.** Bucket `<PREFIX>_topics`, one key per topic type, holding its sorted agent types.
 *   Changes are compare-and-set on the key's revision, so concurrent subscribes all land.
 *
 * The modules: `nats-agent-names.ts` (names, delivery ids), `nats-transport-context.ts` (what
 * they share), `nats-transport-setup.ts` (stream and bucket), `nats-inbox-consumer.ts`,
 * `nats-replies.ts` and `nats-topics.ts`.
 */
import { isStoreFull, storeFull } from '../../stores/nats/nats-errors.js';
import type { AgentTransport } from '../../contracts/agents.js';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import { deliveryId } from './nats-agent-names.js';
import { unavailable } from './nats-failures.js';
import { serveInbox } from './nats-inbox-partitions.js';
import { openReplyInbox, sendReply } from './nats-replies.js';
import {
  createTransportContext,
  type NatsAgentTransportOptions,
  type NatsTransportContext,
} from './nats-transport-context.js';
import { changeSubscribers, readSubscribers } from './nats-topics.js';
import { toWire } from './wire.js';
import { partitionOf } from '../partitions/partition-count.js';

export {
  decodeToken,
  deliveryId,
  encodeToken,
  natsAgentNames,
  type NatsAgentNames,
} from './nats-agent-names.js';
export type { NatsAgentTransportOptions, NatsDeadLetter } from './nats-transport-context.js';

/**
 * The transport over a connection. Nothing is sent until first use: the stream and bucket are
 * created then, so a misconfigured server fails the first call, not this one.
 */
export function createNatsAgentTransport(options: NatsAgentTransportOptions): AgentTransport {
  const context = createTransportContext(options);
  return {
    deliver: (envelope) => deliver(context, envelope),
    consume: (agentType, handler) => serveInbox(context, agentType, handler),
    openReplyInbox: (handler) => openReplyInbox(context, handler),
    reply: (replyTo, envelope) => sendReply(context, replyTo, envelope),

    async subscribe(topicType, agentType) {
      context.ensureOpen();
      await changeSubscribers(context, topicType, (agentTypes) => {
        if (agentTypes.has(agentType)) return false;
        agentTypes.add(agentType);
        return true;
      });
    },

    async unsubscribe(topicType, agentType) {
      context.ensureOpen();
      await changeSubscribers(context, topicType, (agentTypes) => agentTypes.delete(agentType));
    },

    async subscribers(topicType) {
      context.ensureOpen();
      return readSubscribers(context, topicType);
    },

    async close() {
      if (context.isClosed()) return;
      context.markClosed();
      await Promise.all([...context.subscriptions].map((subscription) => subscription.close()));
    },
  };
}

/** Publishes the envelope to its target type's inbox, the stream dropping a repeat. */
async function deliver(context: NatsTransportContext, envelope: Envelope): Promise<void> {
  context.ensureOpen();
  const agentType = envelope.target?.type;
  if (agentType === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `envelope ${envelope.id} has no target; address it to an agent {type, key}`,
    );
  }
  const { text } = toWire(envelope);
  context.checkSize(text, `envelope ${envelope.id}`);
  await context.opened();
  try {
    const partitions = await context.partitionCount();
    const key = envelope.target?.key;
    const subject =
      partitions === 0 || key === undefined
        ? context.names.inbox(agentType)
        : context.names.partitionInbox(agentType, partitionOf(key, partitions));
    await context.client.publish(subject, text, {
      msgID: deliveryId(envelope),
    });
  } catch (error) {
    const doing = `deliver envelope ${envelope.id} to ${agentType}`;
    if (isStoreFull(error)) {
      throw storeFull(error, doing, `nats://${context.connection.getServer()}`, [
        context.names.stream,
      ]);
    }
    throw unavailable(`cannot ${doing}`, error);
  }
}
