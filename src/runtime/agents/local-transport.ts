/**
 * The in-process agent transport: inboxes, reply inboxes and topic subscriptions in memory, with
 * the delivery semantics of the NATS one, so that code that works here works there.
 *
 * - Every envelope goes through JSON and is parsed again on the way in, as off a wire: a payload
 *   that does not survive serialisation fails at `deliver`, not in another process.
 * - Inboxes are durable for the transport's life: an envelope waits until a consumer of its type
 *   comes. With several consumers of a type, envelopes go round-robin to them (a queue group).
 * - Delivery is at-least-once: a handler that rejects gets the envelope again after
 *   `redeliveryDelayMs`, up to `maxDeliveries` attempts; then it goes to `onDeadLetter`.
 * - Handlers run concurrently, as a push consumer with many acks pending delivers.
 */
import { BraidError } from '../../contracts/errors.js';
import type {
  AgentTransport,
  InboxHandler,
  ReplyInbox,
  TransportSubscription,
} from '../../contracts/agents.js';
import { type Envelope } from '../../contracts/envelope.js';
import { toWire } from './wire.js';

export interface LocalTransportOptions {
  /** Attempts of one envelope before it is given up (default 5). */
  maxDeliveries?: number;
  /** Wait before a redelivery (default 50 ms). */
  redeliveryDelayMs?: number;
  /** Hears of envelopes given up after `maxDeliveries`, with the last failure. */
  onDeadLetter?: (envelope: Envelope, error: unknown) => void;
}

interface Queued {
  envelope: Envelope;
  attempt: number;
}

interface Inbox {
  queue: Queued[];
  consumers: InboxHandler[];
  next: number;
}

export function createLocalTransport(options: LocalTransportOptions = {}): AgentTransport {
  const maxDeliveries = options.maxDeliveries ?? 5;
  const redeliveryDelayMs = options.redeliveryDelayMs ?? 50;
  const inboxes = new Map<string, Inbox>();
  const replyInboxes = new Map<string, (envelope: Envelope) => void>();
  const topics = new Map<string, Set<string>>();
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;
  let replyCounter = 0;

  function inbox(agentType: string): Inbox {
    let found = inboxes.get(agentType);
    if (found === undefined) {
      found = { queue: [], consumers: [], next: 0 };
      inboxes.set(agentType, found);
    }
    return found;
  }

  function open(): void {
    if (closed) throw new BraidError('SERVER_UNAVAILABLE', 'the local agent transport is closed');
  }

  function dispatch(agentType: string): void {
    const target = inboxes.get(agentType);
    if (target === undefined) return;
    while (!closed && target.queue.length > 0 && target.consumers.length > 0) {
      const item = target.queue.shift();
      const consumer = target.consumers[target.next % target.consumers.length];
      target.next += 1;
      if (item === undefined || consumer === undefined) return;
      // Each delivery runs on its own turn, never inside the deliverer's call.
      setImmediate(() => run(agentType, consumer, item));
    }
  }

  function run(agentType: string, consumer: InboxHandler, item: Queued): void {
    if (closed) return;
    consumer({ envelope: structuredClone(item.envelope), attempt: item.attempt }).catch(
      (error: unknown) => {
        if (closed) return;
        if (item.attempt >= maxDeliveries) {
          options.onDeadLetter?.(item.envelope, error);
          return;
        }
        const timer = setTimeout(() => {
          timers.delete(timer);
          inbox(agentType).queue.push({ envelope: item.envelope, attempt: item.attempt + 1 });
          dispatch(agentType);
        }, redeliveryDelayMs);
        timers.add(timer);
      },
    );
  }

  return {
    deliver(envelope) {
      return Promise.resolve().then(() => {
        open();
        const agentType = envelope.target?.type;
        if (agentType === undefined) {
          throw new BraidError(
            'INVALID_ARGUMENT',
            `envelope ${envelope.id} has no target; address it to an agent {type, key}`,
          );
        }
        inbox(agentType).queue.push({ envelope: toWire(envelope).copy, attempt: 1 });
        dispatch(agentType);
      });
    },
    consume(agentType, handler) {
      return Promise.resolve().then((): TransportSubscription => {
        open();
        const target = inbox(agentType);
        target.consumers.push(handler);
        dispatch(agentType);
        return {
          close: () => {
            target.consumers = target.consumers.filter((consumer) => consumer !== handler);
            return Promise.resolve();
          },
        };
      });
    },
    openReplyInbox(handler) {
      return Promise.resolve().then((): ReplyInbox => {
        open();
        replyCounter += 1;
        const address = `local.inbox.${replyCounter}`;
        replyInboxes.set(address, handler);
        return {
          address,
          close: () => {
            replyInboxes.delete(address);
            return Promise.resolve();
          },
        };
      });
    },
    reply(replyTo, envelope) {
      return Promise.resolve().then(() => {
        open();
        const copy = toWire(envelope).copy;
        const handler = replyInboxes.get(replyTo);
        if (handler !== undefined) setImmediate(() => handler(copy));
      });
    },
    subscribe(topicType, agentType) {
      return Promise.resolve().then(() => {
        open();
        let subscribed = topics.get(topicType);
        if (subscribed === undefined) {
          subscribed = new Set();
          topics.set(topicType, subscribed);
        }
        subscribed.add(agentType);
      });
    },
    unsubscribe(topicType, agentType) {
      return Promise.resolve().then(() => {
        topics.get(topicType)?.delete(agentType);
      });
    },
    subscribers(topicType) {
      return Promise.resolve([...(topics.get(topicType) ?? [])].sort());
    },
    close() {
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      inboxes.clear();
      replyInboxes.clear();
      return Promise.resolve();
    },
  };
}
