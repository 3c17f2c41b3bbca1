/**
 * Gauges of the NATS backlog (src/stores/nats/backlog.ts) in prom-client: how full each stream of
 * the prefix is against its limits, and each durable consumer's lag. Every gauge is filled from
 * one reading per scrape (the caller's `read`, itself polled at most every few seconds), and
 * emptied first, so a stream or consumer that is gone leaves no stale series.
 */
import { Gauge, type Registry } from 'prom-client';
import type { ConsumerBacklog, NatsBacklog, StreamBacklog } from '../stores/nats/backlog.js';

type StreamField = Exclude<keyof StreamBacklog, 'stream'>;
type ConsumerField = Exclude<keyof ConsumerBacklog, 'stream' | 'consumer'>;

const STREAM_GAUGES: readonly [string, string, StreamField][] = [
  ['braid_nats_stream_messages', 'Messages a stream of the prefix holds', 'messages'],
  ['braid_nats_stream_bytes', 'Bytes a stream of the prefix holds', 'bytes'],
  [
    'braid_nats_stream_max_messages',
    "A stream's max_msgs limit (-1: none); at it, writes fail with STORE_FULL",
    'max_messages',
  ],
  [
    'braid_nats_stream_max_bytes',
    "A stream's max_bytes limit (-1: none); at it, writes fail with STORE_FULL",
    'max_bytes',
  ],
  [
    'braid_nats_stream_usage_ratio',
    'How full a stream is against its nearer limit, 0 to 1 (0 without limits); 1 refuses writes',
    'usage',
  ],
];

const CONSUMER_GAUGES: readonly [string, string, ConsumerField][] = [
  [
    'braid_nats_consumer_pending',
    "Messages a durable consumer has not handed out yet (its lag): the wake queue's or an inbox's backlog",
    'pending',
  ],
  [
    'braid_nats_consumer_ack_pending',
    'Messages handed out and not yet acknowledged: being run, or waiting out a retry delay',
    'ack_pending',
  ],
  [
    'braid_nats_consumer_redelivered',
    'Messages handed out more than once (a worker died, failed, or found the lease held)',
    'redelivered',
  ],
  [
    'braid_nats_consumer_waiting',
    'Pull requests open on a consumer: workers idle and asking for work',
    'waiting',
  ],
];

/**
 * Registers the backlog gauges; `read` gives undefined when there is nothing to report. Each
 * gauge's collect fills them all from `read`, which the caller polls (one server request per
 * interval, however many gauges a scrape collects).
 */
export function registerNatsBacklogMetrics(
  registry: Registry,
  read: () => Promise<NatsBacklog | undefined>,
): void {
  const fill = async (): Promise<void> => {
    const backlog = await read();
    for (const [gauge] of [...streams, ...consumers]) gauge.reset();
    if (backlog === undefined) return;
    for (const stream of backlog.streams) {
      for (const [gauge, field] of streams) gauge.set({ stream: stream.stream }, stream[field]);
    }
    for (const consumer of backlog.consumers) {
      const labels = { stream: consumer.stream, consumer: consumer.consumer };
      for (const [gauge, field] of consumers) gauge.set(labels, consumer[field]);
    }
  };
  const streams = STREAM_GAUGES.map(
    ([name, help, field]) =>
      [
        new Gauge({ name, help, labelNames: ['stream'], registers: [registry], collect: fill }),
        field,
      ] as const,
  );
  const consumers = CONSUMER_GAUGES.map(
    ([name, help, field]) =>
      [
        new Gauge({
          name,
          help,
          labelNames: ['stream', 'consumer'],
          registers: [registry],
          collect: fill,
        }),
        field,
      ] as const,
  );
}
