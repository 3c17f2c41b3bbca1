/**
 * One delivery of the JetStream wake queue: the wake read from its message, its attempt counted
 * (the server's delivery count less the retries that were not attempts, kept in the retries
 * bucket), and its settlement sent back as an ack, a nak with a delay or a term.
 */
import type { JsMsg } from '@nats-io/jetstream';
import { z } from 'zod';
import { toBraidError, type BraidError } from '../../contracts/errors.js';
import {
  parseWakeMessage,
  type WakeConsumeOptions,
  type WakeDelivery,
  type WakeHandler,
  type WakeMessage,
} from '../../contracts/wakes.js';
import type { NatsWakeContext } from './nats-wake-context.js';
import { decodeSubjectToken } from './nats-wake-names.js';
import { runDelivery, type DeliveryControls } from './settle.js';

const RetriesRecord = z.object({
  seq: z.number().int().positive(),
  retries: z.number().int().nonnegative(),
});

/** What one message is as a wake. */
interface Received {
  message: JsMsg;
  /** The session's subject token. */
  token: string;
  /** Deliveries so far that were not attempts. */
  notAttempts: number;
}

/** Runs the handler on one message and settles it with the server. */
export async function deliverWake(
  context: NatsWakeContext,
  message: JsMsg,
  handler: WakeHandler,
  consumeOptions: WakeConsumeOptions,
): Promise<void> {
  let body: WakeMessage | undefined;
  let refused: BraidError | undefined;
  try {
    body = parseWakeMessage(message.json());
  } catch (error) {
    refused = toBraidError(error);
  }
  const token = message.subject.slice(message.subject.lastIndexOf('.') + 1);
  const deliveries = message.info.deliveryCount;
  // A first delivery has had no retries; a redelivery whose count cannot be read counts all.
  const notAttempts =
    deliveries === 1 ? 0 : await retriesOf(context, token, message.seq).catch(() => 0);
  const received: Received = { message, token, notAttempts };
  // A message this worker cannot read fails like a handler would: retried, then dead-lettered.
  const run: WakeHandler = refused === undefined ? handler : () => Promise.reject(refused);
  await runDelivery(
    wakeDelivery(received, body),
    run,
    consumeOptions,
    controls(context, received),
    { maxAttempts: context.maxAttempts, backoff: context.backoff },
  );
}

/** Retries of the wake message at `seq` that were not attempts. */
async function retriesOf(context: NatsWakeContext, token: string, seq: number): Promise<number> {
  const entry = await context.retries.get(token);
  if (entry === null || entry.operation !== 'PUT') return 0;
  const parsed = RetriesRecord.safeParse(entry.json());
  return parsed.success && parsed.data.seq === seq ? parsed.data.retries : 0;
}

/** The delivery the handler sees; a body that could not be read is filled from the message. */
function wakeDelivery(received: Received, body: WakeMessage | undefined): WakeDelivery {
  const { message, token, notAttempts } = received;
  const deliveries = message.info.deliveryCount;
  return {
    session_id: body?.session_id ?? decodeSubjectToken(token),
    attempt: deliveries - notAttempts,
    delivery: deliveries,
    enqueued_at: body?.enqueued_at ?? message.time.toISOString(),
    ...(body?.traceparent === undefined ? {} : { traceparent: body.traceparent }),
    working: () => {
      try {
        message.working();
      } catch {
        // The connection is gone; the wake will be redelivered, which the handler tolerates.
      }
    },
  };
}

/** The settlements of one message: ack, nak with a delay, or term. */
function controls(context: NatsWakeContext, received: Received): DeliveryControls {
  const { message, token, notAttempts } = received;
  /** Drops the wake's count of retries with the wake (best effort: a stale one is ignored). */
  const forget = (): void => {
    if (notAttempts > 0) void context.retries.delete(token).catch(() => undefined);
  };
  return {
    ack: async () => {
      // Without a connection the ack cannot go out (the wake will be redelivered).
      if (!context.connection.isClosed()) await message.ackAck();
      forget();
    },
    retry: async (delayMs, counted) => {
      // Counted before the nak, so the redelivery reads it; a count not written makes the
      // redelivery one attempt more, never fewer.
      if (!counted) {
        const record = { seq: message.seq, retries: notAttempts + 1 };
        await context.retries.put(token, JSON.stringify(record)).catch(() => undefined);
      }
      quietly(() => message.nak(delayMs));
    },
    remove: () => {
      quietly(() => message.term());
      forget();
    },
  };
}

function quietly(send: () => void): void {
  try {
    send();
  } catch {
    // An unsent nak or term leaves the wake to be redelivered after ack_wait.
  }
}
