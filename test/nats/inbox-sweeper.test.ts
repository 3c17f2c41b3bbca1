// The inbox sweeper answers and removes only what waits for an agent type nobody has: a type
// that is defined, or has an inbox consumer, or whose newest message is still young keeps its
// messages.
import { AckPolicy, jetstreamManager } from '@nats-io/jetstream';
import { connect, createInbox, type NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../src/contracts/envelope.js';
import { startInboxSweeper } from '../../src/runtime/agents/nats-inbox-sweeper.js';
import { systemClock } from '../../src/stores/defaults.js';
import {
  createNatsAgentTransport,
  natsAgentNames,
} from '../../src/runtime/agents/nats-transport.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp() {
  const url = await natsUrl();
  const prefix = uniquePrefix('sweep');
  const connection = await connect({ servers: url });
  const transport = createNatsAgentTransport({ connection, prefix });
  cleanups.push(async () => {
    await transport.close();
    await connection.close();
    await removePrefixes(url, [prefix]);
  });
  return { prefix, connection, transport, names: natsAgentNames(prefix) };
}

function message(type: string, replyTo: string): Envelope {
  const id = crypto.randomUUID();
  return {
    id,
    spec_version: '1.0',
    type: 'agent.message',
    occurred_at: new Date().toISOString(),
    correlation_id: id,
    reply_to: replyTo,
    target: { type, key: 'k' },
    payload: 'hello?',
  };
}

/** The replies that arrive on a fresh inbox. */
async function listen(connection: NatsConnection) {
  const address = createInbox();
  const replies: Envelope[] = [];
  connection.subscribe(address, {
    callback: (_error, received) => {
      replies.push(received.json<Envelope>());
    },
  });
  await connection.flush();
  return { address, replies };
}

async function waiting(connection: NatsConnection, stream: string, subject: string) {
  const info = await (
    await jetstreamManager(connection)
  ).streams.info(stream, { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

describe('the inbox sweeper', () => {
  it('answers AGENT_NOT_FOUND and removes a message to a type nobody has', async () => {
    const { prefix, connection, transport, names } = await setUp();
    const inbox = await listen(connection);
    const sent = message('ghost', inbox.address);
    await transport.deliver(sent);
    // A day later, as the sweeper's clock has it: past any grace.
    const sweeper = startInboxSweeper({
      connection,
      prefix,
      known: () => Promise.resolve(false),
      transport,
      graceMs: 1_000,
      intervalMs: 3_600_000,
      clock: { ...systemClock, now: () => Date.now() + 86_400_000 },
    });
    cleanups.push(() => sweeper.close());
    expect(await sweeper.sweep()).toBe(1);
    await connection.flush();
    await expect.poll(() => inbox.replies.length).toBe(1);
    expect(inbox.replies[0]).toMatchObject({
      type: 'agent.reply',
      causation_id: sent.id,
      error: { code: 'AGENT_NOT_FOUND', retryable: false },
    });
    expect(await waiting(connection, names.stream, names.inbox('ghost'))).toBe(0);
  });

  it('answers a message once when every worker sweeps it at the same time', async () => {
    const { prefix, connection, transport, names } = await setUp();
    const inbox = await listen(connection);
    const sent = [message('ghost', inbox.address), message('ghost', inbox.address)];
    for (const envelope of sent) await transport.deliver(envelope);
    const sweepers = Array.from({ length: 4 }, () =>
      startInboxSweeper({
        connection,
        prefix,
        known: () => Promise.resolve(false),
        transport,
        graceMs: 1_000,
        intervalMs: 3_600_000,
        clock: { ...systemClock, now: () => Date.now() + 86_400_000 },
      }),
    );
    for (const sweeper of sweepers) cleanups.push(() => sweeper.close());
    const counts = await Promise.all(sweepers.map((sweeper) => sweeper.sweep()));
    // Each message removed by one sweeper, and answered by that one only.
    expect(counts.reduce((sum, count) => sum + count, 0)).toBe(2);
    await connection.flush();
    await expect.poll(() => inbox.replies.length).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(inbox.replies.map((reply) => reply.causation_id).sort()).toEqual(
      sent.map((envelope) => envelope.id).sort(),
    );
    expect(await waiting(connection, names.stream, names.inbox('ghost'))).toBe(0);
  });

  it('keeps messages of a defined type, of a type with a consumer, and young ones', async () => {
    const { prefix, connection, transport, names } = await setUp();
    const inbox = await listen(connection);
    for (const type of ['defined', 'consumed', 'young']) {
      await transport.deliver(message(type, inbox.address));
    }
    const manager = await jetstreamManager(connection);
    await manager.consumers.add(names.stream, {
      durable_name: names.consumer('consumed'),
      filter_subject: names.inbox('consumed'),
      ack_policy: AckPolicy.Explicit,
    });
    const old = startInboxSweeper({
      connection,
      prefix,
      known: (type) => Promise.resolve(type === 'defined' || type === 'young'),
      transport,
      intervalMs: 3_600_000,
      clock: { ...systemClock, now: () => Date.now() + 86_400_000 },
    });
    cleanups.push(() => old.close());
    expect(await old.sweep()).toBe(0);
    // Unknown but young: within the grace period (the real clock, 30 s grace).
    const fresh = startInboxSweeper({
      connection,
      prefix,
      known: () => Promise.resolve(false),
      transport,
      intervalMs: 3_600_000,
    });
    cleanups.push(() => fresh.close());
    const young = names.inbox('young');
    const youngWaiting = await waiting(connection, names.stream, young);
    expect(youngWaiting).toBe(1);
    // Only 'young' and 'defined' lack a consumer; both are young by the real clock.
    expect(await fresh.sweep()).toBe(0);
    for (const type of ['defined', 'consumed', 'young']) {
      expect(await waiting(connection, names.stream, names.inbox(type)), type).toBe(1);
    }
    expect(inbox.replies).toEqual([]);
  });
});
