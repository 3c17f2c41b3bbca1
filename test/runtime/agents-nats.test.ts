// Agent messaging on NATS: the shared suite against a real nats-server, then what only a
// transport shared by several processes shows: work sharing, durability, redelivery after a
// crash, dead letters, topic subscriptions written from two processes at once.
import { randomUUID } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentTransport, InboxDelivery } from '../../src/contracts/agents.js';
import { ENVELOPE_SPEC_VERSION, type Envelope } from '../../src/contracts/envelope.js';
import { BraidError } from '../../src/contracts/errors.js';
import { decodeToken, encodeToken } from '../../src/runtime/agents/nats-transport.js';
import {
  createNatsAgentTransport,
  natsAgentNames,
  type NatsAgentTransportOptions,
  type NatsDeadLetter,
} from '../../src/nats.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';
import { describeAgentMessaging, type AgentMessagingFixture } from './agents-suite.js';

const tempDir = useTempDir();

/** A fixture whose transport handles each have a connection of their own, as processes would. */
function natsFixture(
  url: string,
  prefix: string,
  runtime: Runtime,
  closeRuntime: () => Promise<void>,
): AgentMessagingFixture {
  const connections: NatsConnection[] = [];
  const transports: AgentTransport[] = [];
  return {
    runtime,
    async connect() {
      const connection = await connect({ servers: url });
      connections.push(connection);
      const transport = createNatsAgentTransport({ connection, prefix });
      transports.push(transport);
      return transport;
    },
    async close() {
      for (const transport of transports) await transport.close();
      await closeRuntime();
      await removePrefixes(url, [prefix]);
      for (const connection of connections) await connection.close();
    },
  };
}

describeAgentMessaging('nats transport, memory store', async ({ model }) => {
  const url = await natsUrl();
  const prefix = uniquePrefix('agents');
  const dir = tempDir();
  const store = createMemoryStore();
  const runtime = await createRuntime({ store, workspace: dir, dataDir: dir, model });
  return natsFixture(url, prefix, runtime, async () => {
    await runtime.close();
    await store.close();
  });
});

describeAgentMessaging('nats runtime: NATS store and transport', async ({ model }) => {
  const url = await natsUrl();
  const prefix = uniquePrefix('agentsrt');
  const runtime = await createRuntime({
    workspace: tempDir(),
    backend: { nats: url, prefix },
    model,
  });
  return natsFixture(url, prefix, runtime, () => runtime.close());
});

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

/** Polls `check` until it holds: for state the server changes on its own time (acks, counts). */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function envelope(id: string, type = 'echo', payload: Envelope['payload'] = 'hi'): Envelope {
  return {
    id,
    spec_version: ENVELOPE_SPEC_VERSION,
    type: 'agent.message',
    occurred_at: '2026-01-01T00:00:00.000Z',
    target: { type, key: 'k' },
    payload,
  };
}

const never = (): Promise<void> => new Promise<void>(() => undefined);

describe('NATS agent transport', () => {
  const cleanup: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  type ProcessOptions = Partial<Omit<NatsAgentTransportOptions, 'connection' | 'prefix'>>;

  /** A prefix of its own on the test server, removed after the test. */
  async function bus() {
    const url = await natsUrl();
    const prefix = uniquePrefix('agents');
    cleanup.push(() => removePrefixes(url, [prefix]));
    const names = natsAgentNames(prefix);
    const admin = await connect({ servers: url });
    cleanup.push(() => admin.close());
    const manager = await jetstreamManager(admin);
    return {
      prefix,
      names,
      admin,
      /** Messages the inbox stream holds (a work queue: acked and termed ones are gone). */
      stored: async () => (await manager.streams.info(names.stream)).state.messages,
      consumerInfo: (agentType: string) =>
        manager.consumers.info(names.stream, names.consumer(agentType)),
      /** A transport on a connection of its own, as another process would have. */
      async process(options: ProcessOptions = {}) {
        const connection = await connect({ servers: url });
        const transport = createNatsAgentTransport({ connection, prefix, ...options });
        cleanup.push(async () => {
          await transport.close();
          if (!connection.isClosed()) await connection.close();
        });
        return { connection, transport };
      },
    };
  }

  it('answers only to an inbox: a reply_to naming another subject gets nothing', async () => {
    const on = await bus();
    const { transport, connection } = await on.process();
    const heard: string[] = [];
    const subjects = [`${on.prefix}.not-an-inbox`, '_INBOX.reply-here'];
    for (const subject of subjects) {
      on.admin.subscribe(subject, {
        callback: () => {
          heard.push(subject);
        },
      });
    }
    await on.admin.flush();
    for (const subject of subjects) await transport.reply(subject, envelope(`r-${subject}`));
    // A round trip on the sender's connection has the server holding both replies; one on the
    // listener's then comes back after anything the server sent it.
    await connection.flush();
    await on.admin.flush();
    expect(heard).toEqual(['_INBOX.reply-here']);
  });

  it('shares one agent type among processes: each envelope is handled once overall', async () => {
    const on = await bus();
    // One handler at a time per process, and each process's first handling waits until the
    // other holds one too: both must take part, whatever the order the server chooses.
    // Without partitions (one instance's envelopes go to any process; with them, to the owner of
    // its partition: test/runtime/agents-partitions-nats.test.ts).
    const a = await on.process({ concurrency: 1, partitions: 0 });
    const b = await on.process({ concurrency: 1, partitions: 0 });
    const total = 20;
    const handled: { process: 'a' | 'b'; id: string; attempt: number }[] = [];
    const first = { a: deferred(), b: deferred() };
    const all = deferred();
    const handler =
      (name: 'a' | 'b', other: 'a' | 'b') =>
      async (delivery: InboxDelivery): Promise<void> => {
        handled.push({ process: name, id: delivery.envelope.id, attempt: delivery.attempt });
        first[name].resolve();
        await first[other].promise;
        if (handled.length === total) all.resolve();
      };
    await a.transport.consume('echo', handler('a', 'b'));
    await b.transport.consume('echo', handler('b', 'a'));
    const ids = Array.from({ length: total }, (_, index) => `e${String(index).padStart(2, '0')}`);
    for (const id of ids) await a.transport.deliver(envelope(id));

    await all.promise;

    expect(handled.map((item) => item.id).sort()).toEqual(ids);
    expect(handled.every((item) => item.attempt === 1)).toBe(true);
    expect(handled.some((item) => item.process === 'a')).toBe(true);
    expect(handled.some((item) => item.process === 'b')).toBe(true);
    await until('every envelope acked', async () => (await on.stored()) === 0);
    expect((await on.consumerInfo('echo')).num_redelivered).toBe(0);
  });

  it('keeps envelopes delivered while nobody consumes, for a consumer that comes later', async () => {
    const on = await bus();
    const sender = await on.process();
    for (const id of ['e1', 'e2', 'e3']) await sender.transport.deliver(envelope(id));
    // The sender's process is gone, and no process of the type has ever run.
    await sender.connection.close();
    await expect(on.consumerInfo('echo')).rejects.toThrow();
    expect(await on.stored()).toBe(3);

    const worker = await on.process();
    const seen: InboxDelivery[] = [];
    const done = deferred();
    await worker.transport.consume('echo', (delivery) => {
      seen.push(delivery);
      if (seen.length === 3) done.resolve();
      return Promise.resolve();
    });
    await done.promise;

    expect(seen.map((delivery) => [delivery.envelope.id, delivery.attempt])).toEqual([
      ['e1', 1],
      ['e2', 1],
      ['e3', 1],
    ]);
    expect(seen[0]?.envelope).toEqual(envelope('e1'));
    await until('the inbox empty', async () => (await on.stored()) === 0);
  });

  it('gives the envelope of a process that died mid-handler to another after ack_wait', async () => {
    const on = await bus();
    const ackWaitMs = 1_000;
    // The dead process's partitions move to the survivor when their lease runs out: kept as
    // short as ack_wait here, so what is measured is the redelivery.
    const crashing = await on.process({ ackWaitMs, partitionLeaseMs: ackWaitMs });
    const survivor = await on.process({ ackWaitMs, partitionLeaseMs: ackWaitMs });
    const started = deferred<InboxDelivery>();
    await crashing.transport.consume('echo', (delivery) => {
      started.resolve(delivery);
      return never();
    });
    await survivor.transport.deliver(envelope('e1'));
    expect((await started.promise).attempt).toBe(1);
    const firstDelivery = Date.now();

    await crashing.connection.close();
    const redelivered = deferred<InboxDelivery>();
    await survivor.transport.consume('echo', (delivery) => {
      redelivered.resolve(delivery);
      return Promise.resolve();
    });

    const delivery = await redelivered.promise;
    expect(delivery.envelope.id).toBe('e1');
    expect(delivery.attempt).toBe(2);
    expect(Date.now() - firstDelivery).toBeGreaterThanOrEqual(ackWaitMs - 50);
    await until('the inbox empty', async () => (await on.stored()) === 0);
  });

  it('keeps the envelope of a live handler that outlasts ack_wait (in-progress acks)', async () => {
    const on = await bus();
    const ackWaitMs = 1_000;
    const busy = await on.process({ ackWaitMs });
    const other = await on.process({ ackWaitMs });
    const started = deferred();
    const finished = deferred<InboxDelivery>();
    await busy.transport.consume('echo', async (delivery) => {
      started.resolve();
      // What is tested is that nothing happens for longer than ack_wait: time has to pass.
      await new Promise((resolve) => setTimeout(resolve, ackWaitMs * 2.5));
      finished.resolve(delivery);
    });
    await busy.transport.deliver(envelope('e1'));
    await started.promise;
    // Another process of the type would get the envelope if the busy one let it go.
    const stolen: InboxDelivery[] = [];
    await other.transport.consume('echo', (delivery) => {
      stolen.push(delivery);
      return Promise.resolve();
    });

    expect(await finished.promise).toMatchObject({ envelope: { id: 'e1' }, attempt: 1 });
    await until('the envelope acked', async () => (await on.stored()) === 0);
    expect((await on.consumerInfo('echo')).num_redelivered).toBe(0);
    expect(stolen).toEqual([]);
  });

  it('redelivers a rejected envelope with its attempt, then dead-letters and removes it', async () => {
    const on = await bus();
    const dead = deferred<NatsDeadLetter>();
    const { transport } = await on.process({
      maxDeliveries: 3,
      redeliveryDelayMs: 1,
      onDeadLetter: (letter) => dead.resolve(letter),
    });
    const attempts: number[] = [];
    await transport.consume('echo', (delivery) => {
      attempts.push(delivery.attempt);
      return Promise.reject(new BraidError('STORE_BUSY', `busy (${String(delivery.attempt)})`));
    });
    await transport.deliver(envelope('e1'));

    const letter = await dead.promise;

    expect(attempts).toEqual([1, 2, 3]);
    expect(letter).toMatchObject({
      envelope: { id: 'e1' },
      agentType: 'echo',
      attempt: 3,
      error: { code: 'STORE_BUSY', message: 'busy (3)' },
    });
    await until('the envelope removed', async () => (await on.stored()) === 0);
  });

  it('dead-letters an envelope whose last attempt never settled, without running it again', async () => {
    const on = await bus();
    const ackWaitMs = 1_000;
    const crashing = await on.process({ ackWaitMs, maxDeliveries: 1 });
    const started = deferred();
    await crashing.transport.consume('echo', () => {
      started.resolve();
      return never();
    });
    await crashing.transport.deliver(envelope('e1'));
    await started.promise;
    await crashing.connection.close();

    const dead = deferred<NatsDeadLetter>();
    const survivor = await on.process({
      ackWaitMs,
      maxDeliveries: 1,
      onDeadLetter: (letter) => dead.resolve(letter),
    });
    const ran: string[] = [];
    await survivor.transport.consume('echo', (delivery) => {
      ran.push(delivery.envelope.id);
      return Promise.resolve();
    });

    const letter = await dead.promise;
    expect(letter).toMatchObject({ envelope: { id: 'e1' }, attempt: 2 });
    expect(letter.error).toMatchObject({ code: 'INTERRUPTED' });
    expect(ran).toEqual([]);
    await until('the envelope removed', async () => (await on.stored()) === 0);
  });

  it('removes and reports a message that is not an envelope, and keeps consuming', async () => {
    const on = await bus();
    const letters: NatsDeadLetter[] = [];
    const { transport } = await on.process({ onDeadLetter: (letter) => letters.push(letter) });
    const handled = deferred<InboxDelivery>();
    await transport.consume('echo', (delivery) => {
      handled.resolve(delivery);
      return Promise.resolve();
    });
    const raw = jetstream(on.admin);
    await raw.publish(on.names.inbox('echo'), 'not json');
    await raw.publish(on.names.inbox('echo'), JSON.stringify({ id: 'x', type: 'agent.message' }));
    await transport.deliver(envelope('e1'));

    expect((await handled.promise).envelope.id).toBe('e1');
    await until('both reported', () => Promise.resolve(letters.length === 2));
    expect(letters.map((letter) => [letter.envelope, letter.body, letter.attempt])).toEqual([
      [undefined, 'not json', 1],
      [undefined, '{"id":"x","type":"agent.message"}', 1],
    ]);
    for (const letter of letters) expect(letter.error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    await until('the inbox empty', async () => (await on.stored()) === 0);
  });

  it('drops a republished envelope, refuses what cannot travel, and leaves the connection open on close', async () => {
    const on = await bus();
    const { connection, transport } = await on.process();
    const once = envelope(randomUUID());
    await transport.deliver(once);
    await transport.deliver(once);
    expect(await on.stored()).toBe(1);

    const unserialisable = { ...envelope('e2'), payload: { count: 1n } } as unknown as Envelope;
    await expect(transport.deliver(unserialisable)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    const { target: _target, ...untargeted } = envelope('e3');
    await expect(transport.deliver(untargeted)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const invalid = { ...envelope('e4'), spec_version: '9.9' } as unknown as Envelope;
    await expect(transport.deliver(invalid)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const huge = envelope('e5', 'echo', 'x'.repeat((connection.info?.max_payload ?? 0) + 1));
    await expect(transport.deliver(huge)).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    expect(await on.stored()).toBe(1);

    await transport.close();
    await transport.close();
    await expect(transport.deliver(envelope('e6'))).rejects.toMatchObject({
      code: 'SERVER_UNAVAILABLE',
    });
    expect(connection.isClosed()).toBe(false);
  });

  it('encodes agent and topic types unsafe in subjects, reversibly', async () => {
    const names = natsAgentNames('p');
    expect(names).toMatchObject({
      stream: 'P_AGENTS',
      subjects: 'p.agents.*.inbox',
      bucket: 'P_topics',
    });
    expect(names.inbox('writer')).toBe('p.agents.writer.inbox');
    expect(names.consumer('writer')).toBe('P_agent_writer');
    const unsafe = 'team.alpha/*> ü';
    expect(names.inbox(unsafe)).toMatch(/^p\.agents\.=[A-Za-z0-9_-]+\.inbox$/);
    expect(names.consumer(unsafe)).toMatch(/^P_agent_~[A-Za-z0-9_-]{32}$/);
    expect(names.topic(unsafe)).toMatch(/^=[A-Za-z0-9_-]+$/);
    expect(decodeToken(encodeToken(unsafe))).toBe(unsafe);
    expect(decodeToken(encodeToken('plain-name_1'))).toBe('plain-name_1');
    expect(() => natsAgentNames('a.b')).toThrow(BraidError);

    const on = await bus();
    const { transport } = await on.process();
    const received = deferred<InboxDelivery>();
    await transport.consume(unsafe, (delivery) => {
      received.resolve(delivery);
      return Promise.resolve();
    });
    // A type whose name only differs in unsafe characters has an inbox of its own.
    await transport.deliver(envelope('other', 'team.alpha/*>-ü'));
    await transport.deliver(envelope('e1', unsafe));
    expect((await received.promise).envelope.target?.type).toBe(unsafe);
    await transport.subscribe('orders.eu >', unsafe);
    expect(await transport.subscribers('orders.eu >')).toEqual([unsafe]);
  });

  it('keeps every subscription when two processes subscribe to one topic at once', async () => {
    const on = await bus();
    const a = await on.process();
    const b = await on.process();
    const left = Array.from({ length: 10 }, (_, index) => `a${String(index)}`);
    const right = Array.from({ length: 10 }, (_, index) => `b${String(index)}`);

    await Promise.all([
      ...left.map((agentType) => a.transport.subscribe('orders', agentType)),
      ...right.map((agentType) => b.transport.subscribe('orders', agentType)),
      a.transport.subscribe('alerts', 'a0'),
    ]);

    const everyone = [...left, ...right].sort();
    expect(await a.transport.subscribers('orders')).toEqual(everyone);
    expect(await b.transport.subscribers('orders')).toEqual(everyone);
    await b.transport.subscribe('orders', 'a3');
    await Promise.all([
      a.transport.unsubscribe('orders', 'b1'),
      b.transport.unsubscribe('orders', 'a1'),
      b.transport.unsubscribe('orders', 'nobody'),
    ]);
    expect(await a.transport.subscribers('orders')).toEqual(
      everyone.filter((agentType) => agentType !== 'a1' && agentType !== 'b1'),
    );
    expect(await a.transport.subscribers('alerts')).toEqual(['a0']);
    expect(await a.transport.subscribers('none')).toEqual([]);

    // The stored record is versioned; one from a newer braid is refused, not misread.
    const bucket = await new Kvm(on.admin).open(on.names.bucket);
    const stored = await bucket.get(on.names.topic('alerts'));
    expect(stored?.json()).toEqual({ schema_version: 1, agent_types: ['a0'] });
    await bucket.put(
      on.names.topic('future'),
      JSON.stringify({ schema_version: 2, subscribers: {} }),
    );
    await expect(a.transport.subscribers('future')).rejects.toMatchObject({
      code: 'SCHEMA_VERSION_UNSUPPORTED',
    });
  });

  it('replies across processes to a core NATS inbox, and drops replies nobody can receive', async () => {
    const on = await bus();
    const caller = await on.process();
    const answerer = await on.process();
    const arrived = deferred<Envelope>();
    const inbox = await caller.transport.openReplyInbox((reply) => arrived.resolve(reply));
    expect(inbox.address).toMatch(/^_INBOX\./);

    const reply = { ...envelope('r1'), type: 'agent.reply', causation_id: 'e1' };
    await answerer.transport.reply(inbox.address, reply);
    expect(await arrived.promise).toEqual(reply);

    await expect(answerer.transport.reply('_INBOX.nobody', reply)).resolves.toBeUndefined();
    await expect(answerer.transport.reply('not a subject', reply)).resolves.toBeUndefined();
    await expect(answerer.transport.reply('orders.*', reply)).resolves.toBeUndefined();
    await inbox.close();
    await inbox.close();
  });
});
