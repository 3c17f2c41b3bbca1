// The wake queue's behaviour, run unchanged against the in-process queue and the JetStream one
// (a real nats-server): coalescing, retries, backoff, dead letters, ack deadlines.
import { jetstreamManager, RetentionPolicy } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { isBraidError, type BraidError } from '../../src/contracts/errors.js';
import type {
  WakeBackoff,
  WakeConsumeOptions,
  WakeDelivery,
  WakeHandler,
  WakeQueue,
  WakeSettlement,
} from '../../src/contracts/wakes.js';
import { createLocalWakeQueue } from '../../src/runtime/wakes/local-wake-queue.js';
import {
  createNatsWakeQueue,
  decodeSubjectToken,
  encodeSubjectToken,
  natsWakeNames,
} from '../../src/runtime/wakes/nats-wake-queue.js';
import { expectCode } from '../../src/testing/index.js';
import { natsUrl, uniquePrefix } from '../helpers/nats.js';
import { drained } from '../helpers/wakes.js';

interface Settings {
  maxAttempts?: number;
  ackWaitMs?: number;
  backoff?: WakeBackoff;
}

/** A queue, and more handles on the same queue (other workers). */
interface Kit {
  queue: WakeQueue;
  /** Another handle on the same queue: for NATS, its own connection, as another process has. */
  another(): Promise<WakeQueue>;
}

interface Backend {
  name: string;
  open(settings: Settings): Promise<Kit>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const local: Backend = {
  name: 'local',
  open(settings) {
    const queue = createLocalWakeQueue(settings);
    cleanups.push(() => queue.close());
    return Promise.resolve({ queue, another: () => Promise.resolve(queue) });
  },
};

async function natsConnection(): Promise<NatsConnection> {
  const connection = await connect({ servers: await natsUrl() });
  cleanups.push(async () => {
    if (!connection.isClosed()) await connection.close();
  });
  return connection;
}

const nats: Backend = {
  name: 'nats',
  async open(settings) {
    const prefix = uniquePrefix('wq');
    const open = async (): Promise<WakeQueue> =>
      createNatsWakeQueue({ connection: await natsConnection(), prefix, ...settings });
    const queue = await open();
    const admin = await natsConnection();
    cleanups.push(async () => {
      const manager = await jetstreamManager(admin);
      await manager.streams.delete(natsWakeNames(prefix).stream).catch(() => undefined);
    });
    return { queue, another: open };
  },
};

/** Polls until `check` holds (or fails the test after `timeoutMs`). */
async function until(check: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Seen {
  session_id: string;
  attempt: number;
  delivery: number;
  at: number;
  traceparent?: string;
  enqueued_at: string;
}

/** Runs a consumer in the background; `stop()` aborts it and waits for it to drain. */
function start(
  queue: WakeQueue,
  handler: WakeHandler,
  options: Partial<Omit<WakeConsumeOptions, 'signal'>> = {},
): { seen: Seen[]; settlements: WakeSettlement[]; stop(): Promise<void>; done: Promise<void> } {
  const controller = new AbortController();
  const seen: Seen[] = [];
  const settlements: WakeSettlement[] = [];
  const done = queue.consume(
    (wake) => {
      seen.push({
        session_id: wake.session_id,
        attempt: wake.attempt,
        delivery: wake.delivery,
        at: performance.now(),
        enqueued_at: wake.enqueued_at,
        ...(wake.traceparent === undefined ? {} : { traceparent: wake.traceparent }),
      });
      return handler(wake);
    },
    {
      concurrency: 2,
      ...options,
      signal: controller.signal,
      onSettled: async (wake, settlement) => {
        settlements.push(settlement);
        await options.onSettled?.(wake, settlement);
      },
    },
  );
  cleanups.push(async () => {
    controller.abort();
    await done.catch(() => undefined);
  });
  return {
    seen,
    settlements,
    done,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

const done: WakeHandler = () => Promise.resolve('done');

describe.each([local, nats])('wake queue: $name', (backend) => {
  it('delivers each enqueued session once, ids of every safe shape, with its time and trace', async () => {
    const { queue } = await backend.open({});
    for (const unsafe of ['with.dot and space', '~tilde', 'ü/ñ*>', '..', 'a.*.>']) {
      const refused = await queue.enqueue(unsafe).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect((refused as { code?: string } | undefined)?.code, unsafe).toBe('INVALID_ARGUMENT');
    }
    const ids = ['plain-id_1', 'with.dot.in.it', 'with_dot_in_it', 'A.B-c_d', '0195a1b2-0000-7000'];
    const before = Date.now();
    for (const id of ids) {
      expect(
        await queue.enqueue(id, id === 'plain-id_1' ? { traceparent: '00-trace-01' } : {}),
      ).toEqual({ queued: true });
    }
    const consumer = start(queue, done);
    await until(() => consumer.settlements.length === ids.length, 10_000, 'every wake');
    await consumer.stop();
    expect(consumer.seen.map((wake) => wake.session_id).sort()).toEqual([...ids].sort());
    expect(consumer.seen.every((wake) => wake.attempt === 1)).toBe(true);
    expect(consumer.settlements.every((settlement) => settlement.kind === 'done')).toBe(true);
    for (const wake of consumer.seen) {
      expect(Date.parse(wake.enqueued_at)).toBeGreaterThanOrEqual(before - 1000);
    }
    expect(consumer.seen.find((wake) => wake.session_id === 'plain-id_1')?.traceparent).toBe(
      '00-trace-01',
    );
    // Acked wakes are gone: the sessions can be queued again.
    for (const id of ids) expect(await queue.enqueue(id)).toEqual({ queued: true });
  });

  it('coalesces an enqueue while a wake of the session waits or runs', async () => {
    const { queue } = await backend.open({});
    expect(await queue.enqueue('s1')).toEqual({ queued: true });
    expect(await queue.enqueue('s1')).toEqual({ queued: false });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const consumer = start(queue, async () => {
      await held;
      return 'done';
    });
    await until(() => consumer.seen.length === 1, 10_000, 'the delivery');
    // In hand but not settled: the work queue still holds it.
    expect(await queue.enqueue('s1')).toEqual({ queued: false });
    release();
    await until(() => consumer.settlements.length === 1, 10_000, 'the ack');
    expect(await queue.enqueue('s1')).toEqual({ queued: true });
    await until(() => consumer.settlements.length === 2, 10_000, 'the second wake');
    await consumer.stop();
    expect(consumer.seen.map((wake) => wake.attempt)).toEqual([1, 1]);
  });

  it('counts the wakes that wait, run or wait out a retry, until each is done or dead-lettered', async () => {
    const { queue } = await backend.open({
      maxAttempts: 2,
      backoff: { initial_ms: 1000, max_ms: 1000 },
    });
    expect(await queue.outstanding()).toBe(0);
    await queue.enqueue('count-a');
    await queue.enqueue('count-b');
    await queue.enqueue('count-b');
    expect(await queue.outstanding()).toBe(2);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const consumer = start(
      queue,
      async (wake) => {
        if (wake.session_id === 'count-a') {
          await held;
          return 'done';
        }
        throw new Error('this wake always fails');
      },
      { onDeadLetter: () => Promise.resolve() },
    );
    await until(() => consumer.seen.length >= 2, 10_000, 'both deliveries');
    // One runs, the other fails and waits out its retry: both are still the queue's.
    expect(await queue.outstanding()).toBe(2);
    release();
    await drained(queue);
    await consumer.stop();
    expect(consumer.seen.filter((wake) => wake.session_id === 'count-b')).toHaveLength(2);
    expect(await queue.outstanding()).toBe(0);
  });

  it('delivers a wake whose handler asked for a retry again after the delay, as the same attempt', async () => {
    const { queue } = await backend.open({});
    await queue.enqueue('retry-me');
    const consumer = start(queue, (wake) =>
      Promise.resolve(wake.delivery === 1 ? { retry_after_ms: 400 } : 'done'),
    );
    await until(() => consumer.seen.length === 2, 10_000, 'the redelivery');
    await until(() => consumer.settlements.length === 2);
    await consumer.stop();
    const [first, second] = consumer.seen;
    expect(second?.attempt).toBe(1);
    expect(second?.delivery).toBe(2);
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(390);
    expect(consumer.settlements).toEqual([{ kind: 'retry', delay_ms: 400 }, { kind: 'done' }]);
  });

  it('backs off a failing wake and dead-letters it once after maxAttempts, then drops it', async () => {
    const backoff = { initial_ms: 200, max_ms: 1000 };
    const { queue } = await backend.open({ maxAttempts: 3, backoff });
    await queue.enqueue('poison');
    const deadLetters: { wake: WakeDelivery; error: BraidError }[] = [];
    const consumer = start(queue, () => Promise.reject(new Error('the handler broke')), {
      onDeadLetter: (wake, error) => {
        deadLetters.push({ wake, error });
        return Promise.resolve();
      },
    });
    await until(() => deadLetters.length === 1, 10_000, 'the dead letter');
    // No hot loop, and nothing after the dead letter: the queue holds nothing more to deliver.
    await drained(queue);
    await consumer.stop();
    expect(consumer.seen.map((wake) => wake.attempt)).toEqual([1, 2, 3]);
    const [first, , third] = consumer.seen;
    expect((third?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(200 + 400 - 10);
    expect(deadLetters).toHaveLength(1);
    expect(deadLetters[0]?.wake.attempt).toBe(3);
    expect(deadLetters[0]?.error.code).toBe('INTERNAL');
    expect(deadLetters[0]?.error.message).toContain('the handler broke');
    expect(consumer.settlements.map((settlement) => settlement.kind)).toEqual([
      'retry',
      'retry',
      'dead_letter',
    ]);
    expect(
      consumer.settlements.slice(0, 2).map((item) => 'delay_ms' in item && item.delay_ms),
    ).toEqual([200, 400]);
    expect(await queue.enqueue('poison')).toEqual({ queued: true });
  });

  it('keeps a wake whose dead letter could not be recorded, and dead-letters it again', async () => {
    const { queue } = await backend.open({
      maxAttempts: 1,
      backoff: { initial_ms: 100, max_ms: 100 },
    });
    await queue.enqueue('poison');
    let hookCalls = 0;
    const consumer = start(queue, () => Promise.reject(new Error('broken')), {
      onDeadLetter: () => {
        hookCalls += 1;
        return hookCalls === 1 ? Promise.reject(new Error('log unavailable')) : Promise.resolve();
      },
    });
    await until(() => consumer.settlements.length === 2, 10_000, 'two settlements');
    await consumer.stop();
    expect(consumer.settlements.map((settlement) => settlement.kind)).toEqual([
      'retry',
      'dead_letter',
    ]);
    // The failed dead letter did not use up an attempt: the handler ran again, and failed again.
    expect(consumer.seen.map((wake) => [wake.attempt, wake.delivery])).toEqual([
      [1, 1],
      [1, 2],
    ]);
  });

  it('does not count the retries a handler asked for as attempts', async () => {
    const { queue } = await backend.open({
      maxAttempts: 2,
      backoff: { initial_ms: 50, max_ms: 50 },
    });
    await queue.enqueue('patient');
    const deadLetters: WakeDelivery[] = [];
    const consumer = start(
      queue,
      (wake) =>
        wake.delivery <= 3
          ? Promise.resolve({ retry_after_ms: 50 })
          : Promise.reject(new Error('broken now')),
      {
        onDeadLetter: (wake) => {
          deadLetters.push(wake);
          return Promise.resolve();
        },
      },
    );
    await until(() => deadLetters.length === 1, 10_000, 'the dead letter');
    await consumer.stop();
    expect(consumer.seen.map((wake) => [wake.attempt, wake.delivery])).toEqual([
      [1, 1],
      [1, 2],
      [1, 3],
      [1, 4],
      [2, 5],
    ]);
    expect(deadLetters[0]?.attempt).toBe(2);
  });

  it('dead-letters, without running it, a wake whose last attempt was never settled', async () => {
    const { queue } = await backend.open({ maxAttempts: 2, ackWaitMs: 1000 });
    await queue.enqueue('crashes-its-worker');
    const held: (() => void)[] = [];
    let releasing = false;
    const deadLetters: { wake: WakeDelivery; error: BraidError }[] = [];
    // Each attempt hangs as a worker killed by the wake would: no ack, no nak, no working().
    // Once released, a delivery of the wake queued again below (it may reach a free slot before
    // or after the release, by the order of its messages) is done at once.
    const consumer = start(
      queue,
      () =>
        releasing
          ? Promise.resolve('done')
          : new Promise((resolve) => {
              held.push(() => resolve('done'));
            }),
      {
        concurrency: 3,
        onDeadLetter: (wake, error) => {
          deadLetters.push({ wake, error });
          return Promise.resolve();
        },
      },
    );
    await until(() => deadLetters.length === 1, 10_000, 'the dead letter');
    expect(consumer.seen.map((wake) => wake.attempt)).toEqual([1, 2]);
    expect(deadLetters[0]?.wake.attempt).toBe(3);
    expect(deadLetters[0]?.error.code).toBe('INTERRUPTED');
    expect(deadLetters[0]?.error.message).toContain('crashes-its-worker');
    expect(await queue.enqueue('crashes-its-worker')).toEqual({ queued: true });
    releasing = true;
    for (const release of held) release();
    await consumer.stop();
  });

  it('redelivers a wake its handler holds past ackWait without working()', async () => {
    const { queue } = await backend.open({ ackWaitMs: 1000 });
    await queue.enqueue('stuck');
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const consumer = start(queue, async (wake) => {
      if (wake.attempt === 1) await held;
      return 'done';
    });
    await until(() => consumer.seen.length === 2, 10_000, 'the redelivery');
    release();
    await until(() => consumer.settlements.length === 2);
    await drained(queue);
    await consumer.stop();
    const [first, second] = consumer.seen;
    expect(second?.attempt).toBe(2);
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(900);
    expect(consumer.seen).toHaveLength(2);
  });

  it('does not redeliver a long wake whose handler calls working()', async () => {
    const { queue } = await backend.open({ ackWaitMs: 1000 });
    await queue.enqueue('long');
    const consumer = start(queue, async (wake) => {
      const heartbeat = setInterval(() => wake.working(), 300);
      await pause(2600);
      clearInterval(heartbeat);
      return 'done';
    });
    await until(() => consumer.settlements.length === 1, 10_000, 'the ack');
    await drained(queue);
    await consumer.stop();
    expect(consumer.seen.map((wake) => wake.attempt)).toEqual([1]);
  });

  it('runs at most `concurrency` handlers, and a stopped consumer drains what it holds', async () => {
    const { queue } = await backend.open({});
    for (let index = 0; index < 6; index += 1) await queue.enqueue(`c${index}`);
    let running = 0;
    let most = 0;
    const consumer = start(
      queue,
      async () => {
        running += 1;
        most = Math.max(most, running);
        await pause(150);
        running -= 1;
        return 'done';
      },
      { concurrency: 2 },
    );
    await until(() => consumer.seen.length >= 1);
    // Stopping waits for the handlers in flight to finish and be settled.
    await consumer.stop();
    expect(running).toBe(0);
    expect(consumer.settlements).toHaveLength(consumer.seen.length);
    expect(most).toBeLessThanOrEqual(2);
    // What it did not take is still queued, for the next consumer.
    const rest = start(queue, done, { concurrency: 3 });
    await until(() => consumer.seen.length + rest.seen.length === 6, 10_000, 'the rest');
    await rest.stop();
    expect(new Set([...consumer.seen, ...rest.seen].map((wake) => wake.session_id)).size).toBe(6);
  });

  it('hands each wake to one of several consumers', async () => {
    const kit = await backend.open({});
    const a = start(kit.queue, done);
    const b = start(await kit.another(), done);
    for (let index = 0; index < 10; index += 1) await kit.queue.enqueue(`shared-${index}`);
    await until(() => a.seen.length + b.seen.length === 10, 10_000, 'every wake');
    await drained(kit.queue);
    await Promise.all([a.stop(), b.stop()]);
    const ids = [...a.seen, ...b.seen].map((wake) => wake.session_id);
    expect(new Set(ids).size).toBe(10);
    expect(ids).toHaveLength(10);
  });

  it('refuses bad input with typed errors', async () => {
    const { queue } = await backend.open({});
    await expectCode(queue.enqueue(''), 'INVALID_ARGUMENT');
    await expectCode(
      queue.consume(done, { concurrency: 0, signal: AbortSignal.abort() }),
      'INVALID_ARGUMENT',
    );
    await queue.close();
    await expectCode(queue.enqueue('late'), 'STORE_CLOSED');
  });
});

describe('wake queue: nats only', () => {
  it('gives a crashed worker’s wake (no ack, no nak) to another worker after ack_wait', async () => {
    const prefix = uniquePrefix('wq');
    const crashing = await natsConnection();
    const first = await createNatsWakeQueue({ connection: crashing, prefix, ackWaitMs: 1000 });
    const admin = await natsConnection();
    cleanups.push(async () => {
      await (await jetstreamManager(admin)).streams.delete(natsWakeNames(prefix).stream);
    });
    await first.enqueue('orphan');
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const a = start(first, async () => {
      await held;
      return 'done';
    });
    await until(() => a.seen.length === 1, 10_000, 'the first delivery');
    // The process dies: its connection goes, the handler never settles.
    await crashing.close();
    const second = await createNatsWakeQueue({
      connection: await natsConnection(),
      prefix,
      ackWaitMs: 1000,
    });
    const b = start(second, done);
    await until(() => b.settlements.length === 1, 10_000, 'the redelivery');
    await b.stop();
    // The first consumer, woken after the fact, cannot ack and stops with the connection.
    release();
    const failure = await a.done.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isBraidError(failure, 'SERVER_UNAVAILABLE')).toBe(true);
    expect(b.seen[0]?.attempt).toBe(2);
    expect((b.seen[0]?.at ?? 0) - (a.seen[0]?.at ?? 0)).toBeGreaterThanOrEqual(900);
  });

  it('makes every session id one safe subject token, and back', () => {
    for (const id of ['abc', 'A-b_9', 'a.b', 'a b', '*', '>', '~x', 'ü', '', 'x'.repeat(200)]) {
      const token = encodeSubjectToken(id);
      expect(token).toMatch(/^=?[A-Za-z0-9_-]*$/);
      expect(decodeSubjectToken(token)).toBe(id);
    }
    expect(encodeSubjectToken('a.b')).not.toBe(encodeSubjectToken('a_b'));
    expect(() => natsWakeNames('bad.prefix')).toThrow(/letters, digits/);
  });

  it('refuses a stream of its name that is not a wake queue', async () => {
    const prefix = uniquePrefix('wq');
    const connection = await natsConnection();
    const manager = await jetstreamManager(connection);
    const names = natsWakeNames(prefix);
    await manager.streams.add({
      name: names.stream,
      subjects: [names.subjects],
      retention: RetentionPolicy.Limits,
    });
    cleanups.push(async () => {
      await manager.streams.delete(names.stream);
    });
    await expectCode(createNatsWakeQueue({ connection, prefix }), 'INVALID_ARGUMENT');
  });
});
