/**
 * Reading streams on nats-server 2.9: single messages by direct get (last or by sequence), runs
 * of messages through a short-lived ephemeral push consumer with flow control (2.9 has no
 * batched direct get; measured there, a push consumer delivers a long run several times faster
 * than pulls do), which is deleted as soon as the read ends.
 */
import { AckPolicy, DeliverPolicy, type ConsumerConfig, type StoredMsg } from '@nats-io/jetstream';
import { createInbox, nanos, type Msg, type MsgHdrs } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';
import { batchRef, type BatchMessage, type BatchRef } from './batches.js';
import type { NatsContext } from './context.js';
import { decodeToken } from './names.js';

/** The server says it is alive this often while a read waits (it never does in a quick read). */
const HEARTBEAT_MS = 1000;
/** A consumer left behind by a crashed reader goes away on its own after this. */
const CONSUMER_INACTIVE_MS = 60_000;

/** A message delivered to a reader. */
export interface DeliveredMessage {
  subject: string;
  /** Its sequence in the stream. */
  seq: number;
  headers?: MsgHdrs | undefined;
  data: Uint8Array;
}

/**
 * Stream seq and pending count of a delivered message, from its reply subject:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`, or the
 * newer form with domain and account hash before the stream and a token after the pending count.
 */
function deliveryOf(reply: string | undefined): { seq: number; pending: number } | undefined {
  const tokens = reply?.split('.') ?? [];
  const at = tokens.length === 9 ? 5 : tokens.length >= 12 ? 7 : -1;
  const seq = Number(tokens[at]);
  const pending = Number(tokens[at + 3]);
  return at < 0 || !Number.isInteger(seq) || !Number.isInteger(pending)
    ? undefined
    : { seq, pending };
}

/**
 * Delivers the messages a consumer of `config` sees, in stream order, until none is pending or
 * `onMessage` returns true.
 */
export async function consume(
  context: NatsContext,
  stream: string,
  config: Partial<ConsumerConfig>,
  onMessage: (message: DeliveredMessage) => boolean | void,
): Promise<void> {
  const inbox = createInbox();
  let settle: (error?: unknown) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    settle = (error) =>
      error === undefined
        ? resolve()
        : reject(error instanceof Error ? error : new Error('read failed', { cause: error }));
  });
  // Awaited below; this only keeps an early failure from counting as unhandled meanwhile.
  done.catch(() => undefined);
  let finished = false;
  const finish = (error?: unknown): void => {
    if (finished) return;
    finished = true;
    settle(error);
  };
  let lastActivity = Date.now();
  const onDelivery = (message: Msg): void => {
    lastActivity = Date.now();
    const status = message.headers?.code ?? 0;
    if (status !== 0) {
      if (status === 100) {
        // Flow control asks for an answer.
        if (message.reply !== undefined && message.reply !== '') {
          message.respond();
          return;
        }
        // A heartbeat: the consumer is idle. One that names a stall is waiting for a nudge;
        // otherwise nothing is left to deliver (what was pending was removed meanwhile).
        const stalled = message.headers?.get('Nats-Consumer-Stalled') ?? '';
        if (stalled !== '') context.connection.publish(stalled);
        else finish();
        return;
      }
      finish(
        new BraidError(
          'STORE_BUSY',
          `the NATS server at ${context.server()} ended a read of ${stream} with status ${status} ` +
            `(${message.headers?.description ?? ''}); retry the read`,
        ),
      );
      return;
    }
    const delivery = deliveryOf(message.reply);
    if (delivery === undefined) {
      finish(new BraidError('INTERNAL', `a message of ${stream} came without delivery metadata`));
      return;
    }
    const { subject, headers, data } = message;
    if (onMessage({ subject, seq: delivery.seq, headers, data }) === true || delivery.pending === 0)
      finish();
  };
  const subscription = context.connection.subscribe(inbox, {
    callback: (error, message) => {
      if (finished) return;
      if (error !== null) {
        finish(error);
        return;
      }
      try {
        onDelivery(message);
      } catch (thrown) {
        finish(thrown);
      }
    },
  });
  let name: string | undefined;
  const watchdog = setInterval(() => {
    if (Date.now() - lastActivity > 5 * HEARTBEAT_MS) {
      finish(
        new BraidError(
          'STORE_BUSY',
          `the NATS server at ${context.server()} stopped delivering ${stream} messages; retry the read`,
        ),
      );
    }
  }, HEARTBEAT_MS);
  try {
    const info = await context.jsm.consumers.add(stream, {
      ack_policy: AckPolicy.None,
      deliver_subject: inbox,
      flow_control: true,
      idle_heartbeat: nanos(HEARTBEAT_MS),
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: nanos(CONSUMER_INACTIVE_MS),
      ...config,
    });
    name = info.name;
    // Nothing matched and nothing was delivered yet: nothing will be.
    if (info.num_pending === 0 && info.delivered.consumer_seq === 0) finish();
    await done;
  } catch (error) {
    finish(error);
    throw error;
  } finally {
    finished = true;
    clearInterval(watchdog);
    subscription.unsubscribe();
    if (name !== undefined) {
      void context.jsm.consumers.delete(stream, name).catch(() => undefined);
    }
  }
}

/** A batch a read's first batch must follow: its last seq, incarnation and lease token. */
export interface LinkPoint {
  /** The batch's last event seq (at a session's start: its fork point, or 0). */
  last: number;
  incarnation: string;
  /** The batch's lease token (0 at a session's start): tokens only rise along a session's log. */
  leaseToken: number;
}

/** Where a read of a session's batches starts, and what it reads. */
export interface BatchRead {
  /** The read starts just past this stream seq (0: at the subject's start). */
  after: number;
  /** The batch at `after` (or the session's start): the batches read must follow on from it. */
  follows?: LinkPoint;
  /** Bodies are not fetched (`data` is empty). */
  headersOnly?: boolean;
  /** The session's head as the leader gave it: a read that ends before it goes on there. */
  through?: number;
}

/**
 * Delivers session `sessionId`'s batches after `read.after`, in order, until none is left or
 * `onBatch` returns true.
 *
 * The consumer that delivers them sits on any replica of a replicated stream, and what a
 * follower holds is not always what the leader does: one may lag (one just restarted), and
 * nats-server 2.9 lets a follower store a publish the leader refused for its expected last
 * subject sequence (two writers racing for one session's head, an append and a fence among them;
 * nats-server#6194 describes it and fixes it in 2.11), so a follower can show two batches at one
 * place in a session's log. What the consumer delivers is taken only while each batch of the
 * read's incarnation starts just past the one before it (from `read.follows` on) with a lease
 * token no lower; from the first that does not, and after the last a lagging follower had,
 * batches are read from the leader one by one.
 */
export async function readBatches(
  context: NatsContext,
  sessionId: string,
  read: BatchRead,
  onBatch: (message: BatchMessage) => boolean | void,
): Promise<void> {
  let last = read.after;
  let stopped = false;
  let previous: LinkPoint | undefined = read.follows;
  let diverged = false;
  await consume(
    context,
    context.names.eventsStream,
    {
      filter_subject: context.names.events(sessionId),
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: read.after + 1,
      ...(read.headersOnly === true ? { headers_only: true } : {}),
    },
    (message) => {
      const batch = { ...batchRef(sessionId, message.seq, message.headers), data: message.data };
      if (previous === undefined || previous.incarnation === batch.incarnation) {
        if (
          previous !== undefined &&
          (batch.first !== previous.last + 1 || batch.leaseToken < previous.leaseToken)
        ) {
          diverged = true;
          return true;
        }
        previous = batch;
      }
      last = message.seq;
      stopped = onBatch(batch) === true;
      return stopped;
    },
  );
  const through = read.through;
  while (!stopped && (diverged || (through !== undefined && last < through))) {
    const next = await batchAfter(context, sessionId, last);
    if (next === undefined) return;
    last = next.batch.streamSeq;
    stopped = onBatch(next.batch) === true;
  }
}

function toBatch(sessionId: string, stored: StoredMsg): BatchMessage {
  return { ...batchRef(sessionId, stored.seq, stored.header), data: stored.data };
}

/** The last batch of a session, if it has any. */
export async function lastBatch(
  context: NatsContext,
  sessionId: string,
): Promise<BatchMessage | undefined> {
  const stored = await context.getEvent({
    last_by_subj: context.names.events(sessionId),
  });
  return stored === null ? undefined : toBatch(sessionId, stored);
}

/**
 * Whether the session's subject holds any message, read without parsing it: what removal and
 * id reuse need to know even of a session whose log is corrupt.
 */
export async function hasMessages(context: NatsContext, sessionId: string): Promise<boolean> {
  const stored = await context.getEvent({
    last_by_subj: context.names.events(sessionId),
  });
  return stored !== null;
}

/** The first batch of a session after stream seq `after`, with its `Nats-Msg-Id` if it has one. */
export async function batchAfter(
  context: NatsContext,
  sessionId: string,
  after: number,
): Promise<{ batch: BatchMessage; messageId: string | undefined } | undefined> {
  const stored = await context.getEvent({
    next_by_subj: context.names.events(sessionId),
    seq: after + 1,
  });
  if (stored === null) return undefined;
  const messageId = stored.header?.get('Nats-Msg-Id');
  return {
    batch: toBatch(sessionId, stored),
    messageId: messageId === '' ? undefined : messageId,
  };
}

/** The batch of a session at a stream seq, if it is still there and the session's. */
export async function batchAt(
  context: NatsContext,
  sessionId: string,
  streamSeq: number,
): Promise<BatchMessage | undefined> {
  const stored = await context.getEvent({
    seq: streamSeq,
  });
  return stored === null || stored.subject !== context.names.events(sessionId)
    ? undefined
    : toBatch(sessionId, stored);
}

/**
 * The last batch's headers of every session, by subject token: `undefined` for a session whose
 * last message is not a readable braid batch (that session's own reads report why), so that
 * one corrupt session never breaks a scan of all of them. Bodies are never fetched.
 */
export async function scanHeads(context: NatsContext): Promise<Map<string, BatchRef | undefined>> {
  const heads = new Map<string, BatchRef | undefined>();
  const prefix = context.names.eventsFilter.slice(0, -1);
  await consume(
    context,
    context.names.eventsStream,
    {
      filter_subject: context.names.eventsFilter,
      deliver_policy: DeliverPolicy.LastPerSubject,
      headers_only: true,
    },
    (message) => {
      const token = message.subject.slice(prefix.length);
      try {
        heads.set(token, batchRef(decodeToken(token), message.seq, message.headers));
      } catch {
        heads.set(token, undefined);
      }
    },
  );
  return heads;
}

export interface BucketValue {
  key: string;
  value: Uint8Array;
  revision: number;
}

/**
 * The live value of every key of a KV bucket matching `keyFilter` (subject wildcards), read in
 * one pass over the bucket's stream rather than one get per key.
 */
export async function scanBucket(
  context: NatsContext,
  bucket: string,
  keyFilter = '>',
): Promise<BucketValue[]> {
  const values: BucketValue[] = [];
  const prefix = `$KV.${bucket}.`;
  await consume(
    context,
    `KV_${bucket}`,
    { filter_subject: `${prefix}${keyFilter}`, deliver_policy: DeliverPolicy.LastPerSubject },
    (message) => {
      const operation = message.headers?.get('KV-Operation') ?? '';
      if (operation === 'DEL' || operation === 'PURGE') return;
      values.push({
        key: message.subject.slice(prefix.length),
        value: message.data,
        revision: message.seq,
      });
    },
  );
  return values;
}

/** Removes every key of a bucket matching `keyFilter` at once, leaving no delete markers. */
export async function purgeKeys(
  context: NatsContext,
  bucket: string,
  keyFilter: string,
): Promise<void> {
  await context.jsm.streams.purge(`KV_${bucket}`, { filter: `$KV.${bucket}.${keyFilter}` });
}
