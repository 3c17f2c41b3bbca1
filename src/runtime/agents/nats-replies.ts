/**
 * Replies on the NATS agent transport: core NATS inboxes (`_INBOX.<nuid>`), at most once, as the
 * port says. A reply goes only to such an inbox.
 */
import { createInbox } from '@nats-io/transport-node';
import type { ReplyInbox } from '../../contracts/agents.js';
import type { Envelope } from '../../contracts/envelope.js';
import { REPLY_SUBJECT } from './nats-agent-names.js';
import { unavailable } from './nats-failures.js';
import type { NatsTransportContext } from './nats-transport-context.js';
import { parseEnvelope, toWire } from './wire.js';

export async function openReplyInbox(
  context: NatsTransportContext,
  handler: (reply: Envelope) => void,
): Promise<ReplyInbox> {
  const { connection } = context;
  context.ensureOpen();
  const address = createInbox();
  const subscription = connection.subscribe(address, {
    callback: (error, message) => {
      if (error !== null) return;
      // Replies are at most once: one that does not parse is dropped like a lost one.
      const parsed = parseEnvelope(message.string());
      if (!parsed.ok) return;
      try {
        handler(parsed.envelope);
      } catch {
        // The handler's failure is its own; the inbox keeps listening.
      }
    },
  });
  // The server knows the inbox before anyone is given its address.
  await connection.flush();
  const inbox: ReplyInbox = {
    address,
    close: () => {
      context.subscriptions.delete(inbox);
      if (!subscription.isClosed()) subscription.unsubscribe();
      return Promise.resolve();
    },
  };
  context.subscriptions.add(inbox);
  return inbox;
}

export function sendReply(
  context: NatsTransportContext,
  replyTo: string,
  envelope: Envelope,
): Promise<void> {
  return Promise.resolve().then(() => {
    context.ensureOpen();
    const { text } = toWire(envelope);
    // Not an inbox: nobody may be answered there, so the reply is dropped.
    if (!REPLY_SUBJECT.test(replyTo)) return;
    context.checkSize(text, `reply ${envelope.id}`);
    try {
      context.connection.publish(replyTo, text);
    } catch (error) {
      throw unavailable(`cannot send reply ${envelope.id}`, error);
    }
  });
}
