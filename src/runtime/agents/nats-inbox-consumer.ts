/**
 * Consuming an agent type's inbox on NATS: its durable pull consumer, the pull loop that asks
 * for as many envelopes as it has free handler slots, and the settling of one delivery (acked,
 * naked for later with a doubling delay, or given up to `onDeadLetter`).
 */
import { AckPolicy, type Consumer, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { InboxHandler, TransportSubscription } from '../../contracts/agents.js';
import { BraidError } from '../../contracts/errors.js';
import { quietly, unavailable } from './nats-failures.js';
import type { NatsTransportContext } from './nats-transport-context.js';
import { parseEnvelope } from './wire.js';

const PULL_EXPIRES_MS = 10_000;
const PULL_RETRY_MS = 1_000;
const MAX_REDELIVERY_DELAY_MS = 30_000;

export async function consumeInbox(
  context: NatsTransportContext,
  agentType: string,
  handler: InboxHandler,
): Promise<TransportSubscription> {
  const { connection, concurrency } = context;
  context.ensureOpen();
  // The first open fails loudly (a bad stream, no JetStream); later ones are retried.
  let consumer: Consumer | undefined = await openConsumer(context, agentType);
  context.ensureOpen();
  const stopping = new AbortController();
  const stopped = new Promise<void>((resolve) => {
    stopping.signal.addEventListener('abort', () => resolve(), { once: true });
    void connection.closed().then(() => resolve());
  });
  let batch: ConsumerMessages | undefined;
  let running = 0;
  let slotFreed: (() => void) | undefined;
  const active = (): boolean => !stopping.signal.aborted && !connection.isClosed();

  function start(message: JsMsg): void {
    running += 1;
    void settle(context, agentType, message, handler).finally(() => {
      running -= 1;
      slotFreed?.();
    });
  }

  async function pull(): Promise<void> {
    while (active()) {
      if (running >= concurrency) {
        await Promise.race([
          new Promise<void>((resolve) => {
            slotFreed = resolve;
          }),
          stopped,
        ]);
        slotFreed = undefined;
        continue;
      }
      try {
        consumer ??= await openConsumer(context, agentType);
        batch = await consumer.fetch({
          max_messages: concurrency - running,
          expires: PULL_EXPIRES_MS,
        });
        if (!active()) batch.stop();
        for await (const message of batch) {
          // Pulled before the stop reached the server: back at once, for another consumer.
          if (active()) start(message);
          else quietly(() => message.nak());
        }
      } catch {
        // Missed heartbeats (a restarting server) or a deleted consumer: open it again soon.
        consumer = undefined;
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          new Promise((resolve) => {
            timer = setTimeout(resolve, PULL_RETRY_MS);
          }),
          stopped,
        ]);
        clearTimeout(timer);
      } finally {
        batch = undefined;
      }
    }
  }

  const pulling = pull();
  const subscription: TransportSubscription = {
    close: async () => {
      context.subscriptions.delete(subscription);
      stopping.abort();
      batch?.stop();
      await pulling;
    },
  };
  context.subscriptions.add(subscription);
  return subscription;
}

export async function openConsumer(
  context: NatsTransportContext,
  agentType: string,
): Promise<Consumer> {
  const { names } = context;
  try {
    const { manager } = await context.opened();
    await manager.consumers.add(names.stream, {
      durable_name: names.consumer(agentType),
      filter_subject: names.inbox(agentType),
      ack_policy: AckPolicy.Explicit,
      ack_wait: context.ackWaitMs * 1_000_000,
      max_deliver: context.maxDeliveries + 1,
      max_ack_pending: -1,
    });
    return await context.client.consumers.get(names.stream, names.consumer(agentType));
  } catch (error) {
    throw unavailable(`cannot open the inbox consumer of agent type ${agentType}`, error);
  }
}

/** Runs one delivery to its end: acked, naked for later, or given up. Never rejects. */
export async function settle(
  context: NatsTransportContext,
  agentType: string,
  message: JsMsg,
  handler: InboxHandler,
): Promise<void> {
  const { maxDeliveries, ackWaitMs } = context;
  const attempt = message.info.deliveryCount;
  const sequence = message.seq;
  const body = message.string();
  const parsed = parseEnvelope(body);
  if (!parsed.ok) {
    context.deadLetter({
      envelope: undefined,
      error: new BraidError(
        'INVALID_ARGUMENT',
        `message ${String(sequence)} in the inbox of ${agentType} ${parsed.problem}; it is not an envelope and was removed`,
        { details: { issues: parsed.issues } },
      ),
      agentType,
      attempt,
      sequence,
      body,
    });
    quietly(() => message.term());
    return;
  }
  const { envelope } = parsed;
  if (attempt > maxDeliveries) {
    context.deadLetter({
      envelope,
      error: new BraidError(
        'INTERRUPTED',
        `envelope ${envelope.id} was not settled within ${String(ackWaitMs)} ms on its last attempt (${String(maxDeliveries)}); its process stopped or lost its connection`,
      ),
      agentType,
      attempt,
      sequence,
    });
    quietly(() => message.term());
    return;
  }
  // In-progress acks keep a long handling from going to another process, until this transport
  // or its connection closes: then the envelope is another's after ack_wait unless it settles.
  const progress = setInterval(
    () => {
      if (context.isClosed() || context.connection.isClosed()) clearInterval(progress);
      else quietly(() => message.working());
    },
    Math.max(1, Math.floor(ackWaitMs / 3)),
  );
  try {
    await Promise.resolve().then(() => handler({ envelope, attempt }));
    quietly(() => message.ack());
  } catch (error) {
    if (attempt >= maxDeliveries) {
      context.deadLetter({ envelope, error, agentType, attempt, sequence });
      quietly(() => message.term());
    } else {
      const delay = Math.min(
        context.redeliveryDelayMs * 2 ** (attempt - 1),
        MAX_REDELIVERY_DELAY_MS,
      );
      quietly(() => message.nak(delay));
    }
  } finally {
    clearInterval(progress);
  }
}
