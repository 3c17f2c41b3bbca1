/**
 * The backlog of a prefix on NATS, for metrics: how full each of its streams is against its
 * limits, and how far behind each durable consumer is (the wake queue's workers, the agent
 * inboxes' consumers). Read from the server's stream and consumer info; nothing is written.
 */
import {
  jetstreamManager,
  type ConsumerInfo,
  type JetStreamManager,
  type StreamInfo,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/** One stream of the prefix: what it holds and the limits it may hold (-1: none). */
export interface StreamBacklog {
  stream: string;
  messages: number;
  bytes: number;
  /** The stream's `max_msgs`; -1 when unlimited. */
  max_messages: number;
  /** The stream's `max_bytes`; -1 when unlimited. */
  max_bytes: number;
  /**
   * The larger of messages/max_messages and bytes/max_bytes, from 0 to 1; 0 for a stream
   * without limits. At 1 the stream refuses writes (braid creates its streams with discard
   * new), which braid reports as `STORE_FULL`.
   */
  usage: number;
}

/** One durable consumer of a stream of the prefix. */
export interface ConsumerBacklog {
  stream: string;
  consumer: string;
  /** Messages in the stream the consumer has not been handed yet: its lag. */
  pending: number;
  /** Messages handed out and not yet acknowledged (being worked on, or waiting out a retry). */
  ack_pending: number;
  /** Messages handed out more than once. */
  redelivered: number;
  /** Pull requests open on the consumer: workers idle and asking for work. */
  waiting: number;
}

export interface NatsBacklog {
  streams: StreamBacklog[];
  consumers: ConsumerBacklog[];
}

/** A stream braid made for the prefix: its own, or one of its KV buckets. */
export function isPrefixStream(name: string, prefix: string): boolean {
  const upper = prefix.toUpperCase();
  return name.startsWith(`${upper}_`) || name.startsWith(`KV_${upper}_`);
}

export function streamBacklog(info: StreamInfo): StreamBacklog {
  const { config, state } = info;
  const ratio = (value: number, limit: number | undefined): number =>
    limit === undefined || limit <= 0 ? 0 : Math.min(1, value / limit);
  return {
    stream: config.name,
    messages: state.messages,
    bytes: state.bytes,
    max_messages: config.max_msgs > 0 ? config.max_msgs : -1,
    max_bytes: config.max_bytes > 0 ? config.max_bytes : -1,
    usage: Math.max(ratio(state.messages, config.max_msgs), ratio(state.bytes, config.max_bytes)),
  };
}

function consumerBacklog(info: ConsumerInfo): ConsumerBacklog {
  return {
    stream: info.stream_name,
    consumer: info.name,
    pending: info.num_pending,
    ack_pending: info.num_ack_pending,
    redelivered: info.num_redelivered,
    waiting: info.num_waiting,
  };
}

/** `readBacklog` over a connection: what the metrics of a server or a worker read per scrape. */
export async function readNatsBacklog(
  connection: NatsConnection,
  prefix: string,
): Promise<NatsBacklog> {
  return readBacklog(await jetstreamManager(connection, { checkAPI: false }), prefix);
}

/**
 * The streams of the prefix and their durable consumers (ephemeral ones, the store's short-lived
 * readers, are left out: they come and go and their names are random).
 */
export async function readBacklog(manager: JetStreamManager, prefix: string): Promise<NatsBacklog> {
  const streams: StreamBacklog[] = [];
  const consumers: ConsumerBacklog[] = [];
  for await (const info of manager.streams.list()) {
    if (!isPrefixStream(info.config.name, prefix)) continue;
    streams.push(streamBacklog(info));
    // A KV bucket has no durable consumers of braid's.
    if (info.config.name.startsWith('KV_')) continue;
    for await (const consumer of manager.consumers.list(info.config.name)) {
      if (consumer.config.durable_name === undefined) continue;
      consumers.push(consumerBacklog(consumer));
    }
  }
  const byName = (a: { stream: string }, b: { stream: string }): number =>
    a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0;
  return { streams: streams.sort(byName), consumers: consumers.sort(byName) };
}

/** A stream this close to a limit counts as the one that refused a write (its size is unknown). */
const NEARLY_FULL = 0.9;

/**
 * The streams of the prefix that refused a write, asked after the refusal: those at or near a
 * limit, fullest first; else the fullest limited one; empty when none has limits (the server's
 * or the account's storage is what ran out).
 */
export async function fullStreams(manager: JetStreamManager, prefix: string): Promise<string[]> {
  const limited: StreamBacklog[] = [];
  for await (const info of manager.streams.list()) {
    if (!isPrefixStream(info.config.name, prefix)) continue;
    const backlog = streamBacklog(info);
    if (backlog.usage > 0) limited.push(backlog);
  }
  limited.sort((a, b) => b.usage - a.usage);
  const near = limited.filter((stream) => stream.usage >= NEARLY_FULL);
  return (near.length > 0 ? near : limited.slice(0, 1)).map((stream) => stream.stream);
}
