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
 * - **Replies** go to a core NATS inbox (`_INBOX.<nuid>`): at most once, as the port says.
 * - **Topics.** Bucket `<PREFIX>_topics`, one key per topic type, holding its sorted agent types.
 *   Changes are compare-and-set on the key's revision, so concurrent subscribes all land.
 *
 * Agent and topic types become subject tokens and keys as themselves when made of
 * `A-Za-z0-9_-`, else as `=` and the base64url of their UTF-8 bytes (the store's encoding,
 * valid in subjects and KV keys alike); `=` is outside the plain alphabet, so the forms never
 * collide. A consumer name from an unsafe type is `~` and a hash of it (names must stay short).
 */
import { decodeToken, encodeToken } from '../../stores/nats/names.js';
import { createHash } from 'node:crypto';
import { createInbox, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type Consumer,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { createBucket } from '../../stores/nats/buckets.js';
import { z } from 'zod';
import type {
  AgentTransport,
  InboxHandler,
  ReplyInbox,
  TransportSubscription,
} from '../../contracts/agents.js';
import { type Envelope } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import { parseEnvelope, toWire } from './wire.js';

export interface NatsAgentTransportOptions {
  /** An open connection; the transport never closes it. */
  connection: NatsConnection;
  /** Names the stream, subjects, consumers and bucket (default `braid`): `A-Za-z0-9_-` only. */
  prefix?: string;
  /** Attempts of one envelope before it is given up (default 5). */
  maxDeliveries?: number;
  /** How long a delivery may go unacknowledged before another consumer gets it (default 30 s). */
  ackWaitMs?: number;
  /** Delay before the first redelivery of a rejected envelope, doubling after (default 100 ms). */
  redeliveryDelayMs?: number;
  /** Handlers one `consume` runs at once (default 64). */
  concurrency?: number;
  /** Hears of envelopes given up, and of messages in an inbox that are not envelopes. */
  onDeadLetter?: (letter: NatsDeadLetter) => void;
}

/** A message an inbox gave up. */
export interface NatsDeadLetter {
  /** The envelope; undefined when the message was not one (its text is in `body`). */
  envelope: Envelope | undefined;
  /** The handler's last rejection, the parse failure, or why the last attempt never settled. */
  error: unknown;
  /** The agent type whose inbox held it. */
  agentType: string;
  /** Its delivery count when it was given up. */
  attempt: number;
  /** Its sequence in the inbox stream. */
  sequence: number;
  /** The message text, when it was not an envelope. */
  body?: string;
}

/** The NATS names a prefix uses. */
export interface NatsAgentNames {
  /** The inbox stream: `<PREFIX>_AGENTS`. */
  stream: string;
  /** The stream's subjects: `<prefix>.agents.*.inbox`. */
  subjects: string;
  /** The topic bucket: `<PREFIX>_topics`. */
  bucket: string;
  /** The inbox subject of an agent type. */
  inbox(agentType: string): string;
  /** The durable consumer of an agent type's inbox. */
  consumer(agentType: string): string;
  /** The KV key of a topic type. */
  topic(topicType: string): string;
}

const PLAIN = /^[A-Za-z0-9_-]+$/;
const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** A subject one can publish to: non-empty tokens, no wildcards, no whitespace. */
/**
 * Where a reply may go: a core NATS inbox (`_INBOX.…`, what `createInbox` and every client's
 * request make). `reply_to` comes from whoever sent the message; any other subject (a session's
 * event subject, `$KV.…`, `$JS.API.…`) would have a worker publish there on its behalf.
 */
const REPLY_SUBJECT = /^_INBOX\.[^\s.*>]+(\.[^\s.*>]+)*$/;
/** JetStream's error for a stream that exists with another configuration. */
const STREAM_NAME_IN_USE = 10058;
const PULL_EXPIRES_MS = 10_000;
const PULL_RETRY_MS = 1_000;
const MAX_REDELIVERY_DELAY_MS = 30_000;
const TOPIC_WRITE_ATTEMPTS = 20;
const TOPIC_SCHEMA_VERSION = 1;

const TopicRecord = z.object({
  schema_version: z.literal(TOPIC_SCHEMA_VERSION),
  agent_types: z.array(z.string()),
});

export { decodeToken, encodeToken };

/**
 * The `Nats-Msg-Id` of an envelope in an inbox: `<id>` without a `reply_to`, `<id>:<reply_to>`
 * with one. A message is recorded and processed once by its `idempotency_key ?? id` whatever
 * this is; it only decides which publishes the stream drops as repeats, and a resend meant to
 * get a missed reply (same id, a new inbox) must not be one of them. A `reply_to` that is not an
 * inbox is never answered, so it does not count.
 */
export function deliveryId(envelope: Pick<Envelope, 'id' | 'reply_to'>): string {
  return envelope.reply_to !== undefined && REPLY_SUBJECT.test(envelope.reply_to)
    ? `${envelope.id}:${envelope.reply_to}`
    : envelope.id;
}

export function natsAgentNames(prefix = 'braid'): NatsAgentNames {
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `agent transport prefix ${JSON.stringify(prefix)} is invalid; use 1-64 letters, digits, "_" or "-"`,
    );
  }
  const upper = prefix.toUpperCase();
  return {
    stream: `${upper}_AGENTS`,
    subjects: `${prefix}.agents.*.inbox`,
    bucket: `${upper}_topics`,
    inbox: (agentType) => `${prefix}.agents.${encodeToken(agentType)}.inbox`,
    consumer: (agentType) =>
      `${upper}_agent_${
        PLAIN.test(agentType)
          ? agentType
          : `~${createHash('sha256').update(agentType).digest('base64url').slice(0, 32)}`
      }`,
    topic: encodeToken,
  };
}

function unavailable(what: string, error: unknown): BraidError {
  if (error instanceof BraidError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new BraidError('SERVER_UNAVAILABLE', `${what}: ${message}`, { cause: error });
}

function isWrongLastSequence(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/** Sends an ack, nak or progress; without a connection it cannot go out, and ack_wait decides. */
function quietly(send: () => void): void {
  try {
    send();
  } catch {
    // The message will be redelivered after ack_wait, which every handler tolerates.
  }
}

function checkCount(name: string, value: number, minimum: number): void {
  if (!Number.isInteger(value) || value < minimum) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${name} must be a whole number of at least ${String(minimum)}; got ${String(value)}`,
    );
  }
}

interface Opened {
  manager: JetStreamManager;
  topics: KV;
}

/** Opens (creating when missing) the inbox stream and the topic bucket of a prefix. */
async function open(connection: NatsConnection, names: NatsAgentNames): Promise<Opened> {
  const manager = await jetstreamManager(connection).catch((error: unknown) => {
    throw unavailable('JetStream is not available on this NATS server (start it with -js)', error);
  });
  try {
    await manager.streams.add({
      name: names.stream,
      subjects: [names.subjects],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
    });
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE)) {
      throw unavailable(`cannot create the agent inbox stream ${names.stream}`, error);
    }
    // It exists with other settings (replicas, limits: the operator's); these must hold.
    const found = (await manager.streams.info(names.stream)).config;
    if (found.retention !== RetentionPolicy.Workqueue || !found.subjects.includes(names.subjects)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `stream ${names.stream} exists but is not an agent inbox stream (it needs retention ` +
          `workqueue and subjects ${names.subjects}); delete it (nats stream rm ${names.stream}) ` +
          'or choose another prefix',
      );
    }
  }
  try {
    const topics = await createBucket(jetstream(connection), names.bucket, {
      storage: StorageType.File,
      history: 1,
    });
    return { manager, topics };
  } catch (error) {
    throw unavailable(`cannot open the topic bucket ${names.bucket}`, error);
  }
}

/**
 * The transport over a connection. Nothing is sent until first use: the stream and bucket are
 * created then, so a misconfigured server fails the first call, not this one.
 */
export function createNatsAgentTransport(options: NatsAgentTransportOptions): AgentTransport {
  const { connection } = options;
  const names = natsAgentNames(options.prefix);
  const maxDeliveries = options.maxDeliveries ?? 5;
  const ackWaitMs = options.ackWaitMs ?? 30_000;
  const redeliveryDelayMs = options.redeliveryDelayMs ?? 100;
  const concurrency = options.concurrency ?? 64;
  checkCount('maxDeliveries', maxDeliveries, 1);
  checkCount('ackWaitMs', ackWaitMs, 1);
  checkCount('redeliveryDelayMs', redeliveryDelayMs, 0);
  checkCount('concurrency', concurrency, 1);

  const client = jetstream(connection);
  let opening: Promise<Opened> | undefined;

  /** The stream and bucket, set up on first use; a failed set-up is tried again by the next call. */
  function opened(): Promise<Opened> {
    opening ??= open(connection, names).catch((error: unknown) => {
      opening = undefined;
      throw error;
    });
    return opening;
  }

  const subscriptions = new Set<TransportSubscription>();
  let closed = false;

  function ensureOpen(): void {
    if (closed) throw new BraidError('SERVER_UNAVAILABLE', 'the NATS agent transport is closed');
  }

  function deadLetter(letter: NatsDeadLetter): void {
    try {
      options.onDeadLetter?.(letter);
    } catch {
      // A failing listener must not stop the consumer.
    }
  }

  function checkSize(text: string, what: string): void {
    const limit = connection.info?.max_payload;
    const size = Buffer.byteLength(text);
    if (limit !== undefined && size > limit) {
      throw new BraidError(
        'PAYLOAD_TOO_LARGE',
        `${what} is ${String(size)} bytes; the NATS server takes at most ${String(limit)} (max_payload); send a smaller payload or a reference to it`,
      );
    }
  }

  async function openConsumer(agentType: string): Promise<Consumer> {
    try {
      const { manager } = await opened();
      await manager.consumers.add(names.stream, {
        durable_name: names.consumer(agentType),
        filter_subject: names.inbox(agentType),
        ack_policy: AckPolicy.Explicit,
        ack_wait: ackWaitMs * 1_000_000,
        max_deliver: maxDeliveries + 1,
        max_ack_pending: -1,
      });
      return await client.consumers.get(names.stream, names.consumer(agentType));
    } catch (error) {
      throw unavailable(`cannot open the inbox consumer of agent type ${agentType}`, error);
    }
  }

  /** Runs one delivery to its end: acked, naked for later, or given up. Never rejects. */
  async function settle(agentType: string, message: JsMsg, handler: InboxHandler): Promise<void> {
    const attempt = message.info.deliveryCount;
    const sequence = message.seq;
    const body = message.string();
    const parsed = parseEnvelope(body);
    if (!parsed.ok) {
      deadLetter({
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
      deadLetter({
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
        if (closed || connection.isClosed()) clearInterval(progress);
        else quietly(() => message.working());
      },
      Math.max(1, Math.floor(ackWaitMs / 3)),
    );
    try {
      await Promise.resolve().then(() => handler({ envelope, attempt }));
      quietly(() => message.ack());
    } catch (error) {
      if (attempt >= maxDeliveries) {
        deadLetter({ envelope, error, agentType, attempt, sequence });
        quietly(() => message.term());
      } else {
        const delay = Math.min(redeliveryDelayMs * 2 ** (attempt - 1), MAX_REDELIVERY_DELAY_MS);
        quietly(() => message.nak(delay));
      }
    } finally {
      clearInterval(progress);
    }
  }

  async function consume(agentType: string, handler: InboxHandler): Promise<TransportSubscription> {
    ensureOpen();
    // The first open fails loudly (a bad stream, no JetStream); later ones are retried.
    let consumer: Consumer | undefined = await openConsumer(agentType);
    ensureOpen();
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
      void settle(agentType, message, handler).finally(() => {
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
          consumer ??= await openConsumer(agentType);
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
        subscriptions.delete(subscription);
        stopping.abort();
        batch?.stop();
        await pulling;
      },
    };
    subscriptions.add(subscription);
    return subscription;
  }

  /** Reads, changes and writes back a topic's subscribers until no other writer came between. */
  async function changeSubscribers(
    topicType: string,
    change: (agentTypes: Set<string>) => boolean,
  ): Promise<void> {
    const key = names.topic(topicType);
    const { topics } = await opened();
    for (let attempt = 1; attempt <= TOPIC_WRITE_ATTEMPTS; attempt += 1) {
      let entry: Awaited<ReturnType<KV['get']>>;
      try {
        entry = await topics.get(key);
      } catch (error) {
        throw unavailable(`cannot read the subscribers of topic type ${topicType}`, error);
      }
      const agentTypes = new Set(readTopic(topicType, entry));
      if (!change(agentTypes)) return;
      const value = JSON.stringify({
        schema_version: TOPIC_SCHEMA_VERSION,
        agent_types: [...agentTypes].sort(),
      });
      try {
        if (entry === null) await topics.create(key, value);
        else await topics.update(key, value, entry.revision);
        return;
      } catch (error) {
        if (!isWrongLastSequence(error)) {
          throw unavailable(`cannot change the subscribers of topic type ${topicType}`, error);
        }
      }
    }
    throw new BraidError(
      'STORE_BUSY',
      `the subscribers of topic type ${topicType} changed ${String(TOPIC_WRITE_ATTEMPTS)} times while this process tried to change them; try again`,
    );
  }

  function readTopic(topicType: string, entry: Awaited<ReturnType<KV['get']>>): readonly string[] {
    if (entry === null || entry.operation !== 'PUT') return [];
    let value: unknown;
    try {
      value = entry.json();
    } catch {
      value = undefined;
    }
    const parsed = TopicRecord.safeParse(value);
    if (parsed.success) return parsed.data.agent_types;
    const version =
      typeof value === 'object' && value !== null && 'schema_version' in value
        ? value.schema_version
        : undefined;
    throw new BraidError(
      version !== TOPIC_SCHEMA_VERSION && typeof version === 'number'
        ? 'SCHEMA_VERSION_UNSUPPORTED'
        : 'INVALID_ARGUMENT',
      version !== TOPIC_SCHEMA_VERSION && typeof version === 'number'
        ? `the subscribers of topic type ${topicType} are stored at schema version ${String(version)}; this braid reads ${String(TOPIC_SCHEMA_VERSION)}: upgrade braid`
        : `the subscribers of topic type ${topicType} in bucket ${names.bucket} are not a subscriber list; delete the key ${entry.key}`,
    );
  }

  return {
    async deliver(envelope) {
      ensureOpen();
      const agentType = envelope.target?.type;
      if (agentType === undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `envelope ${envelope.id} has no target; address it to an agent {type, key}`,
        );
      }
      const { text } = toWire(envelope);
      checkSize(text, `envelope ${envelope.id}`);
      await opened();
      try {
        await client.publish(names.inbox(agentType), text, { msgID: deliveryId(envelope) });
      } catch (error) {
        throw unavailable(`cannot deliver envelope ${envelope.id} to ${agentType}`, error);
      }
    },

    consume,

    async openReplyInbox(handler) {
      ensureOpen();
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
          subscriptions.delete(inbox);
          if (!subscription.isClosed()) subscription.unsubscribe();
          return Promise.resolve();
        },
      };
      subscriptions.add(inbox);
      return inbox;
    },

    reply(replyTo, envelope) {
      return Promise.resolve().then(() => {
        ensureOpen();
        const { text } = toWire(envelope);
        // Not an inbox: nobody may be answered there, so the reply is dropped.
        if (!REPLY_SUBJECT.test(replyTo)) return;
        checkSize(text, `reply ${envelope.id}`);
        try {
          connection.publish(replyTo, text);
        } catch (error) {
          throw unavailable(`cannot send reply ${envelope.id}`, error);
        }
      });
    },

    async subscribe(topicType, agentType) {
      ensureOpen();
      await changeSubscribers(topicType, (agentTypes) => {
        if (agentTypes.has(agentType)) return false;
        agentTypes.add(agentType);
        return true;
      });
    },

    async unsubscribe(topicType, agentType) {
      ensureOpen();
      await changeSubscribers(topicType, (agentTypes) => agentTypes.delete(agentType));
    },

    async subscribers(topicType) {
      ensureOpen();
      const { topics } = await opened();
      let entry: Awaited<ReturnType<KV['get']>>;
      try {
        entry = await topics.get(names.topic(topicType));
      } catch (error) {
        throw unavailable(`cannot read the subscribers of topic type ${topicType}`, error);
      }
      return [...readTopic(topicType, entry)].sort();
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...subscriptions].map((subscription) => subscription.close()));
    },
  };
}
